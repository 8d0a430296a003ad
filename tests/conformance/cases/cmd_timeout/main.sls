hang:
  cmd.run:
    - name: sleep 30
    - timeout: 1

unless_timed_out:
  cmd.run:
    - name: echo ran
    - unless: sleep 30
    - timeout: 1

onlyif_timed_out:
  cmd.run:
    - name: echo ran
    - onlyif: sleep 30
    - timeout: 1

timeout_not_a_number:
  cmd.run:
    - name: echo hi
    - timeout: '5'

in_time:
  cmd.run:
    - name: echo fast
    - timeout: 30
