onelist:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_source_list_missing/a.txt
    - source:
      - salt://nope.txt

onestr:
  file.managed:
    - name: /tmp/halite-oracle/file_managed_source_list_missing/b.txt
    - source: salt://nope.txt
