other_one:
  test.succeed_without_changes
other_two:
  test.fail_without_changes
