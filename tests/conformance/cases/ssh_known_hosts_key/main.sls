plain:
  ssh_known_hosts.present:
    - name: example.test
    - key: AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm
    - enc: ssh-ed25519
    - hash_known_hosts: False
    - config: /tmp/halite-oracle/ssh_known_hosts_key/known_hosts

plain_again:
  ssh_known_hosts.present:
    - name: example.test
    - key: AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm
    - enc: ssh-ed25519
    - hash_known_hosts: False
    - config: /tmp/halite-oracle/ssh_known_hosts_key/known_hosts
    - require:
      - ssh_known_hosts: plain

key_without_enc:
  ssh_known_hosts.present:
    - name: example.test
    - key: AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm
    - config: relative/known_hosts

remove:
  ssh_known_hosts.absent:
    - name: example.test
    - config: /tmp/halite-oracle/ssh_known_hosts_key/known_hosts
    - require:
      - ssh_known_hosts: plain_again

remove_again:
  ssh_known_hosts.absent:
    - name: example.test
    - config: /tmp/halite-oracle/ssh_known_hosts_key/known_hosts
    - require:
      - ssh_known_hosts: remove
