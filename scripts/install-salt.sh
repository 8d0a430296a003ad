#!/usr/bin/env bash
# Installs the reference Salt (3008.5) into a venv outside the repo, for the
# tests that compare halite with what Salt itself does (they find it through
# crates/salt-oracle: SALT_ORACLE_VENV, else ~/.venvs/salt). The same logic as
# ../shared/bench/install-salt.sh, kept here because CI may run without
# ../shared. Idempotent: exits at once when Salt and GitPython are there.
#   bash scripts/install-salt.sh [VENV]
#
# salt 3008.5 pins certifi>=2026.10.23, newer than the package index may
# serve; then its requirements are installed with that pin relaxed and salt
# itself with --no-deps (certifi is only the CA bundle). GitPython is for
# crates/gitfs/tests/salt_conformance.rs (Salt's gitfs provider).
set -euo pipefail
venv=${1:-${SALT_ORACLE_VENV:-$HOME/.venvs/salt}}
if [ -x "$venv/bin/salt-call" ] && "$venv/bin/python" -c 'import salt, git' 2>/dev/null; then
  "$venv/bin/salt-call" --local --version
  exit 0
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
if ! "$venv/bin/python" -c 'import salt' 2>/dev/null; then
  if ! "$venv/bin/pip" install -q salt==3008.5 2>/dev/null; then
    dl=$(mktemp -d)
    trap 'rm -rf "$dl"' EXIT
    "$venv/bin/pip" download -q --no-deps --no-binary :all: salt==3008.5 -d "$dl"
    tar -C "$dl" -xzf "$dl"/salt-3008.5.tar.gz
    grep '^Requires-Dist:' "$dl/salt-3008.5/PKG-INFO" | sed 's/^Requires-Dist: //' \
      | sed -E 's/^certifi>=[0-9.]+$/certifi/' > "$dl/reqs.txt"
    "$venv/bin/pip" install -q -r "$dl/reqs.txt"
    "$venv/bin/pip" install -q --no-deps "$dl/salt-3008.5.tar.gz"
  fi
fi
"$venv/bin/pip" install -q GitPython
"$venv/bin/salt-call" --local --version
