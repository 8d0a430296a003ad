flaky:
  test.succeed_with_changes:
    - retry:
        attempts: 4
        interval: 2
        until: True
