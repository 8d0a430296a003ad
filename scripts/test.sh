#!/usr/bin/env bash
# The one test command: installs the test prerequisites, builds every
# binary, then runs every test of the workspace, including the conformance
# ratchet against ../shared/conformance (a cargo integration test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export CARGO_TERM_COLOR=never
cargo build --workspace --bins
cargo test --workspace --no-fail-fast
