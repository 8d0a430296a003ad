{% set base = '/tmp/halite-oracle/git_latest_test' %}
{% set url = 'file://' ~ base ~ '/remote' %}
{% set script = "set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
git init -q -b main " ~ base ~ "/remote
cd " ~ base ~ "/remote
echo one > f && git add f && git commit -qm one
git clone -q " ~ url ~ " " ~ base ~ "/behind
git clone -q " ~ url ~ " " ~ base ~ "/dirty
echo local >> " ~ base ~ "/dirty/f
echo two > g && git add g && git commit -qm two
git clone -q " ~ url ~ " " ~ base ~ "/current
" %}
{% set _ = salt['cmd.run'](script, python_shell=True) %}

predict_clone:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/new

predict_update:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/behind

predict_reset:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/dirty
    - force_reset: True

current:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/current
