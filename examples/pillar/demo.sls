demo:
  root: /tmp/halite-demo
  motd: Hello from the halite sample tree
webapp:
  port: 8081
  workers: 4
