#!yamlex
present:
  test.succeed_without_changes: []
orphan:
  test.succeed_without_changes:
    - name: orphan name
    - require:
      - test: present
