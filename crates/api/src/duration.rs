//! Go `time.Duration` strings, as Flux's API uses them (`10m`, `1h30m`, `1.5s`, `250ms`).

use std::time::Duration;

/// A string that is not a Go duration of the form the CRD accepts.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {0:?}: expected a Go duration such as 30s, 5m or 1h30m")]
pub struct InvalidDuration(pub String);

/// Parses a Go duration with the units the CRD pattern allows (`h`, `m`, `s`, `ms`).
///
/// The text must be one or more numbers (digits with at most one `.`), each followed by one
/// of those units, without a sign; its value is what Go's `time.ParseDuration` gives, so a
/// duration beyond Go's (about 292 years) is refused as Go refuses it.
pub fn parse(text: &str) -> Result<Duration, InvalidDuration> {
    let invalid = || InvalidDuration(text.to_string());
    if !has_crd_form(text) {
        return Err(invalid());
    }
    goduration::parse(text).ok_or_else(invalid)
}

/// Whether `text` is a sequence of a number (digits and dots) and a unit among `h`, `m`, `s`
/// and `ms`: what the CRD pattern allows, leaving the numbers themselves to Go's rules.
fn has_crd_form(text: &str) -> bool {
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return false;
        }
        rest = &rest[number_len..];
        rest = match ["ms", "h", "m", "s"]
            .iter()
            .find_map(|unit| rest.strip_prefix(unit))
        {
            Some(after) => after,
            None => return false,
        };
    }
    true
}

/// Formats a duration the way Go's `Duration.String` does: `5m0s`, `1h0m0s`, `1.5s`, `250ms`.
pub fn format(duration: Duration) -> String {
    goduration::format(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1m30s500ms"), Ok(Duration::from_millis(90_500)));
    }

    #[test]
    fn rejects_what_the_crd_pattern_rejects() {
        for bad in ["", "10", "m", "1d", "-1s", "1.s.5", "1 m"] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn rejects_go_durations_outside_the_crd_pattern() {
        for bad in [
            "0",
            "+1s",
            "-0s",
            "1ns",
            "1us",
            "1\u{b5}s",
            "1\u{3bc}s",
            "1h1d",
            "1.2.3s",
            ".",
            ".s",
            "1s ",
            "3000000h",
        ] {
            assert_eq!(parse(bad), Err(InvalidDuration(bad.to_string())), "{bad:?}");
        }
    }

    #[test]
    fn parses_numbers_as_go_does() {
        assert_eq!(parse("1.s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0.1s0.2s"), Ok(Duration::from_millis(300)));
        assert_eq!(
            parse("0.3333333333333333333h"),
            Ok(Duration::from_secs(1200))
        );
        assert_eq!(
            parse("2562047h47m16.854775807s"),
            Ok(Duration::from_nanos(i64::MAX as u64))
        );
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format(Duration::from_secs(300)), "5m0s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::from_secs(30)), "30s");
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_nanos(1500)), "1.5\u{b5}s");
        assert_eq!(format(Duration::from_secs(5430)), "1h30m30s");
    }
}
