stop_service:
  test.succeed_with_changes:
    - prereq:
      - test: update_package

update_package:
  test.succeed_with_changes
