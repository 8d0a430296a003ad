src:
  file.managed:
    - name: /tmp/halite-oracle/file_rename/old.txt
    - makedirs: True
    - contents: moved

other:
  file.managed:
    - name: /tmp/halite-oracle/file_rename/other.txt
    - contents: other

move_it:
  file.rename:
    - name: /tmp/halite-oracle/file_rename/sub/new.txt
    - source: /tmp/halite-oracle/file_rename/old.txt
    - makedirs: True
    - require:
      - file: src

already_moved:
  file.rename:
    - name: /tmp/halite-oracle/file_rename/sub/new.txt
    - source: /tmp/halite-oracle/file_rename/old.txt
    - require:
      - file: move_it

no_force:
  file.rename:
    - name: /tmp/halite-oracle/file_rename/sub/new.txt
    - source: /tmp/halite-oracle/file_rename/other.txt
    - require:
      - file: move_it
      - file: other

forced:
  file.rename:
    - name: /tmp/halite-oracle/file_rename/sub/new.txt
    - source: /tmp/halite-oracle/file_rename/other.txt
    - force: True
    - require:
      - file: no_force

relative:
  file.rename:
    - name: relative/path
    - source: /tmp/halite-oracle/file_rename/x
