conf:
  file.managed:
    - name: /tmp/halite-oracle/file_keyvalue/sshd_config
    - makedirs: True
    - contents: |
        Port 22
        #PermitRootLogin yes
        UseDNS yes

set_values:
  file.keyvalue:
    - name: /tmp/halite-oracle/file_keyvalue/sshd_config
    - separator: ' '
    - uncomment: '#'
    - key_values:
        Port: 2222
        PermitRootLogin: 'no'
        X11Forwarding: 'no'
    - append_if_not_found: True
    - require:
      - file: conf

again_unchanged:
  file.keyvalue:
    - name: /tmp/halite-oracle/file_keyvalue/sshd_config
    - separator: ' '
    - key: UseDNS
    - value: 'yes'
    - require:
      - file: set_values

missing_file:
  file.keyvalue:
    - name: /tmp/halite-oracle/file_keyvalue/absent.conf
    - key: a
    - value: b
