#!/bin/sh
# A rolling upgrade of two `fdb-leader run` supervisors from 1.4.0 to 1.5.0 under
# prefer-oldest, on a SQLite file in the current folder (docs/rolling-upgrades.md shows the
# regions between the `README:` markers; tests/cli/version.rs runs this script with
# fdb-leader on the PATH and checks what it prints). Each child prints when it starts leading.
set -eu
a=
b=
trap 'kill -TERM $a $b 2>/dev/null || true' EXIT

# README: cli-upgrade-start
fdb-leader --sqlite upgrade.db config set --version-policy prefer-oldest
fdb-leader --sqlite upgrade.db run --name a --app-version 1.4.0 -- sh -c 'echo "a 1.4.0 leads"; exec sleep 1000' &
a=$!
# README: end
sleep 1
# README: cli-upgrade-roll
fdb-leader --sqlite upgrade.db run --name b --app-version 1.4.0 -- sh -c 'echo "b 1.4.0 leads"; exec sleep 1000' &
b=$!
sleep 1
# Upgrade b first. SIGTERM: the supervisor stops its child, resigns, and exits 0.
kill -TERM $b; wait $b
FDB_LEADER_APP_VERSION=1.5.0 fdb-leader --sqlite upgrade.db run --name b -- sh -c 'echo "b 1.5.0 leads"; exec sleep 1000' &
b=$!
sleep 1
fdb-leader --sqlite upgrade.db status   # a (1.4.0) still leads: the oldest version does
# Then a, the leader: it hands over to b (1.5.0) at once, the one change of the upgrade.
kill -TERM $a; wait $a
fdb-leader --sqlite upgrade.db run --name a --app-version 1.5.0 -- sh -c 'echo "a 1.5.0 leads"; exec sleep 1000' &
a=$!
sleep 1
fdb-leader --sqlite upgrade.db status   # b (1.5.0) leads, ballot 2
# README: end

kill -TERM $a $b
wait $a
wait $b
a=
b=
echo "upgraded"
