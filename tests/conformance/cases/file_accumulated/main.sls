acc_one:
  file.accumulated:
    - name: hosts
    - filename: /tmp/halite-oracle/file_accumulated/managed.conf
    - text: alpha
    - require_in:
      - file: managed_conf

acc_two:
  file.accumulated:
    - name: hosts
    - filename: /tmp/halite-oracle/file_accumulated/managed.conf
    - text:
      - beta
      - gamma
    - require_in:
      - file: managed_conf

managed_conf:
  file.managed:
    - name: /tmp/halite-oracle/file_accumulated/managed.conf
    - makedirs: True
    - source: salt://managed.conf.j2
    - template: jinja

block_file:
  file.managed:
    - name: /tmp/halite-oracle/file_accumulated/block.conf
    - makedirs: True
    - contents: |
        before
        #-- start managed zone --
        #-- end managed zone --
        after

block_acc:
  file.accumulated:
    - name: block-lines
    - filename: /tmp/halite-oracle/file_accumulated/block.conf
    - text: one line
    - require_in:
      - file: block

block:
  file.blockreplace:
    - name: /tmp/halite-oracle/file_accumulated/block.conf
    - content: first
    - require:
      - file: block_file

orphan:
  file.accumulated:
    - name: lost
    - filename: /tmp/halite-oracle/file_accumulated/managed.conf
    - text: nobody reads this

show:
  cmd.run:
    - name: cat /tmp/halite-oracle/file_accumulated/managed.conf /tmp/halite-oracle/file_accumulated/block.conf
    - require:
      - file: managed_conf
      - file: block
