old_log:
  file.managed:
    - name: /tmp/halite-oracle/file_tidied/logs/app.log
    - makedirs: True
    - contents: log

keep:
  file.managed:
    - name: /tmp/halite-oracle/file_tidied/logs/keep.txt
    - contents: keep

tidy:
  file.tidied:
    - name: /tmp/halite-oracle/file_tidied/logs
    - matches:
      - '.*\.log$'
    - require:
      - file: old_log
      - file: keep

tidy_again:
  file.tidied:
    - name: /tmp/halite-oracle/file_tidied/logs
    - matches:
      - '.*\.log$'
    - require:
      - file: tidy

tidy_missing:
  file.tidied:
    - name: /tmp/halite-oracle/file_tidied/nowhere
