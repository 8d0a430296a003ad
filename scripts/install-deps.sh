#!/usr/bin/env bash
# Installs what building and testing halite needs on Debian: a Rust
# toolchain (only if cargo is missing), python3 for the conformance runner,
# the package tools the pkg tests drive for real (dpkg-dev, apt, rpm), and
# dig (bind9-dnsutils) for the dig module, debconf-utils for debconf.
# Idempotent: installs only what is missing.
set -euo pipefail

need=()
# The tools the tests drive for real, one package per line (merges stay
# trivial). Each line says which tests need it.
packages=(
  python3 patch dpkg-dev rpm dnf createrepo-c build-essential pkg-config passwd procps
  cron                 # crontab
  openssh-client       # ssh-keygen, ssh-keyscan
  kmod                 # modprobe, lsmod
  mount util-linux     # mount, swapon; unshare for sysctl's network namespace
  bind9-dnsutils       # dig
  debconf-utils        # debconf-set-selections
  locales              # locale-gen
  tzdata               # zoneinfo
  iproute2             # ip
  openssl              # the remote sources' test CA
  ca-certificates
  git                  # the git module (its daemon too), gitfs and git_pillar
  openssh-server       # sshd for git.latest identity over ssh://
  gnupg                # the gpg renderer (pillar secrets) and its tests
  supervisor           # supervisord tests start their own daemon
  iptables nftables    # firewall tests, in a network namespace of their own
  firewalld dbus       # firewalld tests: their own firewalld on a private bus in a netns
  ruby                 # gem
  postgresql           # initdb, pg_ctl, psql: the postgres tests' own server
  postgresql-contrib   # the hstore extension
  mariadb-server       # the mysql tests start their own mariadbd in a temp dir
  mariadb-client       # the mysql module drives the server through its client
  python3-venv         # virtualenv.managed (python3 -m venv)
  python3-pip          # the pip module
  libpam0g-dev         # halite-api links libpam for eauth: pam
  curl                 # halite-api's TLS test
  chromium             # halite-api's console test: a real headless browser
  chromium-driver      # chromedriver, which the console test drives over WebDriver
)
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# npm: only when no npm exists (NodeSource's nodejs ships its own, which
# conflicts with Debian's npm package).
command -v npm >/dev/null 2>&1 || need+=(npm)
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
  # The tests start their own daemons (firewalld, sshd, postgres, mariadb,
  # supervisord) in temp dirs and namespaces: none of the system services
  # these packages bring may start on the host while installing.
  policy=/usr/sbin/policy-rc.d
  own_policy=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ -n "$own_policy" ] && rm -f "$policy"
  # Nor at the next boot: firewalld would take over the host's firewall and
  # sshd would listen on port 22. Only for what this run installed.
  if [ -d /run/systemd/system ]; then
    for pair in firewalld:firewalld openssh-server:ssh; do
      case " ${need[*]} " in
        *" ${pair%%:*} "*) systemctl disable --now "${pair##*:}" >/dev/null 2>&1 || true ;;
      esac
    done
  fi
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
