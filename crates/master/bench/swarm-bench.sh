#!/usr/bin/env bash
# test.ping round trip to N swarm minions on loopback.
# Usage: swarm-bench.sh N [ROUNDS] [BINDIR]
# Prints: N, p50 and p99 seconds until all returned, master RSS, swarm RSS.
set -euo pipefail
N=${1:?number of swarm minions}
ROUNDS=${2:-10}
BIN=${3:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
ROOT=$(mktemp -d /tmp/halite-bench.XXXXXX)
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
log_level: warning
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
log_level: warning
master_alive_interval: 30
auth_timeout: 30
YAML
"$BIN/halite-master" -c "$ROOT/m" 2>"$ROOT/master.err" & MPID=$!
sleep 0.5
start=$(date +%s.%N)
"$BIN/halite-minion" -c "$ROOT/s" --swarm "$N" 2>"$ROOT/swarm.err" & SPID=$!
cleanup() {
  kill "$SPID" "$MPID" 2>/dev/null || true
  wait 2>/dev/null || true
  tail -n 3 "$ROOT/swarm.err" "$ROOT/master.err" >&2 || true
  [ -n "${KEEP:-}" ] || rm -rf "$ROOT"
}
trap cleanup EXIT
# Wait until every identity answers.
for _ in $(seq 1 600); do
  got=$("$BIN/halite" -c "$ROOT/m" '*' test.ping -t 20 --out json 2>/dev/null | grep -c ': true' || true)
  [ "$got" -ge "$N" ] && break
  sleep 1
done
ready=$(date +%s.%N)
echo "all $N answering after $(echo "$ready - $start" | bc)s (first start: key generation, acceptance, handshakes)" >&2
times=()
for _ in $(seq 1 "$ROUNDS"); do
  s=$(date +%s.%N)
  got=$("$BIN/halite" -c "$ROOT/m" '*' test.ping -t 60 --out json | grep -c ': true' || true)
  e=$(date +%s.%N)
  [ "$got" -eq "$N" ] || echo "round: only $got of $N returned" >&2
  times+=("$(echo "$e - $s" | bc)")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
p50=$(echo "$sorted" | awk -v n="$ROUNDS" 'NR==int((n+1)/2){print}')
p99=$(echo "$sorted" | tail -1)
mrss=$(awk '/VmRSS/{print $2}' /proc/$MPID/status)
srss=$(awk '/VmRSS/{print $2}' /proc/$SPID/status)
echo "minions=$N rounds=$ROUNDS p50=${p50}s p99=${p99}s master_rss=${mrss}kB swarm_rss=${srss}kB per_minion=$((srss / N))kB"
