target:
  file.managed:
    - name: /tmp/halite-oracle/file_hardlink/target.txt
    - makedirs: True
    - contents: data

plain:
  file.managed:
    - name: /tmp/halite-oracle/file_hardlink/plain.txt
    - contents: plain

link:
  file.hardlink:
    - name: /tmp/halite-oracle/file_hardlink/link.txt
    - target: /tmp/halite-oracle/file_hardlink/target.txt
    - require:
      - file: target

link_again:
  file.hardlink:
    - name: /tmp/halite-oracle/file_hardlink/link.txt
    - target: /tmp/halite-oracle/file_hardlink/target.txt
    - require:
      - file: link

no_force:
  file.hardlink:
    - name: /tmp/halite-oracle/file_hardlink/plain.txt
    - target: /tmp/halite-oracle/file_hardlink/target.txt
    - require:
      - file: plain
      - file: target

forced:
  file.hardlink:
    - name: /tmp/halite-oracle/file_hardlink/plain.txt
    - target: /tmp/halite-oracle/file_hardlink/target.txt
    - force: True
    - onfail:
      - file: no_force

missing_target:
  file.hardlink:
    - name: /tmp/halite-oracle/file_hardlink/nolink.txt
    - target: /tmp/halite-oracle/file_hardlink/missing.txt
