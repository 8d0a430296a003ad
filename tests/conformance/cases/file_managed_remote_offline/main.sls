nohash:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_remote_offline/nohash.txt
    - source: https://127.0.0.1:9/nohash.txt

refused:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_remote_offline/refused.txt
    - source: http://127.0.0.1:9/refused.txt
    - skip_verify: True

none_answers:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_remote_offline/none.txt
    - source:
      - http://127.0.0.1:9/a.txt
      - https://127.0.0.1:9/b.txt
    - skip_verify: True

bad_hash:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_remote_offline/bad.txt
    - source: http://127.0.0.1:9/bad.txt
    - source_hash: sha256=abc
