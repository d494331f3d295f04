//! The supervisor's side of a watchdog: the lifeline it keeps (the pipe whose end-of-file
//! kills the child's group) and the lease it tells the watchdog, one note per moved deadline
//! (see the parent module's docs).

use std::ffi::{OsStr, OsString};
use std::future::Future;

use futures_util::future::Either;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;

use fdb_leader_election::runner::LeadershipGuard;
use fdb_leader_election::shard::{Member, ShardGuard};
use fdb_leader_election::{Candidate, LocalInstant};
use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::{FEED_RETRY, Note, watchdog_args};

/// What the supervisor tells a watchdog: the belief deadline of one leadership, or of one
/// shard's ownership (the member's lease, which every renewal moves).
#[derive(Clone)]
pub(crate) struct Lease {
    held: Held,
}

/// The guard whose deadline a [`Lease`] tells, and the clock that deadline is on.
#[derive(Clone)]
enum Held {
    /// The leadership of a single election (`run`).
    Leader {
        /// The leadership.
        guard: LeadershipGuard,
        /// The candidate whose clock the guard's deadline is on.
        candidate: Candidate,
    },
    /// One shard's ownership (`run --shards`).
    Shard {
        /// The shard's ownership.
        guard: ShardGuard,
        /// The member whose clock the guard's deadline is on.
        member: Member,
    },
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Lease");
        if let Held::Shard { guard, .. } = &self.held {
            out.field("shard", &guard.shard().get());
        }
        out.field("ballot", &self.ballot())
            .field("deadline", &self.deadline())
            .finish()
    }
}

impl Lease {
    /// The lease of the leadership `guard` of `candidate`.
    pub(crate) fn new(guard: &LeadershipGuard, candidate: &Candidate) -> Self {
        Lease {
            held: Held::Leader {
                guard: guard.clone(),
                candidate: candidate.clone(),
            },
        }
    }

    /// The lease of one shard's ownership, `guard`, by `member`: the guard's deadline, which
    /// follows the member's renewals.
    pub(crate) fn of_shard(guard: &ShardGuard, member: &Member) -> Self {
        Lease {
            held: Held::Shard {
                guard: guard.clone(),
                member: member.clone(),
            },
        }
    }

    /// The ballot (fencing token) of the ownership, for logs.
    fn ballot(&self) -> u64 {
        match &self.held {
            Held::Leader { guard, .. } => guard.ballot().get(),
            Held::Shard { guard, .. } => guard.fencing_token().get(),
        }
    }

    /// The guard's deadline now (read even once the guard is cancelled).
    fn deadline(&self) -> LocalInstant {
        match &self.held {
            Held::Leader { guard, .. } => guard.deadline(),
            Held::Shard { guard, .. } => guard.deadline(),
        }
    }

    /// Resolves at the guard's next deadline move after this call.
    fn moved(&self) -> impl Future<Output = ()> + Send + 'static {
        match &self.held {
            Held::Leader { guard, .. } => Either::Left(guard.deadline_moved()),
            Held::Shard { guard, .. } => Either::Right(guard.deadline_moved()),
        }
    }

    /// Now, on the clock the deadline is on.
    fn now(&self) -> LocalInstant {
        match &self.held {
            Held::Leader { candidate, .. } => candidate.now(),
            Held::Shard { member, .. } => member.now(),
        }
    }

    /// The guard's deadline now, and the note that tells it (`None`: no clock). Read even
    /// once the guard is cancelled: a deadline moved back just before still counts.
    fn note(&self) -> (LocalInstant, Option<Note>) {
        let deadline = self.deadline();
        let remaining = deadline.saturating_duration_since(self.now());
        (deadline, Note::now(remaining))
    }
}

/// A watchdog's lifeline: the read end for its standard input, and the supervisor's side.
pub(crate) struct Lifeline {
    /// The watchdog's standard input, until taken.
    read: Option<OwnedFd>,
    /// The write end (close-on-exec, so no other child inherits it).
    write: OwnedFd,
    /// The lease and its first note, if the watchdog holds it.
    lease: Option<(Lease, LocalInstant)>,
    /// The watchdog's arguments.
    args: Vec<OsString>,
}

impl Lifeline {
    /// A lifeline for a watchdog running `program args…`; with `lease`, the watchdog holds it
    /// from the deadline read now on (see the module's docs).
    pub(crate) fn new(
        program: &OsStr,
        args: &[OsString],
        lease: Option<&Lease>,
    ) -> std::io::Result<Lifeline> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
        let (lease, note) = match lease {
            Some(lease) => {
                let (deadline, note) = lease.note();
                // Without a clock the watchdog would have no deadline: refuse to start.
                let note = note.ok_or_else(|| std::io::Error::other("cannot read the clock"))?;
                (Some((lease.clone(), deadline)), Some(note))
            }
            None => (None, None),
        };
        if lease.is_some() {
            // A note that does not fit waits for the next poll instead of blocking the runtime.
            fcntl(&write, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(std::io::Error::from)?;
        }
        Ok(Lifeline {
            read: Some(read),
            write,
            lease,
            args: watchdog_args(program, args, note),
        })
    }

    /// The watchdog's arguments: `__fdb-leader-watchdog [--lease SENT DEADLINE] -- PROGRAM
    /// ARGS…`.
    pub(crate) fn args(&self) -> &[OsString] {
        &self.args
    }

    /// The read end, for the watchdog's standard input (once).
    pub(crate) fn take_read(&mut self) -> Option<OwnedFd> {
        self.read.take()
    }

    /// Once the watchdog runs: keeps the write end (dropping the handle closes it, and the
    /// watchdog kills the group), and, if the watchdog holds the lease, tells it each new
    /// deadline from a task of its own, aborted with the handle.
    pub(crate) fn keep(self) -> Kept {
        match self.lease {
            None => Kept {
                _write: Some(self.write),
                feeder: None,
            },
            Some((lease, _)) => {
                let task = tokio::spawn(feed(File::from(self.write), lease));
                Kept {
                    _write: None,
                    feeder: Some(task.abort_handle()),
                }
            }
        }
    }
}

/// The supervisor's side of a running watchdog's lifeline.
#[derive(Debug)]
pub(crate) struct Kept {
    _write: Option<OwnedFd>,
    feeder: Option<tokio::task::AbortHandle>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(feeder) = &self.feeder {
            feeder.abort();
        }
    }
}

/// Writes `note` whole; `Ok(false)` if the pipe is full (try again later), `Err` if the
/// watchdog is gone.
pub(super) fn write_note(lifeline: &File, note: Note) -> std::io::Result<bool> {
    let line = note.line();
    // At most PIPE_BUF bytes: written whole or not at all.
    match (&*lifeline).write(line.as_bytes()) {
        Ok(n) if n == line.len() => Ok(true),
        Ok(_) => Err(std::io::Error::other("a note was cut")),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// Tells the watchdog each new deadline of `lease` (see the module's docs): the first at once,
/// each later one as soon as the guard's deadline moves; a note that did not fit the pipe is
/// written again every [`FEED_RETRY`] until one does.
async fn feed(lifeline: File, lease: Lease) {
    let mut told: Option<LocalInstant> = None;
    loop {
        // Before the read: a move after it wakes this loop.
        let moved = lease.moved();
        let (deadline, note) = lease.note();
        let mut untold = false;
        if told != Some(deadline) {
            match note.map(|note| write_note(&lifeline, note)) {
                Some(Ok(true)) => told = Some(deadline),
                // The pipe is full (a watchdog stopped for long), or no clock: again later.
                Some(Ok(false)) | None => untold = true,
                Some(Err(e)) => {
                    // The watchdog is gone (the supervisor sees its exit).
                    tracing::debug!(error = %e, "the watchdog's lifeline is closed");
                    return;
                }
            }
        }
        if untold {
            tokio::select! {
                () = moved => {}
                () = tokio::time::sleep(FEED_RETRY) => {}
            }
        } else {
            moved.await;
        }
    }
}
