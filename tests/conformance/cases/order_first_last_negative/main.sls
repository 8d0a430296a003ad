plain_one:
  test.succeed_without_changes

at_last:
  test.succeed_without_changes:
    - order: last

at_first:
  test.succeed_without_changes:
    - order: first

minus_one:
  test.succeed_without_changes:
    - order: -1

ten:
  test.succeed_without_changes:
    - order: 10

plain_two:
  test.succeed_without_changes
