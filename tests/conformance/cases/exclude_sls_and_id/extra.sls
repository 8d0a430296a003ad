extra_one:
  test.succeed_with_changes
