fstab:
  file.managed:
    - name: /tmp/halite-oracle/mount_mod_watch_unmounted/fstab
    - makedirs: True
    - contents: |
        # test fstab

gone:
  mount.unmounted:
    - name: /tmp/halite-oracle/mount_mod_watch_unmounted/mnt
    - config: /tmp/halite-oracle/mount_mod_watch_unmounted/fstab
    - watch:
      - file: fstab
