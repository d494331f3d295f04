#!/usr/bin/env python3
"""A child of `fdb-leader run --cluster-file F -- python3 fenced_worker.py ...` that fences every
write with its ballot, from Python (the `foundationdb` bindings from PyPI, API version 730, or
the one FDB_API_VERSION names: the FoundationDB tier sets 740 on a 7.4 cluster).

`fdb-leader run` hands its child FDB_LEADER_BALLOT (the fencing token) and
FDB_LEADER_ELECTION_NAME (the election's name). The election's fence key is the tuple ("fdb-leader", NAME, "fence"), and
its value the tuple (3, ballot, vacant). Each write reads the fence in its own transaction and
commits only while the token is the current, non-vacant ballot: a worker that kept running after
its leadership ended (a pause, a slow shutdown) can no longer write.

    fenced_worker.py --cluster-file F --log LOG [--prefix P] [--interval-ms N]
    fenced_worker.py --cluster-file F --once --token B --election NAME [--prefix P]

The loop writes ("fenced-worker", P, "writes", token, n) every interval and logs `admitted
TOKEN N` or `refused TOKEN N` (then exits 3). On SIGTERM it makes one last write attempt (a
final flush, as applications do), logs its outcome and exits 0. `--once` makes one write attempt
with `--token` and exits 0 if admitted, 3 if refused.
"""

import argparse
import os
import signal
import sys
import time

import fdb

fdb.api_version(int(os.environ.get("FDB_API_VERSION", "730")))

# README: python
FENCE_FORMAT_VERSION = 3


def fence_admits(tr, fence_key, token):
    """The fence rule: read the fence in the write's own transaction (a conflict range, so the
    commit fails if ownership changes meanwhile); admit only the current, non-vacant ballot."""
    value = tr[fence_key]
    if not value.present():
        return False
    try:
        fence = fdb.tuple.unpack(value)
    except ValueError:
        return False
    if len(fence) != 3 or [type(e) for e in fence] != [int, int, bool]:
        return False
    version, ballot, vacant = fence
    return version == FENCE_FORMAT_VERSION and not vacant and ballot > 0 and ballot == token


@fdb.transactional
def fenced_write(tr, fence_key, token, key, value):
    if not fence_admits(tr, fence_key, token):
        return False
    tr[key] = value
    return True


token = int(os.environ["FDB_LEADER_BALLOT"])
fence_key = fdb.tuple.pack(("fdb-leader", os.environ["FDB_LEADER_ELECTION_NAME"], "fence"))
# README: end


def main():
    parser = argparse.ArgumentParser(description="A fenced worker for fdb-leader run")
    parser.add_argument("--cluster-file", required=True)
    parser.add_argument("--log")
    parser.add_argument("--prefix", default="default")
    parser.add_argument("--interval-ms", type=int, default=20)
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--token", type=int)
    parser.add_argument("--election")
    args = parser.parse_args()

    my_token = args.token if args.token is not None else token
    election = args.election or os.environ["FDB_LEADER_ELECTION_NAME"]
    my_fence = fdb.tuple.pack(("fdb-leader", election, "fence"))
    db = fdb.open(args.cluster_file)

    def write(n):
        key = fdb.tuple.pack(("fenced-worker", args.prefix, "writes", my_token, n))
        return fenced_write(db, my_fence, my_token, key, b"x")

    if args.once:
        sys.exit(0 if write(0) else 3)

    log = open(args.log, "a", buffering=1)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    n = 0
    while True:
        n += 1
        admitted = write(n)
        log.write(f"{'admitted' if admitted else 'refused'} {my_token} {n}\n")
        if stopping:
            # The final flush after SIGTERM: logged above.
            log.write(f"stopped {my_token} {n}\n")
            sys.exit(0)
        if not admitted:
            sys.exit(3)
        time.sleep(args.interval_ms / 1000)


if __name__ == "__main__":
    main()
