{% set base = '/tmp/halite-oracle/git_latest_local_changes' %}
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
        git clone -q {{ url }} {{ base }}/work
        echo local >> {{ base }}/work/f

dirty_uptodate:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

advance:
  cmd.run:
    - name: |
        set -e
        {{ env }}
        cd {{ base }}/remote
        echo two > g && git add g && git commit -qm two

refused:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

reset:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work
    - force_reset: True

rewrite:
  cmd.run:
    - name: |
        set -e
        {{ env }}
        cd {{ base }}/remote
        git reset -q --hard HEAD~1
        echo three > h && git add h && git commit -qm three

not_ff:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

forced:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work
    - force_reset: True
