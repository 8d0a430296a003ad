echo_it:
  module.run:
    - test.echo:
      - hello
    - test.arg:
      - a
      - b: 1

fails:
  module.run:
    - test.false: []

missing:
  module.run:
    - nosuch.fun: []

waits:
  module.wait:
    - test.echo:
      - fired
    - watch:
      - module: echo_it
