#!yamlex
extend:
  plainstate:
    test.succeed_without_changes:
      - require:
        - test: from-yamlex
