#!yamlex
setup_dir:
  file.directory:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/there
new_dir:
  file.directory:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/new
existing_dir:
  file.directory:
    - name: /tmp
absent_missing:
  file.absent:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/nothing
absent_present:
  file.absent:
    - name: /tmp
exists_missing:
  file.exists:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/nothing
exists_present:
  file.exists:
    - name: /tmp
line_missing:
  file.line:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/nothing
    - content: hello
    - mode: ensure
    - after: x
link_new:
  file.symlink:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/link
    - target: /tmp
missing_missing:
  file.missing:
    - name: /tmp/halite-oracle/yamlex_file_states_testmode/nothing
missing_present:
  file.missing:
    - name: /tmp
