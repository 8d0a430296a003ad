#!/usr/bin/env bash
# Installs halite on this machine (or into a staging root): the binaries,
# the systemd units, the example configs and the directories the daemons
# use. Idempotent: run it again to upgrade. An existing /etc/halite/master,
# /etc/halite/minion or /etc/halite/master.d/api.conf is never overwritten;
# a differing new example lands beside it as master.new / minion.new /
# api.conf.new.
#
#   sudo bash scripts/install.sh                  # build, install master + minion
#   sudo bash scripts/install.sh --minion --enable
#   sudo bash scripts/install.sh --master --api   # master + halite-api
#   bash scripts/install.sh --no-build --destdir /tmp/stage   # packaging
#
# See docs/install.md.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/install.sh [options]

  --prefix DIR       install binaries under DIR/bin (default /usr/local)
  --destdir DIR      staging root prepended to every path (like DESTDIR);
                     nothing is enabled or reloaded when set
  --unitdir DIR      where the systemd units go (default: PREFIX/lib/systemd/system
                     for the prefixes /usr and /usr/local, else /etc/systemd/system)
  --no-build         do not run cargo; take the binaries already built
  --bindir-src DIR   take the binaries from DIR (implies --no-build;
                     default: target/release of this checkout)
  --master           install the master (halite-master, its unit and config)
  --minion           install the minion (halite-minion, its unit and config)
                     (neither: both; the CLI tools are always installed)
  --api              also install halite-api (Salt's REST API: its binary,
                     unit, and master.d/api.conf); never installed by default
  --enable           systemctl daemon-reload, then enable --now the units
                     (only on a live system booted with systemd)
  -h, --help         this text
EOF
}

say() { printf 'install: %s\n' "$*"; }
die() {
  printf 'install: error: %s\n' "$*" >&2
  exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=/usr/local
destdir=
unitdir=
build=1
bindir_src=
want_master=0
want_minion=0
want_api=0
enable=0

# The value of option $1, given as `$1 VALUE` ($2) or `$1=VALUE`.
need_value() {
  [ -n "${2:-}" ] || die "$1 needs a value (see --help)"
}

while [ $# -gt 0 ]; do
  case $1 in
    --prefix=*) prefix=${1#*=} ;;
    --prefix) need_value "$1" "${2:-}"; prefix=$2; shift ;;
    --destdir=*) destdir=${1#*=} ;;
    --destdir) need_value "$1" "${2:-}"; destdir=$2; shift ;;
    --unitdir=*) unitdir=${1#*=} ;;
    --unitdir) need_value "$1" "${2:-}"; unitdir=$2; shift ;;
    --bindir-src=*) bindir_src=${1#*=}; build=0 ;;
    --bindir-src) need_value "$1" "${2:-}"; bindir_src=$2; build=0; shift ;;
    --no-build) build=0 ;;
    --master) want_master=1 ;;
    --minion) want_minion=1 ;;
    --api) want_api=1 ;;
    --enable) enable=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done

if [ "$want_master" -eq 0 ] && [ "$want_minion" -eq 0 ]; then
  want_master=1
  want_minion=1
fi
case $prefix in
  /*) ;;
  *) die "--prefix must be an absolute path (got '$prefix')" ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || die "--prefix / is not supported; use --prefix /usr"
if [ -z "$unitdir" ]; then
  case $prefix in
    /usr | /usr/local) unitdir=$prefix/lib/systemd/system ;;
    *) unitdir=/etc/systemd/system ;;
  esac
fi
case $unitdir in
  /*) ;;
  *) die "--unitdir must be an absolute path (got '$unitdir')" ;;
esac
if [ -n "$destdir" ]; then
  mkdir -p "$destdir" || die "cannot create the staging root $destdir"
  destdir=$(cd "$destdir" && pwd)
elif [ "$(id -u)" -ne 0 ]; then
  die "installing into / needs root: run it with sudo, or stage with --destdir DIR"
fi

# What to install. The CLI tools go everywhere: halite-call is the
# minion's local tool, halite/halite-key/halite-run/halite-spm the master's,
# and they are small.
bins=(halite halite-call halite-key halite-run halite-spm)
units=()
roles=()
if [ "$want_master" -eq 1 ]; then
  bins+=(halite-master)
  units+=(halite-master.service)
  roles+=(master)
fi
if [ "$want_minion" -eq 1 ]; then
  bins+=(halite-minion)
  units+=(halite-minion.service)
  roles+=(minion)
fi
# halite-api reads the master's config (its settings are a master.d
# drop-in) and keeps its tokens in the master's cachedir.
if [ "$want_api" -eq 1 ]; then
  bins+=(halite-api)
  units+=(halite-api.service)
fi

# ---- build ---------------------------------------------------------------
if [ -z "$bindir_src" ]; then
  bindir_src=${CARGO_TARGET_DIR:-$repo/target}/release
fi
if [ "$build" -eq 1 ]; then
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    PATH=$HOME/.cargo/bin:$PATH
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ] && [ -f "$repo/scripts/install-deps.sh" ]; then
      say "cargo not found: installing a Rust toolchain with scripts/install-deps.sh"
      bash "$repo/scripts/install-deps.sh"
    fi
    command -v cargo >/dev/null 2>&1 \
      || die "cargo not found: install Rust (scripts/install-deps.sh), or build elsewhere and pass --no-build --bindir-src DIR"
  fi
  say "building the release binaries (cargo build --release --bins)"
  (cd "$repo" && cargo build --release --bins) || die "cargo build failed (see above)"
fi
[ -d "$bindir_src" ] || die "no binaries in $bindir_src: build them (cargo build --release --bins) or pass --bindir-src DIR"
missing=()
for b in "${bins[@]}"; do
  [ -f "$bindir_src/$b" ] && [ -x "$bindir_src/$b" ] || missing+=("$b")
done
[ "${#missing[@]}" -eq 0 ] \
  || die "missing in $bindir_src: ${missing[*]}; build them (cargo build --release --bins) or pass --bindir-src DIR"

# ---- helpers -------------------------------------------------------------
# Copies $1 to $3 with mode $2 through a temporary file and a rename, so a
# running binary is replaced atomically (no "Text file busy", no torn file).
put() {
  local src=$1 mode=$2 dst=$3 tmp
  tmp=$(dirname "$dst")/.$(basename "$dst").install.$$
  install -m "$mode" "$src" "$tmp" || die "cannot write $tmp"
  mv -f "$tmp" "$dst" || die "cannot replace $dst"
}

# Creates directory $2 (and its parents) with mode $1; fixes the mode of
# an existing one, so keys and caches never stay world-readable.
dir() {
  install -d -m "$1" "$2" || die "cannot create $2"
}

# ---- directories -----------------------------------------------------------
# Sandboxing sees these paths, so they must exist before the first start:
# halite-master.service makes /etc read-only except its pki_dir. The
# runtime dirs (/run/halite/*) are not created here: /run is emptied at
# boot; the master's unit and the daemons create them.
etc=$destdir/etc/halite
# Shared system directories: created if missing, their modes left alone.
mkdir -p "$destdir$prefix/bin" "$destdir$unitdir" || die "cannot create $destdir$prefix/bin or $destdir$unitdir"
# halite's own: created, and their modes enforced.
dir 0755 "$etc"
dir 0755 "$etc/pki"
dir 0755 "$destdir/var/cache/halite"
dir 0750 "$destdir/var/log/halite"
dir_roles=("${roles[@]}")
if [ "$want_api" -eq 1 ] && [ "$want_master" -eq 0 ]; then
  dir_roles+=(master)
fi
for role in "${dir_roles[@]}"; do
  dir 0755 "$etc/$role.d"
  dir 0700 "$etc/pki/$role"
  dir 0700 "$destdir/var/cache/halite/$role"
done

# ---- binaries ------------------------------------------------------------
for b in "${bins[@]}"; do
  put "$bindir_src/$b" 0755 "$destdir$prefix/bin/$b"
done
say "installed ${bins[*]} into $destdir$prefix/bin"

# ---- units ---------------------------------------------------------------
active_before=()
live=0
if [ -z "$destdir" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  live=1
  for u in "${units[@]}"; do
    if systemctl is-active --quiet "$u"; then active_before+=("$u"); fi
  done
fi
for u in "${units[@]}"; do
  src=$repo/systemd/$u
  [ -f "$src" ] || die "missing $src: run this script from a complete halite checkout"
  tmp=$(mktemp)
  # Only ExecStart names the install prefix.
  sed "s#^ExecStart=/usr/local/bin/#ExecStart=$prefix/bin/#" "$src" >"$tmp"
  put "$tmp" 0644 "$destdir$unitdir/$u"
  rm -f "$tmp"
done
say "installed ${units[*]} into $destdir$unitdir"

# ---- configs ---------------------------------------------------------------
# The master config may hold secrets (external pillar credentials...):
# root-only, and so is the API's drop-in (external_auth, TLS key paths).
# The minion config stays readable so halite-call works for every user,
# as Salt's /etc/salt/minion does.
configs=()
for role in "${roles[@]}"; do
  mode=0644
  [ "$role" = master ] && mode=0640
  configs+=("$role:$role:$mode")
done
[ "$want_api" -eq 1 ] && configs+=("api:master.d/api.conf:0640")
for c in "${configs[@]}"; do
  IFS=: read -r name target mode <<<"$c"
  src=$repo/config/$name
  dst=$etc/$target
  [ -f "$src" ] || die "missing $src: run this script from a complete halite checkout"
  if [ ! -e "$dst" ]; then
    put "$src" "$mode" "$dst"
    say "installed the example config $dst"
  elif cmp -s "$src" "$dst"; then
    say "$dst is up to date"
  else
    put "$src" "$mode" "$dst.new"
    say "kept your $dst; the new example is $dst.new (compare: diff $dst $dst.new)"
  fi
done

# ---- systemd -------------------------------------------------------------
if [ "$live" -eq 1 ]; then
  systemctl daemon-reload || die "systemctl daemon-reload failed"
  if [ "$enable" -eq 1 ]; then
    systemctl enable --now "${units[@]}" || die "systemctl enable --now ${units[*]} failed; see: journalctl -u ${units[0]}"
    say "enabled and started ${units[*]}"
  else
    say "to start at boot and now: systemctl enable --now ${units[*]}"
  fi
  # Never restarted from here: this script may itself run inside a minion
  # job (an upgrade state), and restarting the minion would cut that job.
  if [ "${#active_before[@]}" -gt 0 ]; then
    say "running the previous binaries: ${active_before[*]}; to switch: systemctl restart ${active_before[*]}"
  fi
elif [ "$enable" -eq 1 ]; then
  if [ -n "$destdir" ]; then
    say "--enable skipped: nothing is enabled while staging into --destdir"
  else
    say "--enable skipped: this system is not running systemd"
  fi
fi
say "done"
