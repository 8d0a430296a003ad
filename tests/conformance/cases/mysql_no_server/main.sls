no_password:
  mysql_user.present:
    - name: halite_nopw
    - connection_unix_socket: /tmp/halite-oracle/mysql_no_server/none.sock

flags_not_a_list:
  mysql_query.run:
    - name: q
    - database: halite_db
    - query: SELECT 1
    - client_flags: multi_statements
    - connection_unix_socket: /tmp/halite-oracle/mysql_no_server/none.sock

requires_the_user:
  test.succeed_without_changes:
    - require:
      - mysql_user: no_password
