//! Flag values read as Go's `strconv` and `time` packages read them, which is how pflag
//! parses the flags of Flux's controllers: `--enable-leader-election=1`, `--concurrent=0x10`,
//! `--requeue-dependency=1.5m` and `--feature-gates=A=T,B=0` all mean what they mean to Flux.

use std::time::Duration;

/// A flag value Go's parsers would refuse; clap prefixes the message with the flag's name and
/// the value (`invalid value 'x' for '--concurrent <CONCURRENT>': ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagValueError {
    /// Not one of `strconv.ParseBool`'s words.
    #[error("{0:?} is not a boolean (true, false, 1, 0, t, f, TRUE or FALSE)")]
    NotBoolean(String),
    /// Not an integer in any base `strconv.ParseInt` reads.
    #[error("{0:?} is not an integer")]
    NotInteger(String),
    /// An integer beyond 64 bits.
    #[error("{0:?} is out of range for an integer")]
    IntegerOverflow(String),
    /// An integer outside the range of the flag's type.
    #[error("{text:?} is out of range: it must be between {min} and {max}")]
    OutOfRange {
        /// The value as given.
        text: String,
        /// The smallest value the flag takes.
        min: i128,
        /// The largest value the flag takes.
        max: i128,
    },
    /// Not a decimal number.
    #[error("{0:?} is not a number")]
    NotNumber(String),
    /// A negative duration.
    #[error("{0:?} is negative; a duration flag must be 0 or more")]
    NegativeDuration(String),
    /// Not a Go duration.
    #[error("{0:?} is not a duration: expected a Go duration such as 30s, 1.5m, 1h30m or 300ms")]
    NotDuration(String),
    /// Not a byte size.
    #[error("{0:?} is not a size: expected a whole number of bytes, optionally with Ki, Mi or Gi")]
    NotByteSize(String),
    /// A `--feature-gates` item without `=`.
    #[error("{0:?} must be Name=true or Name=false")]
    NotGatePair(String),
    /// A `--feature-gates` item whose value is not a boolean.
    #[error("feature gate {name}: {source}")]
    GateValue {
        /// The gate's name.
        name: String,
        /// Why its value was refused.
        source: Box<FlagValueError>,
    },
}

/// Go's `strconv.ParseBool`: `1`, `t`, `T`, `TRUE`, `true`, `True` and the false forms `0`,
/// `f`, `F`, `FALSE`, `false`, `False`.
pub fn parse_bool(text: &str) -> Result<bool, FlagValueError> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(FlagValueError::NotBoolean(text.to_string())),
    }
}

/// Go's `strconv.ParseInt(text, 0, 64)`, as pflag's `IntVar` reads a value: an optional
/// sign, then decimal, `0x` hexadecimal, `0o` or leading-`0` octal, or `0b` binary digits,
/// with `_` allowed between digits.
pub fn parse_int(text: &str) -> Result<i64, FlagValueError> {
    let not_an_integer = || FlagValueError::NotInteger(text.to_string());
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = parse_unsigned(unsigned).ok_or_else(not_an_integer)?;
    let out_of_range = || FlagValueError::IntegerOverflow(text.to_string());
    if negative {
        0i64.checked_sub_unsigned(magnitude)
            .ok_or_else(out_of_range)
    } else {
        i64::try_from(magnitude).map_err(|_| out_of_range())
    }
}

/// [`parse_int`] limited to the range of `T`, naming the range when the value is outside it.
pub fn parse_int_in<T>(text: &str) -> Result<T, FlagValueError>
where
    T: TryFrom<i64> + Bounded,
{
    let value = parse_int(text)?;
    T::try_from(value).map_err(|_| FlagValueError::OutOfRange {
        text: text.to_string(),
        min: T::MIN,
        max: T::MAX,
    })
}

/// The bounds of an integer type, for messages.
pub trait Bounded {
    /// The smallest value.
    const MIN: i128;
    /// The largest value.
    const MAX: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
bounded!(u8, u16, u32, i32, usize);

/// The digits of an integer without its sign, in the base its prefix names (base 0 of
/// `strconv.ParseUint`); `None` for anything else.
fn parse_unsigned(text: &str) -> Option<u64> {
    if text.contains('_') && !underscores_ok(text) {
        return None;
    }
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    let lower = digits.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Go's `underscoreOK`: every `_` in a number stands between two digits, or between the base
/// prefix and a digit.
fn underscores_ok(text: &str) -> bool {
    #[derive(PartialEq)]
    enum Seen {
        Start,
        Digit,
        Underscore,
        Other,
    }
    let text = text.strip_prefix(['+', '-']).unwrap_or(text);
    let bytes = text.as_bytes();
    let mut seen = Seen::Start;
    let mut rest = bytes;
    let mut hex = false;
    if let [b'0', prefix, after @ ..] = bytes
        && matches!(prefix.to_ascii_lowercase(), b'b' | b'o' | b'x')
    {
        seen = Seen::Digit;
        hex = prefix.eq_ignore_ascii_case(&b'x');
        rest = after;
    }
    for byte in rest {
        if byte.is_ascii_digit() || (hex && byte.is_ascii_hexdigit()) {
            seen = Seen::Digit;
        } else if *byte == b'_' {
            if seen != Seen::Digit {
                return false;
            }
            seen = Seen::Underscore;
        } else if seen == Seen::Underscore {
            return false;
        } else {
            seen = Seen::Other;
        }
    }
    seen != Seen::Underscore
}

/// Go's `strconv.ParseFloat(text, 32)` for decimal values (`50`, `7.5`, `1e3`, `.5`, `inf`).
pub fn parse_float32(text: &str) -> Result<f32, FlagValueError> {
    if text.contains('_') && !underscores_ok(text) {
        return Err(FlagValueError::NotNumber(text.to_string()));
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    plain
        .parse::<f32>()
        .map_err(|_| FlagValueError::NotNumber(text.to_string()))
}

/// Go's `time.ParseDuration` (`0`, `1h30m`, `1.5h`, `300ms`, `10us`, `10µs`, `5ns`); a
/// negative duration is refused, as no flag of this controller has a meaning for one.
pub fn parse_duration(text: &str) -> Result<Duration, FlagValueError> {
    if text.starts_with('-') && goduration::parse(&text[1..]).is_some_and(|d| !d.is_zero()) {
        return Err(FlagValueError::NegativeDuration(text.to_string()));
    }
    goduration::parse(text).ok_or_else(|| FlagValueError::NotDuration(text.to_string()))
}

/// A size in bytes: a whole number, optionally with a binary suffix (`Ki`, `Mi`, `Gi`) as in
/// Kubernetes quantities.
pub fn parse_byte_size(text: &str) -> Result<u64, FlagValueError> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(FlagValueError::NotByteSize(text.to_string())),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| FlagValueError::NotByteSize(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_as_strconv_parse_bool() {
        for text in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(text), Ok(true), "{text}");
        }
        for text in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(text), Ok(false), "{text}");
        }
        for text in ["", "yes", "tRUE", "2", " true"] {
            assert!(parse_bool(text).is_err(), "{text}");
        }
    }

    #[test]
    fn integers_in_every_base_go_reads() {
        let cases = [
            ("20", 20),
            ("+20", 20),
            ("-3", -3),
            ("0", 0),
            ("0x10", 16),
            ("0X1f", 31),
            ("010", 8),
            ("0o17", 15),
            ("0b101", 5),
            ("1_000", 1000),
            ("0x_10", 16),
        ];
        for (text, value) in cases {
            assert_eq!(parse_int(text), Ok(value), "{text}");
        }
        for text in [
            "",
            "-",
            "1.5",
            "08",
            "0x",
            "_1",
            "1_",
            "1__0",
            "ten",
            "9223372036854775808",
        ] {
            assert!(parse_int(text).is_err(), "{text}");
        }
        assert_eq!(parse_int("-9223372036854775808"), Ok(i64::MIN));
    }

    #[test]
    fn integers_outside_the_flag_range_name_it() {
        assert_eq!(parse_int_in::<u8>("99"), Ok(99));
        let error = parse_int_in::<u8>("256").unwrap_err().to_string();
        assert!(error.contains("between 0 and 255"), "{error}");
        assert!(parse_int_in::<u16>("-1").is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(parse_float32("50"), Ok(50.0));
        assert_eq!(parse_float32("7.5"), Ok(7.5));
        assert_eq!(parse_float32("1e3"), Ok(1000.0));
        assert_eq!(parse_float32("1_000"), Ok(1000.0));
        assert!(parse_float32("fast").is_err());
        assert!(parse_float32("1__0").is_err());
        assert!(parse_float32("1_.5").is_err());
    }

    #[test]
    fn durations_as_time_parse_duration() {
        let cases = [
            ("0", Duration::ZERO),
            ("30s", Duration::from_secs(30)),
            ("1h30m", Duration::from_secs(5400)),
            ("1.5h", Duration::from_secs(5400)),
            ("300ms", Duration::from_millis(300)),
            ("10us", Duration::from_micros(10)),
            ("10µs", Duration::from_micros(10)),
            ("5ns", Duration::from_nanos(5)),
            ("-0s", Duration::ZERO),
        ];
        for (text, value) in cases {
            assert_eq!(parse_duration(text), Ok(value), "{text}");
        }
        for text in ["", "30", "soon", "1d", "-5s"] {
            assert!(parse_duration(text).is_err(), "{text}");
        }
        assert_eq!(
            parse_duration("-5s"),
            Err(FlagValueError::NegativeDuration("-5s".to_string()))
        );
    }
}
