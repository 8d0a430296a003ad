target:
  file.managed:
    - name: /tmp/halite-oracle/file_patch/target.txt
    - makedirs: True
    - contents: |
        one
        two
        three

apply:
  file.patch:
    - name: /tmp/halite-oracle/file_patch/target.txt
    - source: salt://fix.patch
    - require:
      - file: target

apply_again:
  file.patch:
    - name: /tmp/halite-oracle/file_patch/target.txt
    - source: salt://fix.patch
    - require:
      - file: apply

bad_options:
  file.patch:
    - name: /tmp/halite-oracle/file_patch/target.txt
    - source: salt://fix.patch
    - options: -N -o /tmp/x
    - require:
      - file: apply_again

missing_target:
  file.patch:
    - name: /tmp/halite-oracle/file_patch/nothing.txt
    - source: salt://fix.patch

show:
  cmd.run:
    - name: cat /tmp/halite-oracle/file_patch/target.txt
    - require:
      - file: apply_again
