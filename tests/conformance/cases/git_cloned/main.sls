{% set base = '/tmp/halite-oracle/git_cloned' %}
{% set url = 'file://' ~ base ~ '/remote' %}
{% set env = "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z" %}
remote:
  cmd.run:
    - name: |
        set -e
        {{ env }}
        git init -q -b main {{ base }}/remote
        cd {{ base }}/remote
        echo one > f && git add f && git commit -qm one
        git branch dev

clone:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work
    - branch: main

again:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work
    - branch: main

no_branch:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work

switch:
  git.cloned:
    - name: {{ url }}
    - target: {{ base }}/work
    - branch: dev

relative:
  git.cloned:
    - name: {{ url }}
    - target: relative/path
