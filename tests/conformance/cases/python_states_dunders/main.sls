first:
  test.succeed_without_changes

wrapped-file:
  wrapper.managed:
    - name: /tmp/halite-oracle/python_states_dunders/a/b.conf
    - contents: hello from __states__

report:
  wrapper.report:
    - require:
      - wrapper: wrapped-file
