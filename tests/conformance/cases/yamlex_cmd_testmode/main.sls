#!yamlex
run_it:
  cmd.run:
    - name: echo hello
script_it:
  cmd.script:
    - name: /tmp/halite-oracle/yamlex_cmd_testmode/absent.sh arg1
