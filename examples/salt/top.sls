# The sample tree: every minion gets the message of the day and the web app.
base:
  '*':
    - motd
    - webapp
