reports_change:
  cmd.run:
    - name: echo working; echo "changed=yes comment='did it'"
    - stateful: True

reports_nothing:
  cmd.run:
    - name: echo "changed=no comment='nothing to do'"
    - stateful: True
