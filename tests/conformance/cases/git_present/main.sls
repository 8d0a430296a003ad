{% set base = '/tmp/halite-oracle/git_present' %}
bare:
  git.present:
    - name: {{ base }}/bare.git

again:
  git.present:
    - name: {{ base }}/bare.git

nonbare:
  git.present:
    - name: {{ base }}/work
    - bare: False

occupied:
  file.managed:
    - name: {{ base }}/occupied/file
    - contents: x
    - makedirs: True

refused:
  git.present:
    - name: {{ base }}/occupied

forced:
  git.present:
    - name: {{ base }}/occupied
    - force: True
