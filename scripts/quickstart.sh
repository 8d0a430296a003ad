#!/usr/bin/env bash
# The main job in one command: builds halite, starts a master and a minion
# on loopback with a temporary config directory, accepts the minion's key,
# applies the sample state tree (examples/) through the master twice (the
# second run changes nothing), shows the results, then stops both daemons.
# Everything the daemons write stays in the temp dir; the sample tree
# writes only under /tmp/halite-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/as-root.sh
as_root scripts/quickstart.sh "$@"
repo=$PWD
if [ -z "${HALITE_SKIP_BUILD:-}" ]; then
  bash scripts/install-deps.sh
  echo "==> building halite (release)"
  cargo build --release --bins --quiet
fi
bin=$repo/target/release

work=$(mktemp -d /tmp/halite-quickstart.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "==> daemons stopped; logs and keys are in $work"
}
trap cleanup EXIT

# Free loopback ports for publish (PUB) and requests (ROUTER).
read -r pub ret < <(python3 - <<'PY'
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])
PY
)
mkdir -p "$work/master" "$work/minion"
cat > "$work/master/master" <<CFG
interface: 127.0.0.1
publish_port: $pub
ret_port: $ret
pki_dir: $work/var/master/pki
cachedir: $work/var/master/cache
sock_dir: $work/var/master/sock
log_file: $work/var/master/log
log_level: info
# The master compiles the state tree and pillar for each minion and
# serves salt:// files to it.
file_roots:
  base:
    - $repo/examples/salt
pillar_roots:
  base:
    - $repo/examples/pillar
CFG
cat > "$work/minion/minion" <<CFG
id: quickstart-minion
master: 127.0.0.1
master_port: $ret
publish_port: $pub
pki_dir: $work/var/minion/pki
cachedir: $work/var/minion/cache
sock_dir: $work/var/minion/sock
log_file: $work/var/minion/log
log_level: info
CFG

echo "==> starting halite-master (127.0.0.1:$pub/$ret) and halite-minion"
"$bin/halite-master" -c "$work/master" & pids+=($!)
sleep 0.5
"$bin/halite-minion" -c "$work/minion" & pids+=($!)

echo "==> waiting for the minion's key"
for _ in $(seq 100); do
  "$bin/halite-key" -c "$work/master" -l pre 2>/dev/null | grep -q quickstart-minion && break
  sleep 0.2
done
"$bin/halite-key" -c "$work/master" -a quickstart-minion -y
for _ in $(seq 50); do
  "$bin/halite" -c "$work/master" quickstart-minion test.ping -t 2 >/dev/null 2>&1 && break
  sleep 0.2
done
"$bin/halite" -c "$work/master" '*' test.ping

echo "==> halite '*' state.apply   (first run: changes)"
"$bin/halite" -c "$work/master" '*' state.apply -t 60
echo "==> halite '*' state.apply   (second run: nothing to change)"
"$bin/halite" -c "$work/master" '*' state.apply -t 60
echo "==> the managed files"
cat /tmp/halite-demo/motd
cat /tmp/halite-demo/webapp/settings.json; echo
# The pillar (examples/pillar) sets the port: the run must have used it.
grep -q 8081 /tmp/halite-demo/webapp/settings.json || { echo "quickstart: pillar was not applied" >&2; exit 1; }
echo "==> quickstart OK"
