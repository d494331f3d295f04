//! The leader record read with a watch (`ReadRecord`), and watches firing.

use std::task::{Context, Poll, Waker};

use fdb_leader_election::runner::machine::{Event as In, Failure, RecordRead};
use fdb_leader_election::{ElectionError, TxnError, TxnErrorKind};

use super::Status;
use crate::events::Event;
use crate::time::MS;
use crate::world::{Actor, World};

impl World {
    /// Reads the leader record and arms a watch, in one read-only transaction committed at
    /// once (reads see partitions and outages like any other).
    pub(super) fn read_record(&mut self, pid: usize, want_watch: bool) {
        let txn = self.open(Actor::Proc(pid));
        let election = self.election.clone();
        let watching = want_watch && self.db.watches_enabled();
        let read = self.rt.block_on(async {
            let record = election.leader_record(&txn).await?;
            let watch = watching.then(|| election.watch_leader(&txn));
            Ok::<_, ElectionError>((record, watch))
        });
        let committed = self.rt.block_on(txn.clone().commit());
        let _ = self.faults.take_last_written();
        self.faults.close(txn.id());
        let event = match (read, committed) {
            (Ok((record, watch)), Ok(())) => {
                self.note_seen(pid, &record);
                let armed = match watch {
                    Some(Ok(w)) => {
                        if let Some(p) = self.procs.get_mut(pid) {
                            p.watch = Some(w);
                        }
                        Some(true)
                    }
                    Some(Err(_)) => Some(false),
                    None => want_watch.then_some(false),
                };
                In::RecordRead(Ok(RecordRead {
                    record,
                    config: None,
                    watch: armed,
                }))
            }
            (Err(e), _) => In::RecordRead(Err(Failure::of(&e))),
            (_, Err(e)) => In::RecordRead(Err(Failure::of(&ElectionError::Database(e)))),
        };
        self.feed(pid, event);
    }

    /// Wakes the processes whose watch fired (each at once, or when its pause ends).
    pub(in crate::world) fn poll_watches(&mut self) {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut fired = Vec::new();
        for (pid, p) in self.procs.iter_mut().enumerate() {
            let Some(w) = p.watch.as_mut() else {
                continue;
            };
            if let Poll::Ready(r) = w.as_mut().poll(&mut cx) {
                p.watch = None;
                if p.status != Status::Dead {
                    fired.push((pid, r.is_ok()));
                }
            }
        }
        for (pid, ok) in fired {
            let d = self.between(0, MS);
            self.queue
                .push(self.now.saturating_add(d), Event::WatchFired { pid, ok });
        }
    }

    /// A watch that fired reaches its machine.
    pub(in crate::world) fn watch_fired(&mut self, pid: usize, ok: bool) {
        let fired = if ok {
            Ok(())
        } else {
            Err(Failure::of(&ElectionError::Database(TxnError::new(
                TxnErrorKind::OtherRetryable,
            ))))
        };
        self.feed(pid, In::WatchFired(fired));
    }
}
