include:
  - other
again:
  test.succeed_without_changes:
    - name: first
again:
  test.succeed_with_changes:
    - name: "{{ not rendered }}"
    - require:
      - test: other_id
