//! A multi-process FoundationDB cluster the chaos harness starts and hurts (DESIGN §11.4).
//!
//! It is started by the project's `scripts/fdb-local` (K `fdbserver` processes on loopback
//! ports, each its own zone and machine, `double` or `triple` redundancy, 3 or 5 coordinators)
//! and stopped by it; in between the harness kills processes (`SIGKILL`, chosen at random or
//! the one holding the transaction system's `master` role, found in `status json`), pauses
//! them (`SIGSTOP`, then `SIGCONT`), restarts them with the command line they were started
//! with (keeping `fdb-local`'s pid files right, so that `stop` stops them), forces recoveries
//! (`configure commit_proxies=N`, alternating, which recruits a new transaction system), and
//! takes coordinators away. Every process it started is stopped when the cluster is dropped.
//! After the stop, the processes' trace files tell the recoveries and their durations
//! ([`Cluster::recoveries`]).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// One `fdbserver` process of the cluster.
#[derive(Clone, Debug)]
pub struct FdbProcess {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its pid (a restarted process gets a new one).
    pub pid: Pid,
    /// The command line it was started with.
    argv: Vec<String>,
    /// Whether it is a coordinator.
    pub coordinator: bool,
    /// Whether it is running (not killed).
    pub alive: bool,
    /// Whether it is stopped (`SIGSTOP`).
    pub paused: bool,
}

/// A cluster started from `scripts/fdb-local`.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    fdb_local: PathBuf,
    fdbcli: PathBuf,
    /// The cluster file.
    pub cluster_file: PathBuf,
    /// Its processes, by port order.
    pub processes: Vec<FdbProcess>,
    /// The processes this harness restarted (its children, reaped after they die).
    restarted: BTreeMap<u16, Child>,
    recovery_toggle: bool,
}

/// One recovery of the transaction system, as the master's trace file logged it when it
/// reached `accepting_commits`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TracedRecovery {
    /// When it reached `accepting_commits`, in seconds since the epoch (`CLOCK_REALTIME`).
    pub at: f64,
    /// Its duration, from its start to `accepting_commits` (FoundationDB's
    /// `RecoveryDuration`): failure detection before it is not included.
    pub duration: f64,
}

/// The value of `name="..."` in one trace line.
fn attribute<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let pattern = format!(" {name}=\"");
    let start = line.find(&pattern)?.checked_add(pattern.len())?;
    let rest = line.get(start..)?;
    rest.get(..rest.find('"')?)
}

/// The recoveries in the text of trace files (`MasterRecoveryState` events with status
/// `accepting_commits`), each once (by master id and time).
pub fn parse_recoveries(text: &str) -> Vec<(String, TracedRecovery)> {
    text.lines()
        .filter(|l| {
            l.contains("Type=\"MasterRecoveryState\"")
                && attribute(l, "Status") == Some("accepting_commits")
        })
        .filter_map(|l| {
            Some((
                attribute(l, "ID")?.to_owned(),
                TracedRecovery {
                    at: attribute(l, "Time")?.parse().ok()?,
                    duration: attribute(l, "RecoveryDuration")?.parse().ok()?,
                },
            ))
        })
        .collect()
}

/// What `status json` says of the cluster, as the harness needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStatus {
    /// The roles of each process, by port.
    pub roles: BTreeMap<u16, Vec<String>>,
    /// The recovery generation: it grows with every recovery.
    pub generation: Option<u64>,
    /// Whether the database is available.
    pub available: bool,
}

impl ClusterStatus {
    /// Parses the output of `fdbcli --exec 'status json'`.
    pub fn parse(json: &str) -> Option<ClusterStatus> {
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let cluster = v.get("cluster")?;
        let mut roles = BTreeMap::new();
        for p in cluster.get("processes")?.as_object()?.values() {
            let address = p.get("address")?.as_str()?;
            let port: u16 = address.rsplit(':').next()?.parse().ok()?;
            let names: Vec<String> = p
                .get("roles")
                .and_then(|r| r.as_array())
                .map(|rs| {
                    rs.iter()
                        .filter_map(|r| r.get("role")?.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            roles.insert(port, names);
        }
        Some(ClusterStatus {
            roles,
            generation: cluster.get("generation").and_then(|g| g.as_u64()),
            available: cluster
                .get("database_available")
                .and_then(|a| a.as_bool())
                .unwrap_or(false),
        })
    }

    /// The port of the process with `role` (for example `master`), if any.
    pub fn holder_of(&self, role: &str) -> Option<u16> {
        self.roles
            .iter()
            .find(|(_, rs)| rs.iter().any(|r| r == role))
            .map(|(p, _)| *p)
    }
}

impl Cluster {
    /// Starts `processes` processes from the FoundationDB install `fdb_dir` in `dir` with
    /// `redundancy` (`double` or `triple`) and the `ssd` engine, using `fdb_local` (the path of
    /// `scripts/fdb-local`).
    pub fn start(
        fdb_local: &Path,
        fdb_dir: &Path,
        dir: &Path,
        processes: u32,
        redundancy: &str,
    ) -> io::Result<Cluster> {
        let out = Command::new(fdb_local)
            .arg("start")
            .arg("--fdb-dir")
            .arg(fdb_dir)
            .arg("--dir")
            .arg(dir)
            .args(["--processes", &processes.to_string()])
            .args([
                "--redundancy",
                redundancy,
                "--engine",
                "ssd",
                "--timeout",
                "120",
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "scripts/fdb-local start failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let cluster_file = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let coordinators = std::fs::read_to_string(&cluster_file)?;
        let mut procs = Vec::new();
        for entry in std::fs::read_dir(dir.join("pids"))? {
            let path = entry?.path();
            let Some(port) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u16>().ok())
            else {
                continue;
            };
            let pid: i32 = std::fs::read_to_string(&path)?
                .trim()
                .parse()
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
            let argv: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))?
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            procs.push(FdbProcess {
                port,
                pid: Pid::from_raw(pid),
                argv,
                coordinator: coordinators.contains(&format!("127.0.0.1:{port}")),
                alive: true,
                paused: false,
            });
        }
        procs.sort_by_key(|p| p.port);
        Ok(Cluster {
            dir: dir.to_owned(),
            fdb_local: fdb_local.to_owned(),
            fdbcli: fdb_dir.join("bin").join("fdbcli"),
            cluster_file,
            processes: procs,
            restarted: BTreeMap::new(),
            recovery_toggle: false,
        })
    }

    /// `fdbcli --exec command` on this cluster, bounded by `timeout` (not started).
    pub fn cli_command(&self, command: &str, timeout: Duration) -> Command {
        let mut cmd = Command::new(&self.fdbcli);
        cmd.arg("-C")
            .arg(&self.cluster_file)
            .args(["--timeout", &timeout.as_secs().max(1).to_string()])
            .args(["--exec", command])
            .stdin(Stdio::null());
        cmd
    }

    /// `fdbcli`, the program.
    pub fn fdbcli(&self) -> &Path {
        &self.fdbcli
    }

    /// The cluster's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `configure` command of the next forced recovery: the number of commit proxies, 1
    /// and 2 alternately, which recruits a new transaction system.
    pub fn next_recovery_command(&mut self) -> String {
        self.recovery_toggle = !self.recovery_toggle;
        let n = if self.recovery_toggle { 2 } else { 1 };
        format!("configure commit_proxies={n}")
    }

    fn cli(&self, command: &str, timeout: Duration) -> io::Result<String> {
        let out = self.cli_command(command, timeout).output()?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The cluster's roles, generation and availability (`status json`).
    pub fn status(&self) -> Option<ClusterStatus> {
        ClusterStatus::parse(&self.cli("status json", Duration::from_secs(5)).ok()?)
    }

    fn process_mut(&mut self, port: u16) -> io::Result<&mut FdbProcess> {
        self.processes
            .iter_mut()
            .find(|p| p.port == port)
            .ok_or_else(|| io::Error::other(format!("no fdbserver on port {port}")))
    }

    /// Kills the process on `port` with `SIGKILL`.
    pub fn kill(&mut self, port: u16) -> io::Result<()> {
        let p = self.process_mut(port)?;
        if p.alive {
            let _ = kill(p.pid, Signal::SIGCONT);
            kill(p.pid, Signal::SIGKILL).map_err(io::Error::from)?;
            p.alive = false;
            p.paused = false;
        }
        // A process this harness restarted is its child: reap it.
        if let Some(mut child) = self.restarted.remove(&port) {
            let _ = child.wait();
        }
        Ok(())
    }

    /// Stops (`SIGSTOP`) or resumes (`SIGCONT`) the process on `port`.
    pub fn pause(&mut self, port: u16, paused: bool) -> io::Result<()> {
        let p = self.process_mut(port)?;
        if p.alive && p.paused != paused {
            let signal = if paused {
                Signal::SIGSTOP
            } else {
                Signal::SIGCONT
            };
            kill(p.pid, signal).map_err(io::Error::from)?;
            p.paused = paused;
        }
        Ok(())
    }

    /// Starts the process on `port` again, with its command line, and records its pid in
    /// `fdb-local`'s pid file.
    pub fn restart(&mut self, port: u16) -> io::Result<()> {
        let dir = self.dir.clone();
        let p = self.process_mut(port)?;
        if p.alive {
            return Ok(());
        }
        let (program, args) = p
            .argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command line"))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("logs").join(format!("{port}.out")))?;
        let child = Command::new("setsid")
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let pid = i32::try_from(child.id()).map_err(io::Error::other)?;
        std::fs::write(
            dir.join("pids").join(format!("{port}.pid")),
            format!("{pid}\n"),
        )?;
        p.pid = Pid::from_raw(pid);
        p.alive = true;
        p.paused = false;
        self.restarted.insert(port, child);
        Ok(())
    }

    /// Forces a recovery: changes the number of commit proxies (1 and 2 alternately), which
    /// recruits a new transaction system.
    pub fn force_recovery(&mut self) -> io::Result<()> {
        let command = self.next_recovery_command();
        self.cli(&command, Duration::from_secs(20))?;
        Ok(())
    }

    /// The ports of the coordinators.
    pub fn coordinators(&self) -> Vec<u16> {
        self.processes
            .iter()
            .filter(|p| p.coordinator)
            .map(|p| p.port)
            .collect()
    }

    /// Stops every process it started (through `scripts/fdb-local stop`, by pid file), and
    /// removes the folder unless `keep` (then [`recoveries`](Self::recoveries) reads its
    /// trace files, flushed by the stop).
    pub fn stop(&mut self, keep: bool) {
        for p in &mut self.processes {
            if p.paused {
                let _ = kill(p.pid, Signal::SIGCONT);
            }
        }
        let mut cmd = Command::new(&self.fdb_local);
        cmd.arg("stop").arg("--dir").arg(&self.dir);
        if keep {
            cmd.arg("--keep");
        }
        let _ = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for (_, mut child) in std::mem::take(&mut self.restarted) {
            let _ = child.wait();
        }
        for p in &mut self.processes {
            p.alive = false;
        }
    }

    /// The recoveries the processes' trace files logged, in time order (read after
    /// [`stop`](Self::stop) with `keep`: a process flushes its trace file when it stops; one
    /// killed with `SIGKILL` may have lost its last events).
    pub fn recoveries(&self) -> Vec<TracedRecovery> {
        let mut seen = BTreeMap::new();
        let logs = std::fs::read_dir(self.dir.join("logs"))
            .into_iter()
            .flatten();
        for folder in logs.flatten() {
            let files = std::fs::read_dir(folder.path()).into_iter().flatten();
            for file in files.flatten() {
                let path = file.path();
                if path.extension().is_some_and(|e| e == "xml") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    for (id, r) in parse_recoveries(&text) {
                        seen.insert((id, r.at.to_bits()), r);
                    }
                }
            }
        }
        let mut out: Vec<TracedRecovery> = seen.into_values().collect();
        out.sort_by(|a, b| a.at.total_cmp(&b.at));
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.processes.iter().any(|p| p.alive) {
            self.stop(false);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn status_json_gives_roles_by_port_the_generation_and_availability() {
        let json = r#"{"cluster": {
            "generation": 7, "database_available": true,
            "processes": {
                "a": {"address": "127.0.0.1:4500", "roles": [{"role": "master"}, {"role": "log"}]},
                "b": {"address": "127.0.0.1:4501", "roles": [{"role": "storage"}]},
                "c": {"address": "127.0.0.1:4502"}
            }}}"#;
        let s = ClusterStatus::parse(json).unwrap();
        assert_eq!(s.generation, Some(7));
        assert!(s.available);
        assert_eq!(s.holder_of("master"), Some(4500));
        assert_eq!(s.holder_of("storage"), Some(4501));
        assert_eq!(s.holder_of("resolver"), None);
        assert_eq!(s.roles[&4502], Vec::<String>::new());
        assert!(ClusterStatus::parse("not json").is_none());
        assert!(ClusterStatus::parse("{}").is_none());
    }

    #[test]
    fn trace_files_give_each_recovery_once() {
        let text = r#"<Event Severity="10" Time="1795599417.187225" Type="MasterRecoveryState" ID="33" StatusCode="7" Status="recruiting_transaction_servers" />
<Event Severity="10" Time="1795599417.313843" Type="MasterRecoveryState" ID="33" StatusCode="11" Status="accepting_commits" StoreType="ssd-2" RecoveryDuration="0.0144022" Machine="127.0.0.1:41934" />
<Event Severity="10" Time="1795599417.313843" Type="MasterRecoveryDuration" ID="33" RecoveryDuration="0.0144022" />
<Event Severity="10" Time="1795599420.5" Type="MasterRecoveryState" ID="44" Status="accepting_commits" RecoveryDuration="1.5" />"#;
        let r = parse_recoveries(text);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, "33");
        assert!((r[0].1.duration - 0.0144022).abs() < 1e-9);
        assert!((r[1].1.at - 1795599420.5).abs() < 1e-6);
    }
}
