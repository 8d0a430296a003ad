{% set demo_root = salt['pillar.get']('demo:root', '/tmp/halite-demo') %}
demo_root:
  file.directory:
    - name: {{ demo_root }}
    - makedirs: True

motd_file:
  file.managed:
    - name: {{ demo_root }}/motd
    - source: salt://motd/motd.jinja
    - template: jinja
    - mode: '0644'
    - require:
      - file: demo_root
