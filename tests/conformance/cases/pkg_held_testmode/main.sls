would_hold:
  pkg.held:
    - name: halite-conformance-nothing

would_hold_version:
  pkg.held:
    - name: halite-conformance-nothing
    - version: 1.0

would_hold_pkgs:
  pkg.held:
    - name: ignored
    - pkgs:
      - halite-conformance-a
      - halite-conformance-b: 2.0

not_held:
  pkg.unheld:
    - name: halite-conformance-nothing
