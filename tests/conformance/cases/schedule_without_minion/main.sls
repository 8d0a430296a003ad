build_item:
  module.run:
    - schedule.build_schedule_item:
      - job1
      - function: test.ping
      - seconds: 3600
      - splay: 10

list_it:
  module.run:
    - schedule.list: []

add_it:
  module.run:
    - schedule.add:
      - job2
      - function: test.ping
      - minutes: 5

delete_it:
  module.run:
    - schedule.delete:
      - job2
