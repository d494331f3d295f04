#!/usr/bin/env python3
"""The Python fencing path against a real cluster (the FoundationDB tier of .ci/run runs it):

1. the shared table of fence cases (fence_cases.json, the one tests/election/fence_cases.rs runs against
   the Rust helper) against the Python check, `fence_admits`, in real transactions;
2. fenced_worker.py under `fdb-leader run --cluster-file`: its writes are admitted while it
   leads; after `fdb-leader force-vacate` its next write (the flush it makes on SIGTERM) is
   refused;
3. after its supervisor is killed with SIGKILL and another candidate has taken over, a write
   with its token is refused.

    test_fenced_worker.py --fdb-leader PATH --cluster-file F

Prints one line per check and `polyglot: N passed, M failed`; exit status 0 only if all passed.
Every process it starts is stopped when it ends, also on failure.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("FDB_LEADER_BALLOT", "0")
os.environ.setdefault("FDB_LEADER_ELECTION_NAME", "unused")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fdb  # noqa: E402
import fenced_worker  # noqa: E402  (sets the API version)

WORKER = os.path.join(HERE, "fenced_worker.py")
PATIENCE = 30.0
started = []


def stop_all():
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_for(what, check, bound=PATIENCE):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {bound}s")


def lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f]
    except FileNotFoundError:
        return []


def table(db, results):
    with open(os.path.join(HERE, "fence_cases.json")) as f:
        cases = json.load(f)["cases"]
    scratch = fdb.tuple.pack(("fdb-leader-election-tests", "polyglot", random.getrandbits(63)))
    key = scratch + b"fence"
    for case in cases:

        @fdb.transactional
        def check(tr):
            if case["fence"] is None:
                del tr[key]
            else:
                tr[key] = bytes.fromhex(case["fence"])
            return fenced_worker.fence_admits(tr, key, case["token"])

        admitted = check(db)
        ok = admitted == case["admitted"]
        results.append((f"table: {case['name']}", ok, f"admitted={admitted}"))

    @fdb.transactional
    def clean(tr):
        del tr[scratch : scratch + b"\xff"]

    clean(db)


def end_to_end(args, results):
    name = f"polyglot-{random.getrandbits(40):010x}"
    tmp = tempfile.mkdtemp(prefix="polyglot-")
    base = [args.fdb_leader, "--cluster-file", args.cluster_file, "--election", name]

    def run(label, priority):
        log = os.path.join(tmp, f"{label}.log")
        err = open(os.path.join(tmp, f"{label}.err"), "w")
        p = subprocess.Popen(
            base
            + ["run", "--name", label, "--priority", str(priority)]
            + ["--lease", "1500ms", "--heartbeat", "300ms", "--grace", "5s", "--"]
            + [sys.executable, WORKER, "--cluster-file", args.cluster_file]
            + ["--log", log, "--prefix", name],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        started.append(p)
        return p, log

    w1, log1 = run("w1", 1)
    first = wait_for("w1's writes admitted", lambda: [l for l in lines(log1) if l[0] == "admitted"][4:])
    token1 = int(first[0][1])
    results.append(("worker: writes admitted while leading", True, f"token {token1}"))

    # An operator fences w1 out: its guard ends, fdb-leader stops the worker, and the worker's
    # final write (its flush on SIGTERM) is refused.
    vacate = subprocess.run(
        base + ["force-vacate", "--expected-ballot", str(token1)],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    if vacate.returncode != 0:
        raise AssertionError(f"force-vacate: exit {vacate.returncode}: {vacate.stderr}")
    refused = wait_for(
        "w1's worker is refused",
        lambda: [i for i, l in enumerate(lines(log1)) if l[:2] == ["refused", str(token1)]],
    )
    mine = lines(log1)
    later = [l for l in mine[refused[0] :] if l[:2] == ["admitted", str(token1)]]
    ok = not later
    results.append(
        (
            "worker: after force-vacate its next write is refused",
            ok,
            " ".join(mine[refused[0]]) + (f"; then admitted {later}" if later else ""),
        )
    )

    # A second candidate with a higher priority: whoever leads next, kill its supervisor with
    # SIGKILL; the other takes over after a lease; the killed leader's token is refused.
    w2, log2 = run("w2", 5)

    def leader_now():
        for proc, log in ((w1, log1), (w2, log2)):
            admitted = [l for l in lines(log) if l[0] == "admitted" and int(l[1]) > token1]
            if admitted and proc.poll() is None:
                return proc, log, int(admitted[-1][1])
        return None

    victim, victim_log, token2 = wait_for("a new leader writes", leader_now)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    other_log = log2 if victim_log == log1 else log1
    token3 = wait_for(
        "the other candidate takes over",
        lambda: max([int(l[1]) for l in lines(other_log) if l[0] == "admitted"] + [0]) > token2
        and max(int(l[1]) for l in lines(other_log) if l[0] == "admitted"),
    )
    once = subprocess.run(
        [sys.executable, WORKER, "--cluster-file", args.cluster_file, "--once"]
        + ["--token", str(token2), "--election", name, "--prefix", name],
        env=dict(os.environ, FDB_LEADER_BALLOT=str(token2), FDB_LEADER_ELECTION_NAME=name),
        timeout=PATIENCE,
    )
    results.append(
        (
            "worker: after SIGKILL and a takeover, the old token is refused",
            once.returncode == 3 and token3 > token2,
            f"token {token2} after {token3}: exit {once.returncode}",
        )
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fdb-leader", required=True)
    parser.add_argument("--cluster-file", required=True)
    args = parser.parse_args()
    db = fdb.open(args.cluster_file)
    results = []
    try:
        table(db, results)
        end_to_end(args, results)
    except Exception as e:  # a failed step is one failure, reported
        results.append(("end-to-end", False, repr(e)))
    finally:
        stop_all()
    for what, ok, detail in results:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    passed = sum(1 for _, ok, _ in results if ok)
    failed = len(results) - passed
    print(f"polyglot: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
