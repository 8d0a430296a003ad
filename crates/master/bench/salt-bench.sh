#!/usr/bin/env bash
# The same test.ping round trip against real Salt (salt-master + N salt-minion
# processes) on loopback, for comparison with swarm-bench.sh.
# Usage: salt-bench.sh N [ROUNDS] [SALT_BIN_DIR]
set -euo pipefail
N=${1:?number of salt minions}
ROUNDS=${2:-10}
SB=${3:-/root/.venvs/salt/bin}
ROOT=$(mktemp -d /tmp/salt-bench.XXXXXX)
PUB=$((20000 + RANDOM % 20000)); RET=$((PUB + 1))
mkdir -p "$ROOT/master"
cat > "$ROOT/master/master" <<YAML
interface: 127.0.0.1
publish_port: $PUB
ret_port: $RET
root_dir: $ROOT/mroot
pki_dir: $ROOT/mroot/pki
cachedir: $ROOT/mroot/cache
sock_dir: $ROOT/mroot/sock
log_file: $ROOT/master.log
log_level: warning
auto_accept: True
user: root
worker_threads: 2
pidfile: $ROOT/mroot/master.pid
YAML
"$SB/salt-master" -c "$ROOT/master" -d
pids=()
for i in $(seq 0 $((N - 1))); do
  d="$ROOT/minion$i"; mkdir -p "$d"
  cat > "$d/minion" <<YAML
master: 127.0.0.1
master_port: $RET
publish_port: $PUB
id: sminion$i
root_dir: $d/root
pki_dir: $d/root/pki
cachedir: $d/root/cache
sock_dir: $d/root/sock
log_file: $d/minion.log
log_level: warning
user: root
multiprocessing: True
pidfile: $d/root/minion.pid
YAML
  "$SB/salt-minion" -c "$d" -d
done
# The pids of a process and all its descendants.
tree_pids() {
  local pids=$1 all=$1 next
  while [ -n "$pids" ]; do
    next=$(for p in $pids; do cat /proc/$p/task/*/children 2>/dev/null; done | tr '\n' ' ')
    all="$all $next"; pids=$(echo $next)
  done
  echo $all
}
# Stop the daemons by the ids in their pid files, then any child left behind.
cleanup() {
  local all=""
  for f in "$ROOT"/mroot/master.pid "$ROOT"/minion*/root/minion.pid; do
    [ -f "$f" ] && all="$all $(tree_pids "$(cat "$f")")"
  done
  [ -n "$all" ] && kill $all 2>/dev/null || true
  sleep 3
  for p in $all; do [ -d /proc/$p ] && kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$ROOT"
}
trap cleanup EXIT
for _ in $(seq 1 300); do
  got=$("$SB/salt" -c "$ROOT/master" '*' test.ping -t 10 --out json --static 2>/dev/null | grep -c ': true' || true)
  [ "$got" -ge "$N" ] && break
  sleep 1
done
times=()
for _ in $(seq 1 "$ROUNDS"); do
  s=$(date +%s.%N)
  got=$("$SB/salt" -c "$ROOT/master" '*' test.ping -t 60 --out json --static 2>/dev/null | grep -c ': true' || true)
  e=$(date +%s.%N)
  [ "$got" -eq "$N" ] || echo "round: only $got of $N returned" >&2
  times+=("$(echo "$e - $s" | bc)")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
p50=$(echo "$sorted" | awk -v n="$ROUNDS" 'NR==int((n+1)/2){print}')
p99=$(echo "$sorted" | tail -1)
# RSS of a daemon and all its descendants.
tree_rss() {
  for p in $(tree_pids "$1"); do awk '/VmRSS/{print $2}' /proc/$p/status 2>/dev/null; done | awk '{s+=$1} END {print s+0}'
}
mrss=$(tree_rss "$(cat "$ROOT/mroot/master.pid")")
nrss=0
for f in "$ROOT"/minion*/root/minion.pid; do nrss=$((nrss + $(tree_rss "$(cat "$f")"))); done
echo "salt minions=$N rounds=$ROUNDS p50=${p50}s p99=${p99}s master_rss_total=${mrss}kB minions_rss_total=${nrss}kB per_minion=$((nrss / N))kB"
