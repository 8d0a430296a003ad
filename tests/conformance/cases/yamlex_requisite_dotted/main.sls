#!yamlex
target:
  cmd.run:
    - name: echo hi
dotted:
  test.succeed_without_changes:
    - require:
      - cmd.run: target
