//! The executor's waits: for a transaction to end, or until a time, a watch or a wake-up,
//! attending meanwhile to the guard's deadline, shutdown and requests from handles.

use std::future::Future;

#[allow(clippy::wildcard_imports)]
use super::*;

impl<D: ElectionDatabase> Executor<D> {
    /// Runs a transaction (or wait) to its end, attending meanwhile to the guard's deadline,
    /// shutdown (which abandons the transaction) and requests from handles.
    pub(super) async fn run_op<F>(&mut self, op: F) -> Vec<Command>
    where
        F: Future<Output = Outcome>,
    {
        /// What interrupted the wait for an operation (short-lived: matched at once).
        #[expect(clippy::large_enum_variant, reason = "matched at once, never stored")]
        enum Woke {
            Shutdown,
            Done(Outcome),
            Deadline,
            DeadlineMoved,
            Request(Option<Request>),
            Eligibility,
        }
        tokio::pin!(op);
        let moved = Arc::clone(&self.brain.deadline_moved);
        let shared = Arc::clone(self.shared());
        loop {
            let deadline = self.guard_deadline();
            let shutdown = self.shutdown.clone();
            let (fed, open) = (self.shutdown_fed, self.requests_open);
            let requests = &mut self.requests;
            let woke = tokio::select! {
                biased;
                () = shutdown.cancelled(), if !fed => Woke::Shutdown,
                outcome = &mut op => Woke::Done(outcome),
                () = sleep_until_opt(deadline) => Woke::Deadline,
                () = moved.notified() => Woke::DeadlineMoved,
                request = requests.recv(), if open => Woke::Request(request),
                () = shared.eligibility_changed.notified() => Woke::Eligibility,
            };
            match woke {
                Woke::Shutdown => {
                    // The operation is abandoned (dropped): every step is cancel-safe.
                    self.shutdown_fed = true;
                    return self.brain.feed(Event::ShutdownRequested);
                }
                Woke::Done(outcome) => {
                    let event = self.outcome(outcome);
                    return self.brain.feed(event);
                }
                // While an operation runs the machine starts nothing else: what it says now
                // does not wait.
                Woke::Deadline => {
                    let commands = self.brain.feed(Event::Tick);
                    self.apply_all(commands);
                }
                // The transaction moved the guard's deadline back: wait on the new one.
                Woke::DeadlineMoved => {}
                Woke::Request(request) => {
                    let commands = self.request(request);
                    self.apply_all(commands);
                }
                // The cycle in flight may have read the old eligibility: the machine runs
                // the next one as soon as this operation ends.
                Woke::Eligibility => {
                    self.publish_eligibility();
                    let commands = self.brain.feed(Event::EligibilityChanged);
                    self.apply_all(commands);
                }
            }
        }
    }

    /// Sleeps until `at`, or until something happens; returns what followed.
    pub(super) async fn sleep(&mut self, at: LocalInstant) -> Vec<Command> {
        self.update_gauges();
        let clock = Arc::clone(&self.brain.clock);
        let due = tokio_instant(clock.as_ref(), at);
        let deadline = self.guard_deadline();
        let shutdown = self.shutdown.clone();
        let wake = Arc::clone(&self.shared().wake);
        let shared = Arc::clone(self.shared());
        /// What ended the sleep (short-lived: matched at once).
        #[expect(clippy::large_enum_variant, reason = "matched at once, never stored")]
        enum Woke {
            Event(Event),
            Request(Option<Request>),
            Watch(Result<(), crate::store::txn::TxnError>),
        }
        let (fed, open) = (self.shutdown_fed, self.requests_open);
        let (requests, watch) = (&mut self.requests, &mut self.watch);
        let woke = tokio::select! {
            biased;
            () = shutdown.cancelled(), if !fed => Woke::Event(Event::ShutdownRequested),
            () = sleep_until_opt(deadline) => Woke::Event(Event::Tick),
            request = requests.recv(), if open => Woke::Request(request),
            fired = async {
                match watch.as_mut() {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            } => Woke::Watch(fired),
            () = wake.notified() => Woke::Event(Event::WorkIdle),
            () = shared.eligibility_changed.notified() => Woke::Event(Event::EligibilityChanged),
            () = tokio::time::sleep_until(due) => Woke::Event(Event::Tick),
        };
        let event = match woke {
            Woke::Event(event) => event,
            Woke::Request(request) => return self.request(request),
            Woke::Watch(fired) => {
                self.watch = None;
                Event::WatchFired(fired.map_err(|e| {
                    tracing::debug!(error = %error_chain(&e), "leader watch failed; polling for a while");
                    Failure::of(&ElectionError::Database(e))
                }))
            }
        };
        if matches!(event, Event::ShutdownRequested) {
            self.shutdown_fed = true;
        }
        if matches!(event, Event::EligibilityChanged) {
            self.publish_eligibility();
        }
        self.brain.feed(event)
    }

    pub(super) fn request(&mut self, request: Option<Request>) -> Vec<Command> {
        match request {
            None => {
                self.requests_open = false;
                Vec::new()
            }
            Some(Request::Resign(reply)) => {
                self.resign_replies.push_back(reply);
                self.brain.feed(Event::ResignRequested)
            }
        }
    }

    pub(super) fn guard_deadline(&self) -> Option<tokio::time::Instant> {
        let guard = self.guard.as_ref()?;
        Some(tokio_instant(self.brain.clock.as_ref(), guard.deadline()))
    }
}
