//! Found by an adversarial review: the read-only open of `status`/`watch` refuses
//! an empty store file as "another application's" (exit 3), while `run` and `config set`
//! take the same file as a new store of their own. SQLite creates the file empty and writes
//! the schema after, so `watch --wait`, which waits for "a run or config set to create it",
//! can find the file in that state and end with exit 3 instead of watching.

use std::fs;
use std::process::Command;
use std::time::Duration;

use crate::cli_support::{World, bin};

#[test]
fn watch_wait_keeps_waiting_through_a_store_being_created() {
    let world = World::new();
    let db = world.db();
    let mut watch = Command::new(bin());
    watch
        .arg("--sqlite")
        .arg(&db)
        .args(["watch", "--wait"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut watch = watch.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(watch.try_wait().unwrap().is_none(), "watch --wait waits");
    // The file appears, empty, as a creating `run` makes it; the schema follows a moment later
    // (here, slowly).
    fs::write(&db, b"").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = crate::cli_support::on_sqlite(&db, &["config", "set", "--lease", "2s"]);
    assert!(
        out.status.success(),
        "config set takes the empty file as its new store: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    let ended = watch.try_wait().unwrap();
    if ended.is_none() {
        crate::cli_support::signal(&watch, nix::sys::signal::Signal::SIGINT);
        let _ = crate::cli_support::wait_exit(&mut watch, Duration::from_secs(10));
    }
    let mut err = String::new();
    std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        ended.is_none(),
        "watch --wait ended ({ended:?}) on the store being created: {err}"
    );
}
