//! Which process groups still run something, from one scan of `/proc` shared by every stop.

use std::collections::BTreeSet;
use std::time::Duration;

/// How often a stop checks whether the process group is empty.
pub(super) const GROUP_POLL: Duration = Duration::from_millis(20);

/// Whether a process of group `pgid` is running (not a zombie); `None` where `/proc` cannot
/// be read. Answered from one scan of `/proc` shared by every caller (the stops of every
/// child, `run --shards` stopping hundreds at once): a scan reads every process's `stat`, so
/// one each would cost O(groups × processes) per poll, on the runtime's thread; this is one
/// per [`GROUP_POLL`], off it.
///
/// A scan taken before the call is as good as a new one: a group whose members are all gone
/// or zombies gains none (only a running member could fork one), so a scan that found none
/// running stays true, and one that found some only makes the caller poll again.
pub(super) async fn group_running(pgid: i32) -> Option<bool> {
    static CENSUS: tokio::sync::Mutex<Option<Census>> = tokio::sync::Mutex::const_new(None);
    // Callers queue here while one scans; each then answers from that scan.
    let mut census = CENSUS.lock().await;
    let stale = census.as_ref().is_none_or(|c| c.at.elapsed() >= GROUP_POLL);
    if stale {
        let running = tokio::task::spawn_blocking(running_groups)
            .await
            .ok()
            .flatten();
        *census = Some(Census {
            at: std::time::Instant::now(),
            running,
        });
    }
    census
        .as_ref()
        .and_then(|c| c.running.as_ref())
        .map(|running| running.contains(&pgid))
}

/// One scan of `/proc`: when it ended, and the process groups with a running member (`None`:
/// `/proc` could not be read).
struct Census {
    at: std::time::Instant,
    running: Option<BTreeSet<i32>>,
}

/// The process groups that have a running (not zombie) member, from `/proc`; `None` where
/// `/proc` cannot be read.
pub(super) fn running_groups() -> Option<BTreeSet<i32>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut running = BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // The process may have gone since the listing: skip it.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, pgrp)) = parse_stat(&stat) {
            if state != 'Z' && state != 'X' {
                running.insert(pgrp);
            }
        }
    }
    Some(running)
}

/// The state and process group in a `/proc/PID/stat` line: `pid (comm) state ppid pgrp …`
/// (the command name may hold spaces and parentheses: fields start after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn proc_stat_lines_parse() {
        assert_eq!(parse_stat("42 (sh) S 1 42 42 0"), Some(('S', 42)));
        assert_eq!(parse_stat("43 (a (b) c) Z 42 40 40 0"), Some(('Z', 40)));
        assert_eq!(parse_stat("garbage"), None);
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (_, pgrp) = parse_stat(&me).unwrap();
        assert_eq!(pgrp, nix::unistd::getpgrp().as_raw());
    }
}
