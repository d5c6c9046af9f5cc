//! The text conversions sops' Go code applies to values: `strconv` parsing of decrypted
//! plaintext, and the bytes each type contributes to the MAC.

use goyaml::GoTime;

/// Go's `strconv.Atoi`: an optional sign and decimal digits, within `i64`.
pub fn parse_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Go's `strconv.ParseFloat(s, 64)` for the decimal forms and `inf`/`infinity`/`nan`.
pub fn parse_float(text: &str) -> Option<f64> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let special = ["inf", "infinity", "nan"]
        .iter()
        .any(|w| body.eq_ignore_ascii_case(w));
    let decimal = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if special || decimal {
        text.parse().ok()
    } else {
        None
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`: the shortest digits that read back, no exponent.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{f}")
    }
}

/// Reads the timestamp forms go-yaml v3 and RFC 3339 accept: `2006-1-2`, `2006-1-2 15:4:5`,
/// `2006-1-2T15:4:5.999999999Z07:00` (also with a lowercase `t`).
fn parse_time(text: &str) -> Option<GoTime> {
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    let mut ymd = date.split('-');
    let year = fixed_digits(ymd.next()?, 4, 4)?;
    let month = fixed_digits(ymd.next()?, 1, 2)?;
    let day = fixed_digits(ymd.next()?, 1, 2)?;
    if ymd.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = GoTime::midnight_utc(year, month, day);
    let Some(time) = time else { return Some(t) };
    let (clock, zone) = match time.find(['Z', '+', '-']) {
        Some(i) => (&time[..i], Some(&time[i..])),
        None => (time, None),
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let mut parts = hms.split(':');
    t.hour = fixed_digits(parts.next()?, 1, 2)?;
    t.minute = fixed_digits(parts.next()?, 1, 2)?;
    t.second = fixed_digits(parts.next()?, 1, 2)?;
    if parts.next().is_some() || t.hour > 23 || t.minute > 59 || t.second > 59 {
        return None;
    }
    if let Some(f) = fraction {
        if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.nanos = format!("{f:0<9}").parse().ok()?;
    }
    t.offset_minutes = match zone {
        None | Some("Z") => 0,
        Some(z) => {
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (h, m) = z[1..].split_once(':')?;
            let (h, m) = (fixed_digits(h, 2, 2)?, fixed_digits(m, 2, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 60 + m) as i32
        }
    };
    Some(t)
}

fn fixed_digits(s: &str, min: usize, max: usize) -> Option<u32> {
    if s.len() < min || s.len() > max || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Go's `time.Time.MarshalText` of a parsed timestamp (RFC 3339 with nanoseconds, trailing
/// zeros trimmed, `Z` for UTC): the bytes a `time` value adds to the MAC.
pub fn time_marshal_text(text: &str) -> Option<String> {
    parse_time(text)?.rfc3339_nano()
}

/// `time.Parse(time.RFC3339, s).Format(time.RFC3339)`: how sops authenticates the MAC with
/// the file's `lastmodified`.
pub fn time_rfc3339(text: &str) -> Option<String> {
    parse_time(text)?.rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_follow_atoi() {
        assert_eq!(parse_int("42"), Some(42));
        assert_eq!(parse_int("-7"), Some(-7));
        assert_eq!(parse_int("+7"), Some(7));
        for bad in [
            "",
            "-",
            "1_000",
            "0x1F",
            "1.0",
            " 1",
            "99999999999999999999",
        ] {
            assert_eq!(parse_int(bad), None, "{bad}");
        }
    }

    #[test]
    fn floats_and_bools_follow_strconv() {
        assert_eq!(parse_float("1.5e3"), Some(1500.0));
        assert_eq!(parse_float("-Inf"), Some(f64::NEG_INFINITY));
        assert!(parse_float("NaN").is_some_and(f64::is_nan));
        assert_eq!(parse_float("1,5"), None);
        assert_eq!(parse_bool("True"), Some(true));
        assert_eq!(parse_bool("F"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn floats_format_like_go_f_minus_one() {
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        assert_eq!(format_float(1e-7), "0.0000001");
        assert_eq!(format_float(1234.56789), "1234.56789");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
    }

    #[test]
    fn times_marshal_like_go() {
        assert_eq!(
            time_marshal_text("2024-01-02").as_deref(),
            Some("2024-01-02T00:00:00Z")
        );
        assert_eq!(
            time_marshal_text("2024-1-2 3:4:5").as_deref(),
            Some("2024-01-02T03:04:05Z")
        );
        assert_eq!(
            time_marshal_text("2024-01-02T03:04:05.500+00:00").as_deref(),
            Some("2024-01-02T03:04:05.5Z")
        );
        assert_eq!(
            time_marshal_text("2001-12-14t21:59:43.10-05:00").as_deref(),
            Some("2001-12-14T21:59:43.1-05:00")
        );
        assert_eq!(
            time_rfc3339("2024-01-02T03:04:05.9Z").as_deref(),
            Some("2024-01-02T03:04:05Z")
        );
        for bad in ["2024-13-01", "24-01-01", "2024-01-01T25:00:00Z", "soon"] {
            assert_eq!(time_marshal_text(bad), None, "{bad}");
        }
    }
}
