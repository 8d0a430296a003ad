#!/usr/bin/env bash
# The master's memory behind a slow watcher (issue 25, session 19;
# docs/benchmarks.md "a fleet that starts at once"): one master, one swarm
# of N identities, a 1,000-state test sls (no files written), a cold
# apply read at full speed, then the warm apply watched by a halite CLI
# whose JSON output is read at ~6 MB/s. Prints the master's peak RSS and
# master.stats' bus and returns counters.
# Usage: slow-watcher-bench.sh N [EVENT_RETURN_BYTES] [BINDIR] [MASTER_BIN]
set -u
N=${1:?number of swarm minions}
BUDGET=${2:-67108864}
REL=${3:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
MBIN=${4:-$REL/halite-master}
LABEL=slow-watcher-$N
D=$(mktemp -d /tmp/halite-bench.XXXXXX); mkdir -p $D/m/master.d $D/salt $D/s
PP=$((20000 + RANDOM % 20000)); RP=$((PP+1))
python3 - $D/salt/big.sls <<'PY'
import sys
with open(sys.argv[1],'w') as f:
    for i in range(1000):
        f.write(f"state_{i:04d}:\n  test.succeed_without_changes:\n    - name: 'state {i} of {{{{ grains[\"id\"] }}}}'\n")
PY
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
event_return_bytes: $BUDGET
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
$MBIN -c $D/m > $D/master.out 2>&1 & MP=$!
sleep 2
$REL/halite-minion -c $D/s --swarm $N --swarm-prefix bench- > $D/swarm.out 2>&1 & SP=$!
for i in $(seq 1 60); do
  got=$($REL/halite -c $D/m 'bench-*' test.ping -t 10 --out json 2>/dev/null | grep -c true)
  [ "$got" -ge "$N" ] && break; sleep 1
done
echo "$LABEL: $got answering"
# cold (compile) apply, read fast
$REL/halite -c $D/m 'bench-*' state.apply big -t 300 --out json > /dev/null 2>&1
grep VmHWM /proc/$MP/status | sed "s/^/$LABEL after cold: /"
# warm apply, the CLI's output read at ~6 MB/s
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
$REL/halite-run -c $D/m master.stats --out json | python3 -c 'import json,sys; s=json.load(sys.stdin); print("bus", s["bus"], "returns", s["returns"])'
kill $SP $MP; wait $SP $MP 2>/dev/null
rm -rf $D
