#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

use std::time::Duration;

/// The most nanoseconds a Go `time.Duration` (an `int64`) holds: about 292 years.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Go's `time.ParseDuration` for durations that are not negative (`1m1s`, `1.5h`, `300ms`,
/// `0`, `+5s`); `None` for anything Go refuses, a negative duration or one that overflows
/// Go's `int64` nanoseconds.
///
/// The units are `ns`, `us`, `µs` (U+00B5 or U+03BC), `ms`, `s`, `m` and `h`. `-0` and `-0s`
/// are zero, as in Go.
pub fn parse(text: &str) -> Option<Duration> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return None;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole: u128 = if digits == 0 {
            0
        } else {
            rest[..digits]
                .parse::<u128>()
                .ok()
                .filter(|v| *v <= MAX_NANOS)?
        };
        rest = &rest[digits..];
        let (fraction, scale, fraction_digits) = match rest.strip_prefix('.') {
            Some(after) => {
                let (fraction, scale, fraction_digits) = leading_fraction(after);
                rest = &after[fraction_digits..];
                (fraction, scale, fraction_digits)
            }
            None => (0, 1.0, 0),
        };
        if digits == 0 && fraction_digits == 0 {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(at, _)| at);
        if unit_len == 0 {
            return None;
        }
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if whole > MAX_NANOS / unit {
            return None;
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // Go computes this part in floating point; so does this.
            value += (fraction as f64 * (unit as f64 / scale)) as u128;
            if value > MAX_NANOS {
                return None;
            }
        }
        total += value;
        if total > MAX_NANOS {
            return None;
        }
    }
    if negative && total > 0 {
        return None;
    }
    u64::try_from(total).ok().map(Duration::from_nanos)
}

/// Go's `leadingFraction`: the value of the digits that start `text` as far as an `int64`
/// holds them, `10` to the power of how many were taken, and how many digits there are
/// (those beyond the first overflow are consumed but ignored).
fn leading_fraction(text: &str) -> (u128, f64, usize) {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let mut fraction: u128 = 0;
    let mut scale = 1.0;
    for digit in text[..digits].bytes() {
        let next = fraction * 10 + u128::from(digit - b'0');
        if fraction > MAX_NANOS / 10 || next > MAX_NANOS + 1 {
            break;
        }
        fraction = next;
        scale *= 10.0;
    }
    (fraction, scale, digits)
}

/// Go's `Duration.String`: `0s`; `7ns`, `1.5µs` (U+00B5) or `300ms` below one second;
/// `27s`, `1m1s`, `1h0m0s`, `1h2m3.5s` from one second; the fraction without trailing zeros.
///
/// Durations longer than Go holds print with more hours, in the same form.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}\u{b5}s", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let seconds = format!("{}s", decimal(nanos % 60_000_000_000, 9));
    let minutes_total = nanos / 60_000_000_000;
    if minutes_total == 0 {
        return seconds;
    }
    let hours = minutes_total / 60;
    let minutes = minutes_total % 60;
    if hours == 0 {
        format!("{minutes}m{seconds}")
    } else {
        format!("{hours}h{minutes}m{seconds}")
    }
}

/// `value / 10^digits` in decimal, without trailing zeros in the fraction.
fn decimal(value: u128, digits: u32) -> String {
    let scale = 10u128.pow(digits);
    let whole = value / scale;
    let fraction = value % scale;
    if fraction == 0 {
        whole.to_string()
    } else {
        let text = format!("{fraction:0width$}", width = digits as usize);
        format!("{whole}.{}", text.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests;
