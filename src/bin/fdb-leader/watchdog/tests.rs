//! The watchdog's unit tests: its arguments, notes, the lease it holds and its lifeline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use nix::fcntl::OFlag;

use super::lifeline::write_note;
use super::*;

const MS: u64 = 1_000_000;

#[test]
fn the_command_follows_the_dashes() {
    let args = watchdog_args(OsStr::new("sh"), &["-c".into(), "echo --".into()], None);
    assert_eq!(args[0], WATCHDOG);
    let (program, rest) = command_after_dashes(&args[1..]).unwrap_or((&args[0], &[]));
    assert_eq!(program, "sh");
    assert_eq!(rest, ["-c", "echo --"].map(OsString::from));
    assert!(command_after_dashes(&["x".into()]).is_none());
    assert!(command_after_dashes(&["--".into()]).is_none());
    assert_eq!(watchdog_options(&args[1..]), Ok(None));
}

#[test]
fn the_first_note_rides_on_the_command_line() {
    let note = Note {
        sent: 5,
        deadline: 900,
    };
    let args = watchdog_args(OsStr::new("sleep"), &["1".into()], Some(note));
    assert_eq!(watchdog_options(&args[1..]), Ok(Some(note)));
    let (program, rest) = command_after_dashes(&args[1..]).unwrap();
    assert_eq!(
        (program.as_os_str(), rest),
        (OsStr::new("sleep"), &["1".into()][..])
    );
    let bad: Vec<OsString> = ["--lease", "9", "x", "--", "sh"]
        .map(OsString::from)
        .to_vec();
    assert_eq!(watchdog_options(&bad), Err(()));
    let odd: Vec<OsString> = ["--other", "--", "sh"].map(OsString::from).to_vec();
    assert_eq!(watchdog_options(&odd), Err(()));
}

#[test]
fn other_arguments_are_not_hidden_modes() {
    let argv: Vec<OsString> = ["fdb-leader", "status"].map(OsString::from).to_vec();
    assert!(hidden_mode(&argv).is_none());
    assert!(hidden_mode(&argv[..1]).is_none());
}

#[test]
fn notes_read_back_and_garbage_is_refused() {
    let note = Note {
        sent: 12,
        deadline: 34,
    };
    let line = note.line();
    assert_eq!(line, "12 34\n");
    assert_eq!(Note::parse(line.trim_end().as_bytes()), Some(note));
    assert_eq!(Note::parse(b"34 12"), None, "a deadline before the send");
    assert_eq!(Note::parse(b"12"), None);
    assert_eq!(Note::parse(b"-1 3"), None);
    assert_eq!(Note::parse(b"1 2 3"), None);
}

#[test]
fn the_same_clock_gives_the_exact_deadline_plus_the_fastest_delivery() {
    let mut held = Held::default();
    assert_eq!(held.remaining(0), None, "unarmed");
    // Sent at 100 ms, deadline 1 s, received 3 ms later (a slow exec).
    held.hold(
        Note {
            sent: 100 * MS,
            deadline: 1000 * MS,
        },
        103 * MS,
    );
    assert_eq!(held.remaining(500 * MS), Some(Duration::from_millis(503)));
    // A note delayed by 200 ms (the supervisor stopped between its clock read and the
    // write) is converted with the best offset so far: still its own deadline + 3 ms.
    held.hold(
        Note {
            sent: 300 * MS,
            deadline: 1200 * MS,
        },
        500 * MS,
    );
    assert_eq!(held.remaining(1200 * MS), Some(Duration::from_millis(3)));
    // A fast note (20 µs) improves the offset for every later deadline.
    held.hold(
        Note {
            sent: 600 * MS,
            deadline: 1400 * MS,
        },
        600 * MS + 20_000,
    );
    assert_eq!(held.remaining(1400 * MS), Some(Duration::from_micros(20)));
    // A deadline moved back (a shorter lease) is obeyed: the latest note wins.
    held.hold(
        Note {
            sent: 700 * MS,
            deadline: 800 * MS,
        },
        701 * MS,
    );
    assert_eq!(held.remaining(800 * MS), Some(Duration::from_micros(20)));
    assert_eq!(held.remaining(900 * MS), Some(Duration::ZERO));
}

#[test]
fn offset_clocks_never_kill_before_the_supervisors_deadline() {
    // Two fake clocks at one rate with a constant offset, either way, and random delivery
    // delays: the watchdog's deadline (on its clock) is never before the supervisor's
    // deadline expressed on the watchdog's clock, and is late by the fastest delivery.
    for offset in [-5_000 * MS as i128, -7, 0, 3, 40_000 * MS as i128] {
        let mut held = Held::default();
        let mut fastest = u64::MAX;
        for (i, delay) in [4 * MS, 90_000, 12 * MS, 30_000, 2 * MS]
            .into_iter()
            .enumerate()
        {
            let sent = 10_000 * MS + (i as u64) * 250 * MS;
            let deadline = sent + 900 * MS;
            let received = i128::from(sent + delay) + offset;
            held.hold(Note { sent, deadline }, u64::try_from(received).unwrap());
            fastest = fastest.min(delay);
            let true_deadline = i128::from(deadline) + offset;
            assert_eq!(held.deadline, Some(true_deadline + i128::from(fastest)));
        }
    }
}

fn pipe() -> (File, File) {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    (File::from(r), File::from(w))
}

#[test]
fn the_lifeline_kills_at_end_of_file_at_the_deadline_and_on_garbage() {
    // End-of-file, unarmed.
    let (r, w) = pipe();
    drop(w);
    assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Closed);
    // A deadline 50 ms ahead, renewed twice, then left to pass.
    let (r, w) = pipe();
    let start = std::time::Instant::now();
    let writer = std::thread::spawn(move || {
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(30));
            let note = Note::now(Duration::from_millis(50)).unwrap();
            write_note(&w, note).unwrap();
        }
        std::thread::sleep(Duration::from_secs(2));
        drop(w);
    });
    let mut held = Held::default();
    held.hold(
        Note::now(Duration::from_millis(50)).unwrap(),
        monotonic_ns().unwrap(),
    );
    assert_eq!(hold_lease(&r, held, monotonic_ns), Why::Deadline);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(110) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    writer.join().unwrap();
    // A deadline moved back to the past kills at once.
    let (r, w) = pipe();
    let mut held = Held::default();
    held.hold(
        Note::now(Duration::from_secs(60)).unwrap(),
        monotonic_ns().unwrap(),
    );
    write_note(&w, Note::now(Duration::ZERO).unwrap()).unwrap();
    assert_eq!(hold_lease(&r, held, monotonic_ns), Why::Deadline);
    // Garbage.
    let (r, w) = pipe();
    (&w).write_all(b"hello world\n").unwrap();
    assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Garbled);
    let (r, w) = pipe();
    (&w).write_all(&[b'7'; 100]).unwrap();
    assert_eq!(hold_lease(&r, Held::default(), monotonic_ns), Why::Garbled);
}
