{% set base = '/tmp/halite-oracle/git_latest' %}
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
        git tag v1
        git branch dev

clone:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

again:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

advance:
  cmd.run:
    - name: |
        set -e
        {{ env }}
        cd {{ base }}/remote
        echo two >> f && git commit -qam two

update:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/work

tag_rev:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/tagged
    - rev: v1

branch_rev:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/branch
    - rev: dev
    - branch: dev

unknown_rev:
  git.latest:
    - name: {{ url }}
    - target: {{ base }}/nope
    - rev: nosuchrev
