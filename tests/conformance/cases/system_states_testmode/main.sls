/usr/bin/halite-oracle-job --never:
  cron.present:
    - user: root
    - minute: 5

/usr/bin/halite-oracle-gone:
  cron.absent:
    - user: root

HALITE_ORACLE_ENV:
  cron.env_present:
    - value: x
    - user: root

HALITE_ORACLE_ENV_GONE:
  cron.env_absent:
    - user: root

/tmp/halite-oracle/system_states_testmode/swapfile:
  mount.swap:
    - config: /tmp/halite-oracle/system_states_testmode/fstab

halite_no_such_module:
  kmod.present: []

/tmp/halite-oracle/system_states_testmode/mnt:
  mount.mounted:
    - device: tmpfs
    - fstype: tmpfs
    - mkmnt: True
    - config: /tmp/halite-oracle/system_states_testmode/fstab
