#!/usr/bin/env bash
# Issue 25, session 19 (docs/benchmarks.md "a fleet that starts at once"):
# one master and one swarm of N identities on loopback, then one of
#   owed ROUNDS   the swarm answers and is killed; ROUNDS readiness rounds
#                 (test.ping and its saltutil.find_job, as the CLI
#                 publishes them) are published while it is down; it starts
#                 again: how long until a new test.ping -t 20 is answered by
#                 all, the returns it sent, master.stats' redeliveries;
#   slow BYTES    (event_return_bytes) a 1,000-state test sls (no files
#                 written) applied cold, read at full speed, then warm,
#                 watched by a halite CLI whose JSON output is read at
#                 ~6 MB/s: the master's peak RSS, master.stats' bus and
#                 returns counters.
# Usage: fleet-start-bench.sh owed|slow N [ROUNDS|BYTES] [BINDIR] [MASTER_BIN]
set -u
MODE=${1:?owed or slow}
N=${2:?number of swarm minions}
case $MODE in
  owed) ROUNDS=${3:-5}; EXTRA="" ;;
  slow) EXTRA="event_return_bytes: ${3:-67108864}" ;;
  *) echo "mode: owed or slow" >&2; exit 2 ;;
esac
REL=${4:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
MBIN=${5:-$REL/halite-master}
LABEL=$MODE-$N
D=$(mktemp -d /tmp/halite-bench.XXXXXX); mkdir -p $D/m $D/salt $D/s
PP=$((20000 + RANDOM % 20000)); RP=$((PP+1))
cat > $D/m/master <<C
interface: 127.0.0.1
publish_port: $PP
ret_port: $RP
pki_dir: $D/mpki
cachedir: $D/mcache
sock_dir: $D/msock
log_file: $D/master.log
log_level: warning
auto_accept: True
timeout: 60
file_roots:
  base: [$D/salt]
$EXTRA
C
cat > $D/s/minion <<C
master: 127.0.0.1
master_port: $RP
publish_port: $PP
id: swarm
pki_dir: $D/s/pki
cachedir: $D/s/cache
sock_dir: $D/s/sock
log_file: $D/s/swarm.log
log_level: warning
C
stats() { $REL/halite-run -c $D/m master.stats --out json; }
start_swarm() { $REL/halite-minion -c $D/s --swarm $N --swarm-prefix bench- > $D/swarm.out 2>&1 & SP=$!; }
answering() { $REL/halite -c $D/m 'bench-*' test.ping -t "$1" --out json 2>/dev/null | grep -c true; }
$MBIN -c $D/m > $D/master.out 2>&1 & MP=$!
sleep 2
start_swarm
for i in $(seq 1 60); do
  got=$(answering 10); [ "$got" -ge "$N" ] && break; sleep 1
done
echo "$LABEL: $got answering"

if [ "$MODE" = owed ]; then
  kill -9 $SP; wait $SP 2>/dev/null; sleep 1
  for r in $(seq 1 $ROUNDS); do
    jid=$($REL/halite -c $D/m 'bench-*' test.ping --async | awk '{print $NF}')
    $REL/halite -c $D/m 'bench-*' saltutil.find_job $jid --async > /dev/null
  done
  before=$(stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["returns"]["packed"])')
  t0=$(date +%s.%N)
  start_swarm
  rounds=0
  while :; do
    rounds=$((rounds+1))
    got=$(answering 20)
    [ "$got" -ge "$N" ] || [ $rounds -ge 10 ] && break
  done
  t1=$(date +%s.%N)
  sleep 3
  stats | python3 -c "
import json,sys; s=json.load(sys.stdin)
print('$LABEL: all $N answering after %.1f s in $rounds round(s) ($got answered last); returns after the restart: %d; redeliveries %s' % ($t1-$t0, s['returns']['packed']-$before, s['redeliveries']))"
else
  python3 - $D/salt/big.sls <<'PY'
import sys
with open(sys.argv[1],'w') as f:
    for i in range(1000):
        f.write(f"state_{i:04d}:\n  test.succeed_without_changes:\n    - name: 'state {i} of {{{{ grains[\"id\"] }}}}'\n")
PY
  # Cold (the compile), read at full speed.
  $REL/halite -c $D/m 'bench-*' state.apply big -t 300 --out json > /dev/null 2>&1
  grep VmHWM /proc/$MP/status | sed "s/^/$LABEL after cold: /"
  # Warm, the CLI's output read at ~6 MB/s.
  ( $REL/halite -c $D/m 'bench-*' state.apply big -t 300 --out json 2>/dev/null | python3 -c '
import sys,time
n=0
while True:
    b=sys.stdin.buffer.read(65536)
    if not b: break
    n+=len(b); time.sleep(0.01)
print("read", n, "bytes", file=sys.stderr)
' ) 2> $D/reader.out & CP=$!
  peak=0
  while kill -0 $CP 2>/dev/null; do
    r=$(awk '/VmRSS/{print $2}' /proc/$MP/status); [ "$r" -gt "$peak" ] && peak=$r
    sleep 1
  done
  echo "$LABEL warm: master peak RSS sampled ${peak} KB; $(grep VmHWM /proc/$MP/status)"
  cat $D/reader.out
  stats | python3 -c 'import json,sys; s=json.load(sys.stdin); print("bus", s["bus"], "returns", s["returns"])'
fi
kill $SP $MP; wait $SP $MP 2>/dev/null
rm -rf $D
