include:
  - .sibling

pkg_init_state:
  test.succeed_without_changes:
    - require:
      - test: sibling_state
