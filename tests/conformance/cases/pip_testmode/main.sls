{% set venv = '/tmp/halite-oracle/pip_testmode/venv' %}
venv:
  virtualenv.managed:
    - name: {{ venv }}
    - pip_pkgs:
      - halite-t-demo

demo:
  pip.installed:
    - name: halite-t-demo
    - bin_env: {{ venv }}

demo-removed:
  pip.removed:
    - name: halite-t-demo
    - bin_env: {{ venv }}

single-equals:
  pip.installed:
    - name: halite-t-demo=1.0

nobody-here:
  pip.installed:
    - name: halite-t-demo
    - user: halite-t-nouser
