//! Standard output: status and watch lines. A closed pipe (`fdb-leader watch | head -1`) ends
//! the command quietly instead of panicking as `println!` would.

use std::io::{self, Write};

use crate::exit::Failure;

/// Writes `text` and a newline to standard output, and flushes.
pub(crate) fn line(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Failure::quiet()),
        Err(e) => Err(Failure::command(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}

/// A switch's word: `on` or `off`.
pub(crate) fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}
