include:
  - ylx
  - plainer
extend:
  greet:
    test.succeed_without_changes:
      - name: from-plain
