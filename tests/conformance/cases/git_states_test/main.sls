{% set base = '/tmp/halite-oracle/git_states_test' %}
{% set url = 'file://' ~ base ~ '/remote' %}
{% set script = "set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
git init -q -b main " ~ base ~ "/remote
cd " ~ base ~ "/remote
echo one > f && git add f && git commit -qm one
git branch dev
git config user.name Old
git config --add foo.bar one
git clone -q " ~ url ~ " " ~ base ~ "/work
" %}
{% set _ = salt['cmd.run'](script, python_shell=True) %}

cloned_new:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/new
    - branch: main

cloned_switch:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work
    - branch: dev

cloned_same:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work
    - branch: main

present_new:
  git.present:
    - name: {{ base }}/bare.git

present_exists:
  git.present:
    - name: {{ base }}/remote
    - bare: False

config_new:
  git.config_set:
    - name: user.email
    - value: t@example.com
    - repo: {{ base }}/remote

config_change:
  git.config_set:
    - name: user.name
    - value: New
    - repo: {{ base }}/remote

config_multivar:
  git.config_set:
    - name: foo.bar
    - multivar: [one, two]
    - repo: {{ base }}/remote

unset:
  git.config_unset:
    - name: user.name
    - repo: {{ base }}/remote

unset_nothing:
  git.config_unset:
    - name: no.such
    - repo: {{ base }}/remote
