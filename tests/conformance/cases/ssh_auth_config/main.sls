add_whole_line:
  ssh_auth.present:
    - name: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm me@box
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys

again_bare_key:
  ssh_auth.present:
    - name: AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm
    - user: root
    - enc: ed25519
    - comment: me@box
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys
    - require:
      - ssh_auth: add_whole_line

with_options:
  ssh_auth.present:
    - name: no-pty ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQmfhJKBuTZIbwc/Ja5q2+PV6L4oFjN5J961pjL0cbm me@box
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys
    - require:
      - ssh_auth: again_bare_key

invalid_key:
  ssh_auth.present:
    - name: not a key
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys

absent_missing:
  ssh_auth.absent:
    - name: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPdjoB1M79q9hluLDDdLA3mVRJXPTpvvN2DixAw0Lh6W other
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys
    - require:
      - ssh_auth: with_options

manage_keys:
  ssh_auth.manage:
    - ssh_keys:
      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPdjoB1M79q9hluLDDdLA3mVRJXPTpvvN2DixAw0Lh6W other
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys
    - require:
      - ssh_auth: absent_missing

absent_present:
  ssh_auth.absent:
    - name: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPdjoB1M79q9hluLDDdLA3mVRJXPTpvvN2DixAw0Lh6W other
    - user: root
    - config: /tmp/halite-oracle/ssh_auth_config/authorized_keys
    - require:
      - ssh_auth: manage_keys
