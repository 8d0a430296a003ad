fstab:
  file.managed:
    - name: /tmp/halite-oracle/mount_fstab_present/fstab
    - makedirs: True
    - contents: |
        # test fstab
        proc /proc proc defaults 0 0

added:
  mount.fstab_present:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt/
    - fs_vfstype: tmpfs
    - fs_mntops: size=1m,noexec
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - file: fstab

again:
  mount.fstab_present:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt
    - fs_vfstype: tmpfs
    - fs_mntops: size=1m,noexec
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - mount: added

changed:
  mount.fstab_present:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt
    - fs_vfstype: tmpfs
    - fs_mntops: size=2m
    - fs_passno: 2
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - mount: again

kept:
  mount.fstab_present:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt
    - fs_vfstype: tmpfs
    - fs_mntops: size=3m
    - not_change: True
    - mount: False
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - mount: changed

removed:
  mount.fstab_absent:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - mount: kept

removed_again:
  mount.fstab_absent:
    - name: tmpfs
    - fs_file: /tmp/halite-oracle/mount_fstab_present/mnt
    - config: /tmp/halite-oracle/mount_fstab_present/fstab
    - require:
      - mount: removed
