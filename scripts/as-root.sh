# Sourced by the README's commands (scripts/test.sh, scripts/quickstart.sh):
# they need root (packages, users, services, files under /). As root they
# just run; as a user with sudo they re-execute themselves through sudo,
# keeping the caller's Rust toolchain (PATH, CARGO_HOME, RUSTUP_HOME); with
# neither they say how to run them. A fresh Debian machine has no sudo, so
# the README never prefixes the commands with it.

# as_root SCRIPT ARGS...: returns when already root, else re-executes.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    return 0
  fi
  local script=$1
  shift
  if command -v sudo >/dev/null 2>&1; then
    echo "==> $script needs root: re-running it with sudo" >&2
    exec sudo env PATH="$PATH" \
      CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" \
      RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
      bash "$script" "$@"
  fi
  echo "$script needs root and sudo is not installed: run it as root (su -c 'bash $script')" >&2
  exit 1
}
