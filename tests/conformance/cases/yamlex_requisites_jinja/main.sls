#!jinja|yamlex
{% set base = '/tmp/halite-oracle/yamlex_requisites_jinja' %}
{% set who = 'world' %}
greet:
  test.succeed_with_changes:
    - name: hello {{ who }}
needs_greet:
  test.succeed_without_changes:
    - require:
      - test: greet
by_name:
  test.succeed_without_changes:
    - require:
      - test: hello {{ who }}
{% for n in ['one', 'two'] %}
item_{{ n }}:
  test.succeed_without_changes:
    - name: {{ n }} {{ n | upper }}
{% endfor %}
broken:
  test.fail_without_changes:
    - name: broken thing
after_broken:
  test.succeed_with_changes:
    - watch:
      - test: broken
      - test: greet
on_change:
  test.succeed_without_changes:
    - onchanges:
      - test: greet
on_fail:
  test.succeed_without_changes:
    - onfail:
      - test: broken
listener:
  test.succeed_without_changes:
    - name: listening {{ who }}
    - listen:
      - test: greet
many:
  test.succeed_without_changes:
    - names:
      - first name
      - second: []
echo:
  cmd.run:
    - name: echo {{ who }}
