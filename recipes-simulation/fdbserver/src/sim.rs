//! The simulator, as the workload sees it: simulated time, delays and deterministic
//! randomness, all from the `WorkloadContext` fdbserver hands each tester.
//!
//! Everything runs on fdbserver's one thread, in simulated time: a future is polled only when
//! a FoundationDB future (a read, a commit, a watch, a delay) resolves. So no tokio timer, no
//! wall clock and no OS randomness appear here. The library reads time through its `Clock`
//! trait, which must be `Send + Sync`; the context is neither, so it is kept in a thread-local
//! (fdbserver's thread) and the clocks read the simulated time from there, at the very moment
//! the library asks (a clock that returned a time cached before an await would date a read
//! too early, and a follower would start timing a lease before it saw it).

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use fdb_leader_election::{Clock, LocalInstant};
use foundationdb_simulation::{Severity, WorkloadContext};

thread_local! {
    /// The context whose `now()` every clock reads (the simulated time is one for all
    /// testers of the process).
    static CONTEXT: RefCell<Option<Rc<WorkloadContext>>> = const { RefCell::new(None) };
}

/// A tester's handle on the simulator.
#[derive(Clone)]
pub(crate) struct Sim {
    ctx: Rc<WorkloadContext>,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("client", &self.ctx.client_id())
            .finish()
    }
}

impl Sim {
    /// Takes the tester's context, and makes it the source of every clock's time if none is
    /// yet.
    pub(crate) fn new(ctx: WorkloadContext) -> Self {
        let ctx = Rc::new(ctx);
        CONTEXT.with_borrow_mut(|c| {
            if c.is_none() {
                *c = Some(Rc::clone(&ctx));
            }
        });
        Sim { ctx }
    }

    /// The context, for options and metrics.
    pub(crate) fn context(&self) -> &WorkloadContext {
        &self.ctx
    }

    /// This tester's number.
    pub(crate) fn client(&self) -> u32 {
        u32::try_from(self.ctx.client_id()).unwrap_or(0)
    }

    /// How many testers run the workload.
    pub(crate) fn clients(&self) -> u32 {
        u32::try_from(self.ctx.client_count()).unwrap_or(1).max(1)
    }

    /// The simulated time, in seconds.
    pub(crate) fn now(&self) -> f64 {
        self.ctx.now()
    }

    /// A uniform draw in `0..n` (0 when `n` is 0), from the simulator's generator.
    pub(crate) fn below(&self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let wide = (u64::from(self.ctx.rnd()) << 32) | u64::from(self.ctx.rnd());
        wide % n
    }

    /// A uniform draw in `[lo, hi)` seconds.
    pub(crate) fn between(&self, lo: f64, hi: f64) -> f64 {
        let unit = f64::from(self.ctx.rnd()) / f64::from(u32::MAX);
        lo + (hi - lo) * unit
    }

    /// Whether an event of probability `p` happens.
    pub(crate) fn chance(&self, p: f64) -> bool {
        f64::from(self.ctx.rnd()) < p * f64::from(u32::MAX)
    }

    /// 64 random bits (candidate nonces, machine seeds).
    pub(crate) fn bits(&self) -> u64 {
        (u64::from(self.ctx.rnd()) << 32) | u64::from(self.ctx.rnd())
    }

    /// Sleeps `seconds` of simulated time (at least a microsecond, so that the loop always
    /// yields to the simulator).
    pub(crate) async fn sleep(&self, seconds: f64) {
        let d = Duration::from_secs_f64(seconds.max(1e-6));
        // A delay fails only when the simulator is shutting the tester down: nothing to do.
        let _ = self.ctx.delay(d).await;
    }

    /// A delay future, to race against others.
    pub(crate) fn delay(
        &self,
        seconds: f64,
    ) -> impl std::future::Future<Output = foundationdb::FdbResult<()>> + use<> {
        self.ctx
            .delay(Duration::from_secs_f64(seconds.clamp(1e-6, 1e6)))
    }

    /// Adds an event to the trace files.
    pub(crate) fn trace(&self, severity: Severity, name: &str, details: &[(String, String)]) {
        // A NUL byte would make the binding panic (foundationdb-simulation 0.3.0).
        let clean = |s: &str| s.replace('\0', "?");
        let details: Vec<(String, String)> =
            details.iter().map(|(k, v)| (clean(k), clean(v))).collect();
        self.ctx.trace(severity, clean(name), &details);
    }
}

/// The simulated time in seconds, from the process's context (0 before any).
fn sim_now() -> f64 {
    CONTEXT.with_borrow(|c| c.as_ref().map_or(0.0, |c| c.now()))
}

/// A process's monotonic clock in the simulated world: `offset + elapsed × (1 + rate)`, with
/// `elapsed` the simulated time since `origin`, and a rate error drawn within the bound the
/// election's configuration states (or beyond, for the plant `clock-beyond-rho`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SimClock {
    origin: f64,
    offset: f64,
    rate: f64,
}

impl SimClock {
    /// A clock started now, reading `offset` seconds, running `rate_ppm` fast (negative: slow).
    pub(crate) fn new(offset: f64, rate_ppm: i64) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let rate = rate_ppm as f64 / 1e6;
        SimClock {
            origin: sim_now(),
            offset,
            rate,
        }
    }

    /// The local reading (seconds) at simulated time `t`.
    fn local_at(&self, t: f64) -> f64 {
        self.offset + (t - self.origin).max(0.0) * (1.0 + self.rate)
    }

    /// The simulated time at which this clock reads `local`.
    pub(crate) fn true_at(&self, local: LocalInstant) -> f64 {
        self.origin + (local.since_origin().as_secs_f64() - self.offset) / (1.0 + self.rate)
    }

    /// How long, in simulated seconds, until this clock reads `local` (0 if it does).
    pub(crate) fn until(&self, local: LocalInstant) -> f64 {
        (self.true_at(local) - sim_now()).max(0.0)
    }
}

impl Clock for SimClock {
    fn now(&self) -> LocalInstant {
        LocalInstant::from_origin(Duration::from_secs_f64(self.local_at(sim_now()).max(0.0)))
    }
}
