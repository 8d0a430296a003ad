#!jinja|yaml
plain_id:
  test.succeed_without_changes:
    - name: plain {{ 'name' }}
