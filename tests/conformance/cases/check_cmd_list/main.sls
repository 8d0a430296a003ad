all_pass:
  cmd.run:
    - name: 'true'
    - check_cmd:
      - 'true'
      - 'test 1 -eq 1'

one_fails:
  cmd.run:
    - name: 'true'
    - check_cmd:
      - 'true'
      - 'false'
