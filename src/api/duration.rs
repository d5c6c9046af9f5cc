//! Go `time.Duration` strings, as Flux's API uses them (`10m`, `1h30m`, `1.5s`, `250ms`).

use std::time::Duration;

/// A string that is not a Go duration of the form the CRD accepts.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {0:?}: expected a Go duration such as 30s, 5m or 1h30m")]
pub struct InvalidDuration(pub String);

/// Parses a Go duration with the units the CRD pattern allows (`h`, `m`, `s`, `ms`).
pub fn parse(text: &str) -> Result<Duration, InvalidDuration> {
    let invalid = || InvalidDuration(text.to_string());
    if text.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        if number_len == 0 {
            return Err(invalid());
        }
        let value: f64 = rest[..number_len].parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let (unit_seconds, unit_len) = if rest.starts_with("ms") {
            (0.001, 2)
        } else if rest.starts_with('h') {
            (3600.0, 1)
        } else if rest.starts_with('m') {
            (60.0, 1)
        } else if rest.starts_with('s') {
            (1.0, 1)
        } else {
            return Err(invalid());
        };
        total += value * unit_seconds;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > u64::MAX as f64 / 2.0 {
        return Err(invalid());
    }
    Ok(Duration::from_secs_f64(total))
}

/// Formats a duration the way Go's `Duration.String` does: `5m0s`, `1h0m0s`, `1.5s`, `250ms`.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        let (value, unit) = if nanos < 1_000 {
            return format!("{nanos}ns");
        } else if nanos < 1_000_000 {
            (nanos as f64 / 1e3, "µs")
        } else {
            (nanos as f64 / 1e6, "ms")
        };
        return format!("{}{unit}", trim_float(value));
    }
    let total_seconds = duration.as_secs();
    let hours = total_seconds / 3600;
    let minutes = (total_seconds % 3600) / 60;
    let seconds = (total_seconds % 60) as f64 + f64::from(duration.subsec_nanos()) / 1e9;
    let seconds = trim_float(seconds);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

fn trim_float(value: f64) -> String {
    let text = format!("{value:.9}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
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
    fn formats_like_go() {
        assert_eq!(format(Duration::from_secs(300)), "5m0s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::from_secs(30)), "30s");
        assert_eq!(format(Duration::ZERO), "0s");
    }
}
