#!/usr/bin/env bash
# What a swarm that starts after readiness rounds is owed (issue 25,
# session 19; docs/benchmarks.md "a fleet that starts at once").
# A swarm of N answers, is killed; ROUNDS readiness rounds (test.ping and
# its saltutil.find_job, as the CLI publishes them) are published while it
# is down; the swarm starts again: how long until a new test.ping -t 20 is
# answered by all, the returns it sent, and master.stats' redeliveries.
# Usage: owed-bench.sh N [ROUNDS] [BINDIR] [MASTER_BIN]
set -u
N=${1:?number of swarm minions}
ROUNDS=${2:-5}
REL=${3:-$(cd "$(dirname "$0")/../../.." && pwd)/target/release}
MBIN=${4:-$REL/halite-master}
LABEL=owed-$N
D=$(mktemp -d /tmp/halite-bench.XXXXXX); mkdir -p $D/m $D/s
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
kill -9 $SP; wait $SP 2>/dev/null; sleep 1
for r in $(seq 1 $ROUNDS); do
  jid=$($REL/halite -c $D/m 'bench-*' test.ping --async | awk '{print $NF}')
  $REL/halite -c $D/m 'bench-*' saltutil.find_job $jid --async > /dev/null
done
before=$($REL/halite-run -c $D/m master.stats --out json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["returns"]["packed"])')
t0=$(date +%s.%N)
$REL/halite-minion -c $D/s --swarm $N --swarm-prefix bench- > $D/swarm2.out 2>&1 & SP=$!
rounds=0
while :; do
  rounds=$((rounds+1))
  got=$($REL/halite -c $D/m 'bench-*' test.ping -t 20 --out json 2>/dev/null | grep -c true)
  [ "$got" -ge "$N" ] && break
  [ $rounds -ge 10 ] && break
done
t1=$(date +%s.%N)
sleep 3
$REL/halite-run -c $D/m master.stats --out json | python3 -c "
import json,sys; s=json.load(sys.stdin)
print('$LABEL: all $N answering after %.1f s in $rounds round(s) ($got answered last); returns after the restart: %d; redeliveries %s' % ($t1-$t0, s['returns']['packed']-$before, s['redeliveries']))"
kill $SP $MP; wait $SP $MP 2>/dev/null
rm -rf $D
