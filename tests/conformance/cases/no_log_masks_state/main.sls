secret step:
  test.succeed_with_changes:
    - name: pw-hunter2
    - no_log: True

echo hunter2-out:
  cmd.run:
    - no_log: True

/tmp/halite-oracle/no_log_masks_state/secret.txt:
  file.managed:
    - makedirs: True
    - contents: hunter2
    - no_log: True

not hidden:
  test.succeed_with_changes:
    - name: shown-name
    - no_log: False

string false is truthy:
  test.succeed_without_changes:
    - name: still-masked
    - no_log: 'False'
