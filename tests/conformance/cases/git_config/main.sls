{% set repo = '/tmp/halite-oracle/git_config/repo' %}
repo:
  git.present:
    - name: {{ repo }}
    - bare: False

set:
  git.config_set:
    - name: user.name
    - value: Foo Bar
    - repo: {{ repo }}

again:
  git.config_set:
    - name: user.name
    - value: Foo Bar
    - repo: {{ repo }}

change:
  git.config_set:
    - name: user.name
    - value: Baz
    - repo: {{ repo }}

multivar:
  git.config_set:
    - name: foo.bar
    - multivar:
      - one
      - two
    - repo: {{ repo }}

multivar_again:
  git.config_set:
    - name: foo.bar
    - multivar:
      - one
      - two
    - repo: {{ repo }}

unset_nothing:
  git.config_unset:
    - name: no.such
    - repo: {{ repo }}

multivar_refused:
  git.config_unset:
    - name: foo.bar
    - repo: {{ repo }}

no_repo:
  git.config_set:
    - name: user.email
    - value: x@example.com
