//! The processes `run` starts — the child and the begin/end commands — each in a process group
//! of its own, so that stopping one stops everything it started, and each under a watchdog
//! (see [`crate::watchdog`]) that kills that group if `fdb-leader` dies first.

mod census;

use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::pin::{Pin, pin};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep, sleep_until};

use crate::signals::{Signals, Stop};
use crate::watchdog::{self, Kept, Lease, Lifeline};
use census::{GROUP_POLL, group_running};

/// What to run, and with which environment.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) env: Vec<(&'static str, String)>,
}

impl Spec {
    /// `sh -c script`.
    pub(crate) fn shell(script: impl Into<OsString>, env: Vec<(&'static str, String)>) -> Self {
        Spec {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env,
        }
    }

    /// `command` as given, or joined with spaces and run by `sh -c` when `shell`.
    pub(crate) fn command(
        command: &[OsString],
        shell: bool,
        env: Vec<(&'static str, String)>,
    ) -> Option<Self> {
        if shell {
            let script = command.join(OsStr::new(" "));
            return Some(Spec::shell(script, env));
        }
        let (program, args) = command.split_first()?;
        Some(Spec {
            program: program.clone(),
            args: args.to_vec(),
            env,
        })
    }

    /// The command line, for logs.
    pub(crate) fn display(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How a stop ended.
#[derive(Debug)]
pub(crate) struct Stopped {
    /// The child's exit status.
    pub(crate) status: io::Result<ExitStatus>,
    /// A stop from the `signals` given to [`Proc::stop`] that arrived meanwhile (and made
    /// the stop skip the rest of the grace).
    pub(crate) signal: Option<Stop>,
}

/// A running process, leader of its own process group: the watchdog, and under it (in the same
/// group) the command.
#[derive(Debug)]
pub(crate) struct Proc {
    child: Child,
    /// The write end of the watchdog's lifeline (and the task that tells it the lease):
    /// dropping it (or dying) makes the watchdog kill the group.
    _lifeline: Kept,
    /// The process group (the child's pid); `None` once the group is known to be empty.
    group: Option<Pid>,
    /// The exit status, once the child has been reaped.
    status: Option<ExitStatus>,
    what: &'static str,
}

impl Proc {
    /// Starts `spec` under a watchdog, in a new process group, standard input from /dev/null (a
    /// process outside the terminal's foreground group that reads the terminal would be
    /// stopped), standard output and error inherited. The watchdog kills the group if this
    /// process dies; for the end-command, which runs after the leadership.
    pub(crate) fn spawn(spec: &Spec, what: &'static str) -> io::Result<Proc> {
        Self::launch(spec, what, true, None, false)
    }

    /// As [`spawn`](Self::spawn), with standard output discarded: for health checks, which
    /// run every few seconds (standard error is kept: it says why one fails).
    pub(crate) fn spawn_quiet(spec: &Spec, what: &'static str) -> io::Result<Proc> {
        Self::launch(spec, what, true, None, true)
    }

    /// As [`spawn`](Self::spawn), with a watchdog that also holds `lease`: it kills the group
    /// when the leadership's deadline passes without a renewal (see [`crate::watchdog`]); for
    /// the child and the begin-command.
    pub(crate) fn spawn_leased(spec: &Spec, what: &'static str, lease: &Lease) -> io::Result<Proc> {
        Self::launch(spec, what, true, Some(lease), false)
    }

    /// Starts `spec` under a watchdog, or (in this module's unit tests, whose executable is
    /// the test harness, not `fdb-leader`) directly.
    fn launch(
        spec: &Spec,
        what: &'static str,
        under_watchdog: bool,
        lease: Option<&Lease>,
        quiet: bool,
    ) -> io::Result<Proc> {
        let mut lifeline = Lifeline::new(&spec.program, &spec.args, lease)?;
        let read = lifeline
            .take_read()
            .ok_or_else(|| io::Error::other("the lifeline has no read end"))?;
        let mut command;
        if under_watchdog {
            command = Command::new(watchdog::self_exe());
            command
                .arg0("fdb-leader")
                .args(lifeline.args())
                // The watchdog reads its lifeline on standard input; the command gets
                // /dev/null.
                .stdin(Stdio::from(read));
        } else {
            command = Command::new(&spec.program);
            command.args(&spec.args).stdin(Stdio::null());
        }
        command
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            // If fdb-leader unwinds without stopping it, the child does not outlive the handle.
            .kill_on_drop(true);
        if quiet {
            command.stdout(Stdio::null());
        }
        let child = command.spawn()?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        if let Some(group) = group {
            tracing::debug!(what, group = group.as_raw(), command = %spec.display(), leased = lease.is_some(), "started");
        }
        Ok(Proc {
            child,
            _lifeline: lifeline.keep(),
            group,
            status: None,
            what,
        })
    }

    /// The process group (the watchdog's pid).
    pub(crate) fn pid(&self) -> Option<i32> {
        self.group.map(Pid::as_raw)
    }

    /// Waits for the child to exit. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.status = Some(status);
        Ok(status)
    }

    /// Sends `signal` to the whole process group; false if the group is empty.
    fn signal_group(&mut self, signal: Signal) -> bool {
        let Some(group) = self.group else {
            return false;
        };
        match killpg(group, signal) {
            Ok(()) => true,
            Err(Errno::ESRCH) => {
                self.group = None;
                false
            }
            Err(e) => {
                tracing::warn!(what = self.what, error = %e, signal = signal.as_str(), "could not signal the process group");
                true
            }
        }
    }

    /// Whether any process of the group is left running (once the child itself has been
    /// reaped). Zombies do not count: an orphan's zombie lingers until an init process that
    /// reaps (absent from some containers) collects it, but it runs nothing.
    async fn group_alive(&mut self) -> bool {
        let Some(group) = self.group else {
            return false;
        };
        match killpg(group, None) {
            Err(Errno::ESRCH) => {
                self.group = None;
                false
            }
            _ => group_running(group.as_raw()).await.unwrap_or(true),
        }
    }

    /// Stops the process and everything left in its group: SIGTERM to the group, then SIGKILL
    /// once `grace` has passed (at once on a signal from `signals`, if given). Returns once the
    /// child has exited and the group is empty (or SIGKILL was sent and the child reaped), with
    /// the child's exit status. Also used after the child exited by itself, to clear the
    /// processes it left behind in its group.
    pub(crate) async fn stop(&mut self, grace: Duration, signals: Option<&mut Signals>) -> Stopped {
        let mut received = None;
        let status = match signals {
            Some(signals) => {
                let slot = &mut received;
                self.stop_until(grace, async move {
                    let stop = signals.recv().await;
                    *slot = Some(stop);
                    stop.as_str()
                })
                .await
            }
            None => self.stop_until(grace, std::future::pending()).await,
        };
        Stopped {
            status,
            signal: received,
        }
    }

    /// As [`stop`](Self::stop), skipping the rest of the grace (SIGKILL at once) when
    /// `interrupt` resolves, with the reason to log. `run --shards` stops each shard's child on
    /// a task of its own, interrupted by a second signal (which its main task receives) or by
    /// the end of the shard's ownership.
    pub(crate) async fn stop_until(
        &mut self,
        grace: Duration,
        interrupt: impl Future<Output = &'static str>,
    ) -> io::Result<ExitStatus> {
        let interrupt = pin!(interrupt);
        self.stop_inner(grace, interrupt).await
    }

    async fn stop_inner<F: Future<Output = &'static str>>(
        &mut self,
        grace: Duration,
        mut interrupt: Pin<&mut F>,
    ) -> io::Result<ExitStatus> {
        let deadline = Instant::now().checked_add(grace);
        let sent_term = self.signal_group(Signal::SIGTERM);
        if sent_term {
            tracing::info!(what = self.what, group = self.pid().unwrap_or(0), grace = %crate::durations::show(grace), "sent SIGTERM to the process group");
        }
        let mut killed = false;
        loop {
            let settled = self.status.is_some() && !self.group_alive().await;
            if settled {
                break;
            }
            if killed && self.status.is_some() {
                // SIGKILL cannot be ignored; what is left is exiting (or a zombie).
                break;
            }
            let expire_at = if killed { None } else { deadline };
            let expire = async move {
                match expire_at {
                    Some(t) => sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                status = self.child.wait(), if self.status.is_none() => {
                    self.status = Some(status?);
                }
                () = sleep(GROUP_POLL), if self.status.is_some() => {}
                () = expire => {
                    tracing::warn!(what = self.what, group = self.pid().unwrap_or(0), "still running after the grace: sending SIGKILL");
                    self.kill();
                    killed = true;
                }
                reason = interrupt.as_mut(), if !killed => {
                    tracing::warn!(what = self.what, reason, "asked to stop while stopping: sending SIGKILL");
                    self.kill();
                    killed = true;
                }
            }
        }
        self.wait().await
    }

    /// Sends SIGKILL to the whole group (the child, and whatever it left behind), at once.
    pub(crate) fn kill_group(&mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        if !self.signal_group(Signal::SIGKILL) && self.status.is_none() {
            // The group is gone but the child is not reaped yet: kill it directly.
            let _ = self.child.start_kill();
        }
    }
}

/// How a process ended, in words: `exit code 3`, `killed by SIGSEGV`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(number)) => match Signal::try_from(number) {
            Ok(signal) => format!("killed by {}", signal.as_str()),
            Err(_) => format!("killed by signal {number}"),
        },
        (None, None) => "an unknown status".to_owned(),
    }
}

/// The exit code a shell would report: the code, or 128 + the signal.
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(signal.saturating_add(128)).unwrap_or(255),
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::census::running_groups;
    use super::*;

    fn spec(script: &str) -> Spec {
        Spec::shell(script, vec![("FDB_LEADER_BALLOT", "7".to_owned())])
    }

    #[tokio::test]
    async fn the_environment_reaches_the_child_and_codes_come_back() {
        let mut p =
            Proc::launch(&spec("exit $FDB_LEADER_BALLOT"), "test", false, None, false).unwrap();
        let status = p.wait().await.unwrap();
        assert_eq!(exit_code(status), 7);
        let stopped = p.stop(Duration::from_secs(1), None).await;
        assert_eq!(exit_code(stopped.status.unwrap()), 7);
        assert!(stopped.signal.is_none());
    }

    #[test]
    fn exits_read_as_words() {
        assert_eq!(describe_exit(ExitStatus::from_raw(3 << 8)), "exit code 3");
        assert_eq!(describe_exit(ExitStatus::from_raw(11)), "killed by SIGSEGV");
    }

    #[tokio::test]
    async fn stop_ends_the_whole_group_and_escalates_after_the_grace() {
        // A child that ignores SIGTERM, with a grandchild: both must be gone.
        let mut p = Proc::launch(
            &spec("trap '' TERM; sleep 30 & sleep 30; wait"),
            "test",
            false,
            None,
            false,
        )
        .unwrap();
        let group = p.group.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = std::time::Instant::now();
        let status = p
            .stop(Duration::from_millis(300), None)
            .await
            .status
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert_eq!(exit_code(status), 128 + 9);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            running_groups().map(|running| running.contains(&group.as_raw())),
            Some(false)
        );
    }

    #[tokio::test]
    async fn stop_returns_once_a_polite_group_has_exited() {
        let mut p = Proc::launch(
            &spec("sleep 30 & sleep 30; wait"),
            "test",
            false,
            None,
            false,
        )
        .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let start = std::time::Instant::now();
        let status = p.stop(Duration::from_secs(20), None).await.status.unwrap();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(exit_code(status), 128 + 15);
    }

    #[test]
    fn commands_split_or_go_through_the_shell() {
        let argv: Vec<OsString> = ["echo", "a b", "c"].map(OsString::from).to_vec();
        let direct = Spec::command(&argv, false, vec![]).unwrap();
        assert_eq!(direct.program, "echo");
        assert_eq!(direct.args, ["a b", "c"].map(OsString::from));
        let shell = Spec::command(&argv, true, vec![]).unwrap();
        assert_eq!(shell.display(), "sh -c echo a b c");
        assert!(Spec::command(&[], false, vec![]).is_none());
    }
}
