base:
  '*':
    - demo
