#!yamlex
new_dir:
  file.directory:
    - name: /tmp/halite-oracle/yamlex_file_states/dir
again_dir:
  file.directory:
    - name: /tmp/halite-oracle/yamlex_file_states/dir
a_file:
  file.managed:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
    - contents: |
        one
        two
exists_present:
  file.exists:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
exists_missing:
  file.exists:
    - name: /tmp/halite-oracle/yamlex_file_states/nothing
line_add:
  file.line:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
    - content: three
    - mode: ensure
    - after: two
line_again:
  file.line:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
    - content: three
    - mode: ensure
    - after: two
link_new:
  file.symlink:
    - name: /tmp/halite-oracle/yamlex_file_states/link
    - target: /tmp/halite-oracle/yamlex_file_states/dir
link_again:
  file.symlink:
    - name: /tmp/halite-oracle/yamlex_file_states/link
    - target: /tmp/halite-oracle/yamlex_file_states/dir
absent_file:
  file.absent:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
absent_again:
  file.absent:
    - name: /tmp/halite-oracle/yamlex_file_states/dir/f
