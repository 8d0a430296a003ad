other_id:
  test.succeed_without_changes:
    - name: other
