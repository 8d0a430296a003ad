hosts_copy:
  file.managed:
    - name: /tmp/halite-oracle/host_states_testmode/hosts
    - source: salt://hosts

already:
  host.present:
    - name: web1
    - ip: 10.0.0.1

add_new:
  host.present:
    - name: cache1
    - ip: 10.0.0.3

add_alias:
  host.present:
    - name: db2
    - ip: 10.0.0.2

with_comment:
  host.present:
    - name: mail1
    - ip: 10.0.0.4
    - comment: mail relay

warn_elsewhere:
  host.present:
    - name: db1
    - ip: 10.0.0.9

clean_elsewhere:
  host.present:
    - name: web1
    - ip: 10.0.0.5
    - clean: True

absent_one:
  host.absent:
    - name: db2
    - ip: 10.0.0.2

absent_already:
  host.absent:
    - name: nope
    - ip:
      - 10.0.0.2

only_it:
  host.only:
    - name: 10.0.0.2
    - hostnames:
      - db1
      - db-primary

only_same:
  host.only:
    - name: 10.0.0.2
    - hostnames: db1 db-primary

show:
  cmd.run:
    - name: cat /tmp/halite-oracle/host_states_testmode/hosts
