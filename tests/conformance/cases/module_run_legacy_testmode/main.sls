echo_it:
  module.run:
    - name: test.echo
    - text: hello

arg_it:
  module.run:
    - name: test.arg
    - args:
      - a
      - b
    - kwargs:
        c: 1

group_by_m_name:
  module.run:
    - name: group.info
    - m_name: root

fails:
  module.run:
    - name: test.false

missing:
  module.run:
    - name: nosuch.fun

waits:
  module.wait:
    - name: test.echo
    - text: fired
    - watch:
      - module: echo_it
