include:
  - plain
{% set word = 'merged' %}
again:
  test.succeed_without_changes:
    - name: first
again:
  test.succeed_with_changes:
    - name: {{ word }}
