#!/usr/bin/env bash
# Time for N swarm minions to answer again after a master restart (SIGKILL
# then start), with Salt's default keepalive (master_alive_interval 30) and
# reconnection settings (recon_default 1000 ms, randomized).
# Usage: restart-bench.sh N [BINDIR]
set -euo pipefail
N=${1:?number of swarm minions}
BIN=${2:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
ROOT=$(mktemp -d /tmp/halite-restart.XXXXXX)
PUB=$((20000 + RANDOM % 20000)); RET=$((PUB + 1))
mkdir -p "$ROOT/m" "$ROOT/s"
cat > "$ROOT/m/master" <<YAML
interface: 127.0.0.1
publish_port: $PUB
ret_port: $RET
pki_dir: $ROOT/mpki
cachedir: $ROOT/mcache
sock_dir: $ROOT/msock
log_file: $ROOT/master.log
log_level: info
auto_accept: True
timeout: 60
YAML
cat > "$ROOT/s/minion" <<YAML
master: 127.0.0.1
master_port: $RET
publish_port: $PUB
id: swarm
pki_dir: $ROOT/spki
cachedir: $ROOT/scache
sock_dir: $ROOT/ssock
log_file: $ROOT/swarm.log
log_level: info
YAML
"$BIN/halite-master" -c "$ROOT/m" 2>"$ROOT/master.err" & MPID=$!
sleep 0.5
"$BIN/halite-minion" -c "$ROOT/s" --swarm "$N" 2>"$ROOT/swarm.err" & SPID=$!
cleanup() {
  kill "$SPID" "$MPID" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] && echo "kept $ROOT" >&2 || rm -rf "$ROOT"
}
trap cleanup EXIT
count() { "$BIN/halite" -c "$ROOT/m" '*' test.ping -t "$1" --out json 2>/dev/null | grep -c ': true' || true; }
for _ in $(seq 1 900); do
  [ "$(count 20)" -ge "$N" ] && break
  sleep 1
done
echo "all $N answering; restarting the master" >&2
kill -9 "$MPID"; wait "$MPID" 2>/dev/null || true
rm -f "$ROOT/msock/master.sock"
start=$(date +%s.%N)
"$BIN/halite-master" -c "$ROOT/m" 2>>"$ROOT/master.err" & MPID=$!
while [ ! -S "$ROOT/msock/master.sock" ]; do sleep 0.05; done
# Count the identities authenticated again from the master's log, then
# confirm with a ping that they all answer.
while :; do
  got=$(grep -c 'minion authenticated' "$ROOT/master.log" || true)
  [ "$got" -ge "$((N * 2))" ] && break
  sleep 0.1
done
authed=$(date +%s.%N)
pinged=$(count 30)
done_at=$(date +%s.%N)
echo "minions=$N reauthenticated=$(echo "$authed - $start" | bc)s all_answering=$(echo "$done_at - $start" | bc)s answered=$pinged"
