{% set base = '/tmp/halite-oracle/git_detached' %}
{% set url = 'file://' ~ base ~ '/remote' %}
{% set script = "set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
git init -q -b main " ~ base ~ "/remote
cd " ~ base ~ "/remote
echo one > f && git add f && git commit -qm one
git tag v1
git branch dev
echo two > f && git commit -qam two
" %}
{% set _ = salt['cmd.run'](script, python_shell=True) %}

at_tag:
  git.detached:
    - name: {{ url }}
    - rev: v1
    - target: {{ base }}/work

again:
  git.detached:
    - name: {{ url }}
    - rev: v1
    - target: {{ base }}/work

at_hash:
  git.detached:
    - name: {{ url }}
    - rev: 7dd609abfe61e0313a345e3553a02d92c7a38149
    - target: {{ base }}/work

at_branch:
  git.detached:
    - name: {{ url }}
    - rev: dev
    - target: {{ base }}/work

at_main:
  git.detached:
    - name: {{ url }}
    - rev: main
    - target: {{ base }}/work

unknown:
  git.detached:
    - name: {{ url }}
    - rev: nosuchrev
    - target: {{ base }}/work

relative:
  git.detached:
    - name: {{ url }}
    - rev: v1
    - target: relative
