#!/usr/bin/env bash
# The one test command (README, .ci/run): `bash scripts/test.sh`, as root
# or as a user with sudo. Installs the test prerequisites, checks the
# formatting and the lints (the gates: rustfmt, clippy with -D warnings,
# which includes the workspace lints of Cargo.toml), builds every binary,
# then runs every test of the workspace, including the conformance ratchet
# against ../shared/conformance (a cargo integration test).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/as-root.sh
as_root scripts/test.sh "$@"
bash scripts/install-deps.sh
export CARGO_TERM_COLOR=never
echo "==> cargo fmt --all --check"
cargo fmt --all --check
# cargo fmt does not reach the module files declared inside module_list!
# (rustfmt skips macro bodies), so they are checked by name.
find crates/modules/src/exec crates/modules/src/states -name '*.rs' -print0 \
  | xargs -0 rustfmt --edition 2021 --check
echo "==> cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --bins
cargo test --workspace --no-fail-fast
