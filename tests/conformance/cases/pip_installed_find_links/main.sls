{% set venv = '/tmp/halite-oracle/pip_installed_find_links/venv' %}
{% set links = '/tmp/halite-oracle-srv/pip_installed_find_links/wheels' %}
venv:
  virtualenv.managed:
    - name: {{ venv }}
    - pip_pkgs:
      - halite-t-demo==1.0
    - no_index: True
    - find_links: {{ links }}

venv-again:
  virtualenv.managed:
    - name: {{ venv }}
    - require:
      - virtualenv: venv

demo-present:
  pip.installed:
    - name: halite-t-demo
    - bin_env: {{ venv }}
    - no_index: True
    - find_links: {{ links }}
    - require:
      - virtualenv: venv

demo-2:
  pip.installed:
    - name: halite-t-demo >=2.0
    - bin_env: {{ venv }}
    - no_index: True
    - find_links: {{ links }}
    - require:
      - pip: demo-present

two-pkgs:
  pip.installed:
    - pkgs:
      - halite-t-demo
      - halite-t-other==1.0
    - bin_env: {{ venv }}/bin/pip
    - no_index: True
    - find_links: {{ links }}
    - require:
      - pip: demo-2

other-removed:
  pip.removed:
    - name: halite-t-other
    - bin_env: {{ venv }}
    - require:
      - pip: two-pkgs

other-absent:
  pip.removed:
    - name: halite-t-other
    - bin_env: {{ venv }}
    - require:
      - pip: other-removed
