#!yamlex
root_user:
  user.present:
    - name: root
new_user:
  user.present:
    - name: halite-oracle-nosuchuser
localhost_entry:
  host.present:
    - name: localhost
    - ip: 127.0.0.1
new_host:
  host.present:
    - name: halite-oracle-nosuchhost
    - ip: 127.0.0.9
commented_host:
  host.present:
    - name: halite-oracle-otherhost
    - ip: 127.0.0.10
    - comment: a note
gone_user:
  user.absent:
    - name: halite-oracle-nosuchuser
