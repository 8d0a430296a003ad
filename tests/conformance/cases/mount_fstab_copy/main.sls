fstab_copy:
  file.managed:
    - name: /tmp/halite-oracle/mount_fstab_copy/fstab
    - makedirs: True
    - contents: |
        # test fstab
        proc /proc proc defaults 0 0

entry_only:
  mount.mounted:
    - name: /tmp/halite-oracle/mount_fstab_copy/mnt
    - device: tmpfs
    - fstype: tmpfs
    - opts: size=1m,noexec
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_copy/fstab
    - require:
      - file: fstab_copy

entry_again:
  mount.mounted:
    - name: /tmp/halite-oracle/mount_fstab_copy/mnt
    - device: tmpfs
    - fstype: tmpfs
    - opts: size=1m,noexec
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_copy/fstab
    - require:
      - mount: entry_only

entry_changed:
  mount.mounted:
    - name: /tmp/halite-oracle/mount_fstab_copy/mnt
    - device: tmpfs
    - fstype: tmpfs
    - opts: size=2m
    - mount: False
    - mkmnt: True
    - config: /tmp/halite-oracle/mount_fstab_copy/fstab
    - require:
      - mount: entry_again

purge:
  mount.unmounted:
    - name: /tmp/halite-oracle/mount_fstab_copy/mnt
    - config: /tmp/halite-oracle/mount_fstab_copy/fstab
    - persist: True
    - require:
      - mount: entry_changed

