#!yamlex
greet:
  test.succeed_without_changes:
    - name: first
!reset greet:
  test.succeed_with_changes:
    - name: reset-wins
plain:
  test.succeed_without_changes:
    - name: plain-first
plain:
  test.succeed_with_changes: []
agg: !aggregate
  test.succeed_without_changes:
    - name: agg-name
agg: !aggregate
  test.succeed_without_changes:
    - comment: ignored
