config_like:
  test.succeed_with_changes

service_like:
  test.succeed_without_changes:
    - comment: original
