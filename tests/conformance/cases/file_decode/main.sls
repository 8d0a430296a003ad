dir:
  file.directory:
    - name: /tmp/halite-oracle/file_decode

new_file:
  file.decode:
    - name: /tmp/halite-oracle/file_decode/hello.txt
    - encoded_data: aGVsbG8gd29ybGQK
    - require:
      - file: dir

same_again:
  file.decode:
    - name: /tmp/halite-oracle/file_decode/hello.txt
    - encoded_data: |
        aGVsbG8gd29ybGQK
    - require:
      - file: new_file

changed:
  file.decode:
    - name: /tmp/halite-oracle/file_decode/hello.txt
    - encoded_data: YnllCg==
    - checksum: sha256
    - require:
      - file: same_again
