include:
  - base

extend:
  service_like:
    test.succeed_without_changes:
      - comment: extended comment
      - watch:
        - test: config_like
