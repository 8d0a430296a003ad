{% set base = '/tmp/halite-oracle/git_detached_test' %}
{% set url = 'file://' ~ base ~ '/remote' %}
{% set script = "set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
git init -q -b main " ~ base ~ "/remote
cd " ~ base ~ "/remote
echo one > f && git add f && git commit -qm one
git tag v1
git clone -q " ~ url ~ " " ~ base ~ "/work
" %}
{% set _ = salt['cmd.run'](script, python_shell=True) %}

predict_clone:
  git.detached:
    - name: {{ url }}
    - rev: v1
    - target: {{ base }}/new

predict_fetch:
  git.detached:
    - name: {{ url }}
    - rev: v1
    - target: {{ base }}/work

known_hash:
  git.detached:
    - name: {{ url }}
    - rev: 629907ce94df3d28d7c0a2b109b2380245b7e850
    - target: {{ base }}/work
