//! Progress of long runs of `sim` and `chaos`: a bar on a terminal (`indicatif`), plain lines
//! (at most one every ten seconds) in CI or when standard error is not a terminal.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often plain lines are printed.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// A progress display, on standard error.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    unit: String,
    total: u64,
    last_plain: Instant,
}

/// Whether to draw a bar: standard error is a terminal and `CI` is unset.
pub fn interactive() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
}

impl Progress {
    /// A display for `total` units of work (`seeds`, `s`), a bar if `bar`.
    pub fn new(label: &str, total: u64, unit: &str, bar: bool) -> Self {
        let bar = bar.then(|| {
            let b = ProgressBar::new(total);
            let template = format!(
                "{label} [{{elapsed_precise}}] {{bar:40.cyan/blue}} {{pos}}/{{len}} {unit} {{msg}}"
            );
            if let Ok(style) = ProgressStyle::with_template(&template) {
                b.set_style(style);
            }
            b
        });
        Progress {
            bar,
            label: label.to_owned(),
            unit: unit.to_owned(),
            total,
            last_plain: Instant::now(),
        }
    }

    /// Reports `pos` units done, with a message.
    pub fn update(&mut self, pos: u64, message: &str) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(pos);
                bar.set_message(message.to_owned());
            }
            None => {
                if self.last_plain.elapsed() >= PLAIN_EVERY {
                    self.last_plain = Instant::now();
                    eprintln!(
                        "{}: {pos}/{} {} {message}",
                        self.label, self.total, self.unit
                    );
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_progress_is_quiet_between_lines() {
        let mut p = Progress::new("test", 10, "s", false);
        p.update(1, "x");
        p.update(2, "y");
        p.finish();
        assert!(p.bar.is_none());
    }
}
