quiet:
  test.succeed_without_changes

loud:
  test.succeed_with_changes

broken:
  test.fail_without_changes

on_any_change:
  test.succeed_with_changes:
    - onchanges_any:
      - test: quiet
      - test: loud

on_any_fail:
  test.succeed_without_changes:
    - onfail_any:
      - test: quiet
      - test: broken

on_all_quiet:
  test.succeed_without_changes:
    - onchanges_any:
      - test: quiet
