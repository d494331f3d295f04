//! Found by an adversarial review (review 2): `status` (a read-only command, which "creates
//! and changes nothing") on a service's store in a folder others may write (as /tmp) leaves
//! a `-wal` and a `-shm` owned by the operator who ran it, which the service may not write.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

mod cli_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

use cli_support::{World, assert_no_panic, bin, output_of};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn status_by_another_user_creates_nothing_beside_a_services_store() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("needs root to act as two users; skipped");
        return;
    }
    let world = World::new();
    let dir = world.path("shared");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    fs::set_permissions(world.path(""), fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.join("election.db");
    let exe = world.path("fdb-leader");
    if fs::hard_link(bin(), &exe).is_err() {
        fs::copy(bin(), &exe).unwrap();
    }
    let as_user = |uid: u32, args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("--sqlite").arg(&db).args(args).uid(uid).gid(uid);
        c
    };
    const SERVICE: u32 = 65534;
    const OPERATOR: u32 = 65533;
    // The service's store (it leaves it closed: no -wal, no -shm).
    let out = output_of(as_user(SERVICE, &["config", "set", "--lease", "2s"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let listing = || {
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(listing(), ["election.db"]);
    // An operator, who may read the store, asks for its status.
    let out = output_of(as_user(OPERATOR, &["status"]));
    assert_no_panic(&stderr(&out));
    assert!(out.status.success(), "status: {}", stderr(&out));
    let left = listing();
    // The service can still write its store.
    let out = output_of(as_user(SERVICE, &["config", "set", "--lease", "3s"]));
    assert!(
        left == ["election.db"] && out.status.success(),
        "files beside the store after the operator's status: {left:?}; the service's next \
         write: {:?} {}",
        out.status.code(),
        stderr(&out)
    );
}
