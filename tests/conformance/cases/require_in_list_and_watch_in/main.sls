early:
  test.succeed_with_changes:
    - require_in:
      - test: target_a
      - test: target_b
    - watch_in:
      - test: watcher

target_a:
  test.succeed_without_changes

target_b:
  test.succeed_without_changes

watcher:
  test.succeed_without_changes
