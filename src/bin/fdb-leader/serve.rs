//! `--metrics-listen`: one plain HTTP/1.1 listener serving `/metrics` (Prometheus text format,
//! from `metrics-exporter-prometheus`'s recorder) and `/healthz` (the runner's health check),
//! like Kubernetes' leader-election health adaptor; and, for load balancers (docs/design.md §13.7),
//! `/leader` (200 while this process leads and its leadership takes new work, judged at each
//! request against the belief's deadline: 503 while it drains for a handover or a stop),
//! `/follower` (200 while a registered, eligible non-leader), and with `--shards` `/shards`
//! (JSON) and `/shard/N` (200 while this member owns shard N and takes new work for it).
//!
//! The exporter's own listener serves metrics only (and brings hyper); two GET routes need
//! no more than this: one request per connection, bounded in size and time.
//!
//! The listener is bound before the store is opened (an address in use refuses the run with
//! nothing created), and served from a thread of its own, on a small runtime of its own: the
//! runner's runtime may block (a bug, a blocking call), and `/healthz` must still answer then,
//! reading the runner's health through its thread-safe handle. What it reports then is the
//! runner's own check: a leader that has not renewed within the lease is `503 wedged`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::exit::Failure;

/// The largest request head read.
const MAX_REQUEST: usize = 8 * 1024;
/// How long a client may take to send its request, and to read the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The health as `/healthz` reports it: `Ok(note)` is 200, `Err(problem)` 503.
pub(crate) type HealthCheck = Arc<dyn Fn() -> Result<String, String> + Send + Sync>;

/// A role's answer (`/leader`, `/follower`, `/shard/N`): `Ok(note)` is 200, `Err(why)` 503;
/// `None`: no such route for this run (404).
pub(crate) type RoleCheck = Arc<dyn Fn(Role) -> Option<Result<String, String>> + Send + Sync>;

/// What a request asks about this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// `/leader`.
    Leader,
    /// `/follower`.
    Follower,
    /// `/shards`: `Ok(json)`.
    Shards,
    /// `/shard/N`.
    Shard(u32),
}

/// What the listener answers from.
#[derive(Clone)]
pub(crate) struct Sources {
    pub(crate) health: HealthCheck,
    pub(crate) role: RoleCheck,
}

/// An HTTP answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
}

/// Routes one request head: a pure function of the request line and the sources.
pub(crate) fn route(
    head: &str,
    metrics: impl FnOnce() -> String,
    health: impl FnOnce() -> Result<String, String>,
    role: impl FnOnce(Role) -> Option<Result<String, String>>,
) -> Answer {
    let text = "text/plain; charset=utf-8";
    let answer = |status, body: String| Answer {
        status,
        content_type: text,
        body,
    };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return answer(405, "only GET and HEAD\n".to_owned());
    }
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => Answer {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: metrics(),
        },
        "/healthz" => match health() {
            Ok(note) => answer(200, format!("ok: {note}\n")),
            Err(problem) => answer(503, format!("unhealthy: {problem}\n")),
        },
        _ => {
            let asked = match path {
                "/leader" => Some(Role::Leader),
                "/follower" => Some(Role::Follower),
                "/shards" => Some(Role::Shards),
                _ => path
                    .strip_prefix("/shard/")
                    .and_then(|n| n.parse().ok())
                    .map(Role::Shard),
            };
            match asked.and_then(|asked| role(asked).map(|a| (asked, a))) {
                Some((Role::Shards, Ok(json))) => Answer {
                    status: 200,
                    content_type: "application/json",
                    body: format!("{json}\n"),
                },
                Some((_, Ok(note))) => answer(200, format!("{note}\n")),
                Some((_, Err(why))) => answer(503, format!("{why}\n")),
                None => answer(
                    404,
                    "not found: try /metrics, /healthz, /leader, /follower, and with --shards \
                     /shards or /shard/N\n"
                        .to_owned(),
                ),
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Bad Request",
    }
}

/// Binds `addr`, installs the Prometheus recorder (before any runner records a metric), and
/// serves from a thread of its own (named `fdb-leader-http`) with a runtime of its own. Needs
/// no runtime of the caller's: it is called before the store is opened.
pub(crate) fn start(addr: SocketAddr, sources: Sources) -> Result<(), Failure> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            Failure::usage(format!(
                "--metrics-listen {addr}: cannot listen there: {e} (nothing was created, no \
                 ballot used)"
            ))
        })?;
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| Failure::usage(format!("--metrics-listen: {e}")))?;
    // The runtime is built (and, on failure, dropped) in the thread: never inside the caller's
    // runtime, where dropping one panics.
    let (started, outcome) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("fdb-leader-http".to_owned())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build();
            let runtime = match runtime {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = started.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        let _ = started.send(Ok(()));
                        accept(listener, handle, sources).await;
                    }
                    Err(e) => {
                        let _ = started.send(Err(e));
                    }
                }
            });
        })
        .map_err(|e| Failure::command(format!("--metrics-listen: cannot start its thread: {e}")))?;
    match outcome.recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Err(Failure::command(format!(
                "--metrics-listen {addr}: cannot serve: {e}"
            )));
        }
        Err(_) => {
            return Err(Failure::command(format!(
                "--metrics-listen {addr}: its thread ended at once"
            )));
        }
    }
    tracing::info!(address = %addr, "serving /metrics, /healthz, /leader and /follower");
    Ok(())
}

async fn accept(listener: TcpListener, handle: PrometheusHandle, sources: Sources) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!(error = %e, "metrics listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (handle, sources) = (handle.clone(), sources.clone());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(IO_TIMEOUT, answer(stream, &handle, &sources)).await;
        });
    }
}

async fn answer(
    mut stream: TcpStream,
    handle: &PrometheusHandle,
    sources: &Sources,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let head = String::from_utf8_lossy(&head);
    let answer = route(
        &head,
        || {
            handle.run_upkeep();
            handle.render()
        },
        || (sources.health)(),
        |role| (sources.role)(role),
    );
    let body = if head.starts_with("HEAD ") {
        ""
    } else {
        answer.body.as_str()
    };
    let response = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        answer.status,
        reason(answer.status),
        answer.content_type,
        answer.body.len(),
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single run's roles: leading.
    fn leading(role: Role) -> Option<Result<String, String>> {
        match role {
            Role::Leader => Some(Ok("leader, ballot 3".to_owned())),
            Role::Follower => Some(Err("not a follower: this process leads".to_owned())),
            Role::Shards | Role::Shard(_) => None,
        }
    }

    #[test]
    fn routes_the_roles_for_load_balancers() {
        let metrics = String::new;
        let healthy = || Ok("leader".to_owned());
        let a = route("GET /leader HTTP/1.1\r\n", metrics, healthy, leading);
        assert_eq!((a.status, a.body.as_str()), (200, "leader, ballot 3\n"));
        let a = route("HEAD /follower HTTP/1.1\r\n", metrics, healthy, leading);
        assert_eq!(a.status, 503);
        // Not sharded: /shards and /shard/N are not routes of this run.
        for path in ["/shards", "/shard/0", "/shard/x", "/shard/"] {
            let a = route(&format!("GET {path} HTTP/1.1"), metrics, healthy, leading);
            assert_eq!(a.status, 404, "{path}");
        }
        let sharded = |role: Role| match role {
            Role::Shards => Some(Ok(r#"{"owned":[1]}"#.to_owned())),
            Role::Shard(1) => Some(Ok("owner of shard 1".to_owned())),
            Role::Shard(n) => Some(Err(format!("not the owner of shard {n}"))),
            _ => None,
        };
        let a = route("GET /shards HTTP/1.1", metrics, healthy, sharded);
        assert_eq!(
            (a.status, a.content_type, a.body.as_str()),
            (200, "application/json", "{\"owned\":[1]}\n")
        );
        assert_eq!(
            route("GET /shard/1 HTTP/1.1", metrics, healthy, sharded).status,
            200
        );
        let a = route("GET /shard/2?x HTTP/1.1", metrics, healthy, sharded);
        assert_eq!(
            (a.status, a.body.as_str()),
            (503, "not the owner of shard 2\n")
        );
    }

    #[test]
    fn routes_metrics_health_and_the_rest() {
        let metrics = || "fdb_leader_is_leader 1\n".to_owned();
        let healthy = || Ok("leader".to_owned());
        let wedged = || Err("wedged".to_owned());
        let a = route(
            "GET /metrics HTTP/1.1\r\nHost: x\r\n",
            metrics,
            healthy,
            leading,
        );
        assert_eq!(
            (a.status, a.body.as_str()),
            (200, "fdb_leader_is_leader 1\n")
        );
        assert!(a.content_type.contains("version=0.0.4"));
        let a = route(
            "GET /healthz?verbose HTTP/1.1\r\n",
            metrics,
            healthy,
            leading,
        );
        assert_eq!((a.status, a.body.as_str()), (200, "ok: leader\n"));
        let a = route("GET /healthz HTTP/1.1\r\n", metrics, wedged, leading);
        assert_eq!((a.status, a.body.as_str()), (503, "unhealthy: wedged\n"));
        assert_eq!(
            route("GET / HTTP/1.1", metrics, healthy, leading).status,
            404
        );
        assert_eq!(
            route("POST /metrics HTTP/1.1", metrics, healthy, leading).status,
            405
        );
        assert_eq!(route("", metrics, healthy, leading).status, 405);
    }
}
