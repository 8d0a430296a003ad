tree:
  file.directory:
    - name: /tmp/halite-oracle/file_mknod_pruned/tree/a/b
    - makedirs: True

full:
  file.managed:
    - name: /tmp/halite-oracle/file_mknod_pruned/tree/full/keep.txt
    - makedirs: True
    - contents: keep

fifo_new:
  file.mknod:
    - name: /tmp/halite-oracle/file_mknod_pruned/fifo
    - ntype: p
    - mode: '0640'

fifo_again:
  file.mknod:
    - name: /tmp/halite-oracle/file_mknod_pruned/fifo
    - ntype: p
    - mode: '0640'
    - require:
      - file: fifo_new

fifo_mode:
  file.mknod:
    - name: /tmp/halite-oracle/file_mknod_pruned/fifo
    - ntype: p
    - mode: '0600'
    - require:
      - file: fifo_again

not_a_fifo:
  file.mknod:
    - name: /tmp/halite-oracle/file_mknod_pruned/tree/full/keep.txt
    - ntype: p
    - require:
      - file: full

bad_type:
  file.mknod:
    - name: /tmp/halite-oracle/file_mknod_pruned/weird
    - ntype: x

prune_single_full:
  file.pruned:
    - name: /tmp/halite-oracle/file_mknod_pruned/tree/full
    - require:
      - file: full

prune_tree:
  file.pruned:
    - name: /tmp/halite-oracle/file_mknod_pruned/tree
    - ignore_errors: True
    - require:
      - file: tree

prune_missing:
  file.pruned:
    - name: /tmp/halite-oracle/file_mknod_pruned/nothing-here

prune_empty:
  file.directory:
    - name: /tmp/halite-oracle/file_mknod_pruned/empty

prune_single:
  file.pruned:
    - name: /tmp/halite-oracle/file_mknod_pruned/empty
    - require:
      - file: prune_empty
