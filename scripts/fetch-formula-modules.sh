#!/bin/sh
# Fetches, at pinned commits, custom modules of public saltstack-formulas
# that crates/modules/tests/formula_modules.rs runs unchanged under halite
# and under Salt 3008.5. They are not kept in this repository: each is
# fetched with its formula's LICENSE (Apache-2.0) into DEST/<formula>/.
#
# Usage: scripts/fetch-formula-modules.sh [DEST]   (default target/formula-modules)
# The test reads DEST from HALITE_FORMULA_MODULES, else target/formula-modules,
# and skips with a reason when it is absent.
set -eu
dest="${1:-target/formula-modules}"

fetch() {
    formula=$1 commit=$2 path=$3
    mkdir -p "$dest/$formula/$(dirname "$path")"
    curl -fsSL "https://raw.githubusercontent.com/saltstack-formulas/$formula/$commit/$path" \
        -o "$dest/$formula/$path"
}

# nginx-formula: OpenResty's package manager, an execution and a state module.
fetch nginx-formula f5153e234c9d62ac1ede8bb672e9aee73557ad1b _modules/opm.py
fetch nginx-formula f5153e234c9d62ac1ede8bb672e9aee73557ad1b _states/opm.py
fetch nginx-formula f5153e234c9d62ac1ede8bb672e9aee73557ad1b LICENSE
# postgres-formula: tablespaces (written for old Salt: both declines are compared).
fetch postgres-formula 501502472584a459bcbecb2bf5a005bc449e6f6a _modules/postgres_ext.py
fetch postgres-formula 45f011a76317d1b0a5b6402580f53f13d05ee901 _states/postgres_tablespace.py
fetch postgres-formula 501502472584a459bcbecb2bf5a005bc449e6f6a LICENSE
echo "fetched into $dest"
