nothing_to_hold:
  pkg.held:
    - name: ignored
    - pkgs: []

not_held:
  pkg.unheld:
    - name: halite-conformance-nothing

nothing_to_unhold:
  pkg.unheld:
    - name: ignored
    - pkgs: []
