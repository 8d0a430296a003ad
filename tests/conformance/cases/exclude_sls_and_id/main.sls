include:
  - extra
  - other

exclude:
  - sls: extra
  - id: other_two

kept:
  test.succeed_without_changes
