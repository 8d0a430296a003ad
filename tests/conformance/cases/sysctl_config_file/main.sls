missing_key:
  sysctl.present:
    - name: net.halite.nosuchkey
    - value: 1
    - config: /tmp/halite-oracle/sysctl_config_file/sysctl.d/99-salt.conf
