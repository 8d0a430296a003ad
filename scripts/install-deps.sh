#!/usr/bin/env bash
# Installs what building and testing halite needs on Debian: a Rust
# toolchain (only if cargo is missing), python3 for the conformance runner,
# the package tools the pkg tests drive for real (dpkg-dev, apt, rpm), and
# dig (bind9-dnsutils) for the dig module, debconf-utils for debconf.
# Idempotent: installs only what is missing.
set -euo pipefail

need=()
# The modules' tests drive the real tools: crontab (cron), ssh-keygen and
# ssh-keyscan (openssh-client), modprobe/lsmod (kmod), mount/swapon (mount,
# util-linux: also unshare for sysctl's network namespace), dig
# (bind9-dnsutils), debconf-set-selections (debconf-utils), locale-gen
# (locales), zoneinfo (tzdata), ip (iproute2), and openssl for the remote
# sources' test CA.
for pkg in python3 patch dpkg-dev rpm dnf createrepo-c build-essential pkg-config passwd procps \
  cron openssh-client kmod mount util-linux bind9-dnsutils debconf-utils locales tzdata iproute2 \
  openssl ca-certificates \
  python3-venv python3-pip; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if ! command -v cargo >/dev/null 2>&1; then
  need+=(rustup)
fi
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root (or: sudo $0)" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  rustup default stable
fi
# The gates of scripts/test.sh need rustfmt and clippy.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy
  else
    echo "install-deps: cargo fmt and cargo clippy are needed; install the rustfmt and clippy components" >&2
    exit 1
  fi
fi
cargo --version
