//! Durations on the command line (`300ms`, `2s`, `1m`, `1m30s`) and in output.
//!
//! Parsing and printing use `humantime`: small, dependency-free and widely used, it reads the
//! forms people type (`300ms`, `2s`, `1.5s`, `1m`, `1h 30m`), prints durations back in the
//! same form, and also formats the RFC 3339 timestamps of `watch`. A hand-written parser would
//! be as long as its tests; this one is maintained and already handles overflow and
//! fractions.

use std::time::{Duration, SystemTime};

use fdb_leader_election::MAX_DURATION;

/// Parses a duration for clap: a number and a unit (`ns`, `us`, `ms`, `s`, `m` or `min`, `h`,
/// `d`), possibly repeated (`1m30s`) or fractional (`1.5s`). A bare number is refused: the
/// unit must be explicit.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} has no unit: write for example {text}ms or {text}s"
        ));
    }
    let d = humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration ({e}); examples: 300ms, 2s, 1m"))?;
    if d > MAX_DURATION {
        return Err(format!("{text:?} is longer than the maximum of one year"));
    }
    Ok(d)
}

/// A duration as people write it, in one word that [`parse`] reads back, so that what
/// `config get` and the messages print can be given as a flag's value as printed: `10s`,
/// `600ms`, `1m30s`, rounded to the millisecond (to the microsecond below one millisecond): a
/// third of 2s shows as `667ms`, not `666ms666us666ns`.
pub(crate) fn show(d: Duration) -> String {
    let unit: u128 = if d >= Duration::from_millis(1) {
        1_000_000
    } else {
        1_000
    };
    let nanos = d.as_nanos();
    let rounded = nanos
        .saturating_add(unit / 2)
        .checked_div(unit)
        .unwrap_or(0)
        .saturating_mul(unit);
    let rounded = Duration::from_nanos(u64::try_from(rounded).unwrap_or(u64::MAX));
    humantime::format_duration(if rounded.is_zero() { d } else { rounded })
        .to_string()
        .split_whitespace()
        .collect()
}

/// A duration in milliseconds for JSON: an integer when exact, a fraction otherwise.
pub(crate) fn millis_json(d: Duration) -> serde_json::Value {
    if d.subsec_nanos() % 1_000_000 == 0 {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        serde_json::Value::from(ms)
    } else {
        serde_json::Value::from(d.as_secs_f64() * 1000.0)
    }
}

/// The wall-clock time now, RFC 3339 with milliseconds (UTC). Display only: no clock reading
/// is ever stored or compared.
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(parse("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_what_is_ambiguous_or_absurd() {
        let no_unit = parse("300");
        assert!(
            no_unit.as_ref().is_err_and(|e| e.contains("300ms")),
            "{no_unit:?}"
        );
        assert!(parse("").is_err());
        assert!(parse("fast").is_err());
        assert!(parse("-1s").is_err());
        assert!(parse("2 parsecs").is_err());
        assert!(parse("400d").is_err_and(|e| e.contains("one year")));
    }

    #[test]
    fn shows_durations_as_typed() {
        assert_eq!(show(Duration::from_millis(600)), "600ms");
        assert_eq!(show(Duration::from_secs(10)), "10s");
        assert_eq!(show(Duration::from_secs(90)), "1m30s");
        assert_eq!(show(Duration::from_secs(2) / 3), "667ms");
        // Issue 39: `config get` printed `reservation-timeout 1s 333ms`, two words.
        assert_eq!(show(Duration::from_nanos(1_500_400_000)), "1s500ms");
        for d in [90_000, 1_333, 4_500, 3_723_004, 86_400_001] {
            let d = Duration::from_millis(d);
            assert_eq!(parse(&show(d)), Ok(d), "{}", show(d));
        }
        assert_eq!(show(Duration::from_nanos(166_666)), "167us");
        assert_eq!(show(Duration::from_nanos(40)), "40ns");
        assert_eq!(show(Duration::ZERO), "0s");
        assert_eq!(
            millis_json(Duration::from_millis(600)),
            serde_json::json!(600)
        );
        assert_eq!(
            millis_json(Duration::from_micros(1500)),
            serde_json::json!(1.5)
        );
    }
}
