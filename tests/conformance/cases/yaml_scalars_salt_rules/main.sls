bools:
  test.configurable_test_state:
    - changes: yes
    - result: on
    - comment: 0644

quoted:
  test.configurable_test_state:
    - changes: off
    - comment: '0644'
