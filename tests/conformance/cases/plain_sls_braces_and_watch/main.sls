changed:
  test.succeed_with_changes:
    - name: changed

required:
  test.succeed_without_changes:
    - name: required

watcher:
  test.succeed_without_changes:
    - name: watcher
    - require:
      - test: required
    - watch:
      - test: changed

braces:
  test.configurable_test_state:
    - changes: False
    - result: True
    - comment: '{ no jinja tag } {b: 1} }{'
