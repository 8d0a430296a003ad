#!yamlex
greet:
  test.succeed_without_changes:
    - name: original
other:
  test.succeed_without_changes:
    - name: other-name
extend:
  plainstate:
    test.succeed_without_changes:
      - name: from-yamlex
