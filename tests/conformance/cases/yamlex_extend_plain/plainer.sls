plainstate:
  test.succeed_without_changes:
    - name: plain-original
