#!yamlex
root_group:
  group.present:
    - name: root
new_group:
  group.present:
    - name: halite-oracle-nosuchgroup
gone_group:
  group.absent:
    - name: halite-oracle-nosuchgroup
present_removed:
  group.absent:
    - name: root
