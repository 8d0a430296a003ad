grouped:
  test.configurable_test_state:
    - changes: False
    - comment: shared
    - names:
      - first
      - second:
        - comment: own comment
        - changes: True
      - third

after:
  test.succeed_without_changes:
    - require:
      - test: second
