{% from 'webapp/map.jinja' import webapp with context %}
include:
  - motd

webapp_dir:
  file.directory:
    - name: {{ webapp.root }}/webapp
    - require:
      - file: demo_root

webapp_config:
  file.managed:
    - name: {{ webapp.root }}/webapp/app.conf
    - source: salt://webapp/app.conf
    - require:
      - file: webapp_dir

webapp_settings:
  file.serialize:
    - name: {{ webapp.root }}/webapp/settings.json
    - formatter: json
    - dataset:
        port: {{ webapp.port }}
        workers: {{ webapp.workers }}
    - require:
      - file: webapp_dir

webapp_reload:
  cmd.run:
    - name: echo "reloading webapp on port {{ webapp.port }}"
    - onchanges:
      - file: webapp_config
      - file: webapp_settings

webapp_ready:
  test.succeed_without_changes:
    - comment: webapp is configured
    - require:
      - cmd: webapp_reload
