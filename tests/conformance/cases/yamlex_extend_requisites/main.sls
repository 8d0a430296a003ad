include:
  - ylx
  - yext
extend:
  orphan:
    test.succeed_without_changes:
      - require:
        - test: from-plain
plainstate:
  test.succeed_without_changes:
    - name: plain name
    - require:
      - test: present
