other_state:
  test.succeed_without_changes
