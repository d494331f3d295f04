//! The help texts of the command line: what each command does beyond its flags' own lines.

/// The exit codes, after every help text.
pub(super) const EXIT_CODES: &str = "\
Exit codes:
  0  success; for `run` and `watch`, a clean shutdown after SIGINT, SIGTERM or SIGHUP
  1  refused or not found: an operator override was rejected (ballot mismatch, no leader,
     preemption disabled; for `shards`: placement not frozen for a move, an unknown, drained
     or fenced member), or the election (or its store file) does not exist
  2  usage error: bad arguments (a shard number out of range), an invalid configuration, an
     option this build lacks
  3  store error: the store cannot be opened, created or written (permissions, read-only,
     not a database, a newer schema, a network file system), is corrupt, was deleted or
     replaced while in use, a transaction failed, or the outcome of a write is unknown
  4  command error: CMD is not an executable command, the begin-command failed (unless
     --error-timeout), or the child or a hook could not be started
  5  not elected: `run --timeout` ran out, or `run --try` found the leadership taken
  N  with `run --on-child-exit exit`: the child's exit code (128 + signal if it was killed)

Every flag can also be set by the environment variable shown beside it; a flag on the
command line wins over the variable.";

/// `fdb-leader --help`'s one line.
pub(super) const ABOUT: &str =
    "Leader election from the shell: run a command on exactly one machine of a group";

/// `fdb-leader --help`'s introduction.
pub(super) const LONG_ABOUT: &str = "\
Leader election from the shell: run a command on exactly one machine of a group, and inspect
or steer the election.

Pick one store: --sqlite PATH (processes on one host share a SQLite file; created if missing),
--cluster-file PATH (FoundationDB; needs a build with an fdb-7_* feature), or --memory (an
in-process store, for a single-process demo). --election NAME selects the election within the
store (its keys live under the tuple subspace (\"fdb-leader\", NAME); the sharded election of
that name, which the shards commands show and steer, under (\"fdb-leader\", NAME, \"shards\")).

Logs go to stderr (level from RUST_LOG, default info); status, watch, shards status and the
other one-shot commands write their answers to stdout.";

/// After the flags of `run --help`.
pub(super) const RUN_AFTER_HELP: &str = "\
Before campaigning, run checks that CMD is an executable command (for --shell: that the
script parses and its first command exists) and that the store is usable; a problem ends it
at once (exit 4 or 3) without taking part in the election.

While this process leads, CMD runs with FDB_LEADER_BALLOT (the ballot: a fencing token that
only grows), FDB_LEADER_ID (this candidate's id) and FDB_LEADER_ELECTION_NAME (the election's
name) in its environment, in a process group of its own, with standard input from /dev/null.
None of these is a flag's variable: an fdb-leader started by CMD is not configured by them
(it does inherit the FDB_LEADER_* variables this process was started with).

The child never outlives fdb-leader, nor its lease: a small watchdog process (fdb-leader
itself, in the child's process group) holds a pipe from this process and the lease's
deadline, renewed through the pipe, and kills the group with SIGKILL as soon as the pipe
closes (this process died for any reason, SIGKILL included) or the deadline passes without a
renewal (this process is stopped or blocked; no grace then). On Linux the child also gets a
parent-death signal, so that killing the supervisor and the watchdog together still ends it.

Ctrl-Z (SIGTSTP) stops the child as SIGTERM would, leaves the election (resigning, reserving
the leadership for the best live candidate), then stops this process; SIGCONT (fg, bg)
campaigns again. SIGTTIN and SIGTTOU are blocked: terminal I/O never stops this process.

The child's whole process group is stopped (SIGTERM, then SIGKILL after --grace) when:
  - the leadership is lost, or the local lease runs out (say the store is unreachable);
  - a higher-priority candidate or an operator asks for a handover: the child is stopped
    while this process still leads, and the leadership moves only afterwards (the store's
    handover_grace bounds the wait, so keep --grace below it);
  - the store fails in a way that cannot heal (permission denied, read-only, not a
    database, a newer schema) or its file is deleted or replaced: then fdb-leader exits 3;
  - this process receives SIGINT, SIGTERM or SIGHUP: it then stops the child, runs the
    end-command, resigns (reserving the leadership for the best live candidate, so it moves
    at once) and exits 0. A second signal skips the grace.

When the child exits by itself (--on-child-exit resign or restart), the next campaign (or
restart) waits a back-off: 1s after the first exit, doubling up to 1m, back to 1s once a
child has run for 1m. With `resign`, this process leaves the election during the back-off,
so a child that fails at once costs one ballot per back-off, not one per millisecond.
Non-zero exits and deaths by signal are logged as warnings.

--begin-command runs (sh -c, to completion) after each election, before the child starts; if
it fails, the child is not started and fdb-leader shuts down with exit code 4, or, with
--error-timeout, leaves the election, waits that long and campaigns again.
--end-command runs (sh -c, to completion) after the child has stopped, after every
begin-command that started: while this process still leads when it gives the leadership up
itself, after the loss otherwise. Both get the same environment as the child.

--timeout gives up (exit 5) if this process is not elected within that time of its start;
--try gives up at once if another candidate holds or has reserved the leadership, and after
one lease otherwise. Both apply to the first election only.

--metrics-listen ADDR serves, over plain HTTP on one listener, /metrics (Prometheus text:
the runner's fdb_leader_* metrics) and /healthz (200 `ok`, or 503 naming the problem when
the runner is wedged or dead; a follower is healthy). Prefer a loopback address. For load
balancers it also answers /leader (200 while this process leads and takes new work, judged
against its lease at each request, so it turns 503 at the deadline even if this process is
blocked, and 503 as soon as it starts handing over or stopping, while the child drains),
/follower (200 while an eligible follower), and with --shards /shards (JSON) and /shard/N
(200 while this member owns shard N and takes new work for it). Point HAProxy's `option
httpchk GET /leader` at it.

Health checks: --ready-command/--ready-url run on every candidate (can this host lead?);
while they fail this process is not eligible: it does not campaign and, leading, hands over.
--health-command/--health-url run only while leading, against the child; after --health-fall
failures the leader hands over and stays ineligible for a lease (not with --shards: one
child per shard). A command runs as sh -c with the child's environment, in a process group of
its own that is killed at --health-timeout; exit 0 passes. A URL passes on a 2xx answer to
GET. --unhealthy hold (default) keeps an ineligible leader leading while nobody else is
eligible; release lets go. `status` shows each candidate's eligibility and why.

Rolling upgrades: --app-version V registers the version this process runs (a semantic
version, e.g. 1.5.0). The election's version policy (`config set --version-policy`) ranks
candidates by it before their priority: prefer-newest moves the leadership to the first
instance of a new version (a cooperative handover with preemption on, the default; no lease
waited for), prefer-oldest keeps it on the old version until its last instance has left,
no-downgrade never hands it back to an older version while one as new as the leader's is
live; ignore (the default) leaves priority alone. Without --app-version a candidate ranks as
the oldest. `status` and `watch` show each candidate's version and the leader's. With
--shards, the version ranks the members for coordinating the placement (not for owning
shards). See docs/rolling-upgrades.md.

With --shards M, this process joins the sharded election of --election NAME instead (under
(\"fdb-leader\", NAME, \"shards\"); M shards if it creates it, the stored count otherwise, and
a stored one of more than 256 shards is refused with exit 2) as a member of weight --weight
(default 1) and priority --priority, and runs one CMD per shard it owns, with FDB_LEADER_SHARD
(0 to M-1), FDB_LEADER_BALLOT (that shard's ballot), FDB_LEADER_SHARD_COUNT (M), FDB_LEADER_ID
(this member) and FDB_LEADER_ELECTION_NAME in its environment. The shards spread over the live
members by weight. Each child runs under a watchdog of its own that holds its shard's lease,
as above. A shard that moves away (a member joins, a drain, `shards move`) is handed over only
after its child has stopped (SIGTERM, SIGKILL after --grace); a shard lost without asking has
its child killed at once. SIGINT, SIGTERM and SIGHUP stop every child, then hand every shard
back in one commit (the others take them over without waiting a lease) and exit 0. A child
that exits by itself is restarted after the back-off while the shard is owned (--on-child-exit
restart, the default with --shards), or ends the run (exit). --on-child-exit resign, --try,
--timeout, --payload, --begin-command, --end-command and --error-timeout are refused with
--shards. `shards status` (or `status`) shows the placement.

Leadership is not authority: a paused process can act late, so external effects should
carry the ballot and be rejected when a higher one was seen.

Exit codes: 0 after a signal; the child's code with --on-child-exit exit; 2 usage; 3 store;
4 CMD not executable, begin-command failed or the child could not be started; 5 not elected
in time (--timeout, --try).";

/// After the flags of `config --help`.
pub(super) const CONFIG_AFTER_HELP: &str = "\
The flags of `config set` read FDB_LEADER_CONFIG_* variables (not FDB_LEADER_LEASE and the
like, which `run` reads), so that an environment set up for `run` never changes the stored
configuration by accident.

`config set --lease DUR` derives the timings the lease scales (heartbeat, candidate timeout,
transaction timeout, takeover stagger, handover grace, reservation timeout) from it, as `run`
and a new store do, unless they are given too; it keeps the other settings. A refused `config
set` names a whole command that would work.

With --sharded, `config get` and `config set` act on the sharded election of --election NAME
(`run --shards`, under (\"fdb-leader\", NAME, \"shards\")): every member and coordinator uses
its configuration from its next cycle. `config set --sharded --shards M` also creates that
election with M shards if it does not exist yet, as `run --shards M` would, so that its first
members start with these settings.

--version-policy ignore|prefer-newest|prefer-oldest|no-downgrade ranks the candidates by the
version they registered (`run --app-version`) before their priority. It can be changed at any
moment: a candidate the new policy ranks above the leader asks it to hand over (with
preemption on, the default), and the leadership moves by that cooperative handover, with no
lease waited for.";

/// After the flags of `status --help`.
pub(super) const STATUS_AFTER_HELP: &str = "\
The lease state is what one observation shows: `owned` (a leader holds the ballot), `vacant`
(any candidate may take it), `reserved` (vacant, reserved for a successor, which takes it at
once) or `held` (vacant after force-vacate: no candidate takes it before one lease of no
change). A single observation cannot tell a live leader from a crashed one: a crashed
leader's record stays `owned` until a candidate takes over one lease later (`watch` reports
the lapse).

Heartbeat age is measured without comparing clocks: `lag` is the number of leader renewals
since the candidate's last heartbeat (the record's renewal counter minus the renewal the
candidate last saw). A live candidate lags at most candidate_timeout / heartbeat renewals.
While no leader renews, lags stop growing. AGE is how long ago it last heartbeated, about LAG
heartbeats: a candidate killed a while ago shows it growing while it is still live, and a
resign may reserve the leadership for it until it is not (its successor then waits the
reservation timeout); `resign --to NAME|ID` names one that heartbeats.

Each candidate's VERSION is the one it registered (`run --app-version`; `-` for none, which
ranks as the oldest), and the leader line gives the leader's; the config line ends with the
version policy (`config set --version-policy`). A `refused` line shows a `resign --to`
that the current leader refused (the candidate it named was no longer live and eligible when
it read the request): it keeps leading, and says why.

--json prints one object: leader (id or null), ballot, lease_state, renewal, lease_ms,
leader_priority, leader_version, handover_requested_by, operator_request, resign_refusal
(null, or ballot, operator, to, reason), reserved_for, operator_hold, payload, payload_hex,
config (with version_policy), candidates (id, priority, version, live, heartbeat,
seen_renewal, renewal_lag, heartbeat_age_ms, registration, leader, eligible,
eligibility_reason), and
eligibility_marks (the operators' exclusions: name, reason; lift one with `eligible NAME
true`).

For a name whose only election is a sharded one (`run --shards`), status shows its placement
as `shards status` does (and --json prints that command's object).";

/// After the flags of `resign --help`.
pub(super) const RESIGN_AFTER_HELP: &str = "\
Writes an operator's request that the leader of ballot B step down. The leader honours it at
its next cycle (at once if it watches the store), whatever the priorities and the preemption
setting: it stops its work (waiting at most the handover grace), stops believing it leads,
then writes a vacancy reserved for the best live eligible candidate other than itself (with
--to NAME, the best one of that name; with --to ID, an id as `status` lists it, that one),
which takes over in one commit. With no other live eligible
candidate the vacancy is unreserved and any eligible candidate, the old leader too, may take
it with a new ballot. A leader that no longer cycles never honours it: use force-vacate then.

With --to: refused at once (exit 1, nothing written) unless a candidate it names is live and
eligible; if it is gone when the leader reads the request, the leader keeps leading, clears
the request, and `status` shows why.

Exit codes: 0 requested; 1 rejected (no leader, ballot mismatch, no such live eligible
candidate).";

/// After the flags of `force-vacate --help`.
pub(super) const FORCE_VACATE_AFTER_HELP: &str = "\
Fences the leader of ballot B out at once: the ballot grows by one, so the old leader's
fenced writes fail from this commit on, and the record becomes a vacancy held by this
operator (`status` shows it as `held`), which no candidate may fill before one full lease of
no change (by then the old leader's own belief has ended). For a leader that is wedged or
misbehaving; prefer `resign` otherwise.

Exit codes: 0 vacated; 1 rejected (ballot mismatch).";

/// After the flags of `shards --help`.
pub(super) const SHARDS_AFTER_HELP: &str = "\
The sharded election of --election NAME lives under the tuple subspace (\"fdb-leader\", NAME,
\"shards\"), beside the single election of that name (\"fdb-leader\", NAME) and independent
of it: a Rust service joins it with ShardedRunner::builder(db, Subspace::from((\"fdb-leader\",
NAME, \"shards\"))). Its members create it (`fdb-leader run --shards M -- CMD`, or a
service's ShardedRunners); these commands never create a store or an election.

The overrides follow the rules of the single election's: nothing a live member holds is taken
from it, only asked of it. `freeze` stops the coordinator's moves (a dead member's shards are
still failed over); `unfreeze` hands placement back, and the coordinator restores balance with
the fewest moves. `drain` gives a member weight 0 until `undrain` (whatever weight it
announces itself): its shards move to the others, at most the move limit at a time. `move`
moves one shard by hand, only while placement is frozen (the coordinator would move it back
otherwise): a live owner is asked to hand it over, as for any move; a shard nobody live holds
is reserved for the target at once.

Exit codes: 0 done; 1 refused or not found (no sharded election, an unknown member, placement
not frozen for `move`, a drained or fenced target); 2 usage (a shard number out of range, a
malformed member id); 3 store.";
