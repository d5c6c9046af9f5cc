//! go-yaml's timestamps: the plain scalars its `parseTimestamp` accepts (Go's `time.Parse`
//! with four layouts), and how Go's JSON encoding prints the `time.Time` they become.

/// The layouts go-yaml tries, in order: `2006-1-2T15:4:5.999999999Z07:00`, the same with a
/// lower-case `t`, `2006-1-2 15:4:5.999999999` (no zone: UTC) and `2006-1-2`.
#[derive(Clone, Copy)]
enum Layout {
    Upper,
    Lower,
    Space,
    Date,
}

/// A point in time as Go's `time.Time` holds a parsed one: calendar fields and a zone offset.
/// Go's RFC 3339 forms of it are [`GoTime::rfc3339_nano`] and [`GoTime::rfc3339`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoTime {
    /// The year (four digits).
    pub year: u32,
    /// The month, 1 to 12.
    pub month: u32,
    /// The day of the month, from 1.
    pub day: u32,
    /// The hour, 0 to 23.
    pub hour: u32,
    /// The minute, 0 to 59.
    pub minute: u32,
    /// The second, 0 to 59.
    pub second: u32,
    /// The nanoseconds of the second.
    pub nanos: u32,
    /// The zone: minutes east of UTC.
    pub offset_minutes: i32,
}

/// `s` as go-yaml's `parseTimestamp` reads it: exactly four digits then `-` (its quick check),
/// then the first layout Go's `time.Parse` accepts. As `time.Parse` does: month, day, hour,
/// minute and second take one or two digits (`2024-1-2T3:4:5Z`), a space in the layout
/// matches any run of spaces, the fraction may follow `.` or `,` and have any number of
/// digits (beyond nine they are cut off), and a zone is `Z` or `±hh:mm` with hours up to 24
/// and minutes up to 60. Out-of-range fields or days past the month's end fail.
pub(crate) fn parse_go_timestamp(s: &str) -> Option<GoTime> {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    [Layout::Upper, Layout::Lower, Layout::Space, Layout::Date]
        .into_iter()
        .find_map(|layout| parse_layout(b, layout))
}

/// An untagged plain timestamp as kustomize passes it on: go-yaml decodes it into a
/// `time.Time`, which JSON prints in RFC 3339 with nanoseconds (`2024-01-01` becomes
/// `2024-01-01T00:00:00Z`). `None` when `s` is not one of go-yaml's timestamp forms (Go's
/// `time.Parse` with `2006-1-2T15:4:5.999999999Z07:00`, the same with `t`,
/// `2006-1-2 15:4:5.999999999` and `2006-1-2`, after a check for four digits and `-`), or when
/// Go's JSON encoding refuses the time (a zone of 24 hours or more).
pub fn go_timestamp(s: &str) -> Option<String> {
    parse_go_timestamp(s)?.rfc3339_nano()
}

impl GoTime {
    /// The start of a day, in UTC.
    pub fn midnight_utc(year: u32, month: u32, day: u32) -> GoTime {
        GoTime {
            year,
            month,
            day,
            hour: 0,
            minute: 0,
            second: 0,
            nanos: 0,
            offset_minutes: 0,
        }
    }

    /// Go's `time.RFC3339Nano` form, which JSON and `MarshalText` use: trailing zeros of the
    /// fraction dropped, `Z` for a zero offset. `None` for a zone of 24 hours or more, which
    /// Go refuses to print.
    pub fn rfc3339_nano(&self) -> Option<String> {
        self.format(true)
    }

    /// Go's `time.RFC3339` form: [`GoTime::rfc3339_nano`] without the fraction.
    pub fn rfc3339(&self) -> Option<String> {
        self.format(false)
    }

    fn format(&self, fraction: bool) -> Option<String> {
        let mut out = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        if fraction && self.nanos > 0 {
            let fraction = format!("{:09}", self.nanos);
            out.push('.');
            out.push_str(fraction.trim_end_matches('0'));
        }
        let offset = self.offset_minutes.unsigned_abs();
        if offset == 0 {
            out.push('Z');
            return Some(out);
        }
        if offset / 60 >= 24 {
            return None;
        }
        let sign = if self.offset_minutes < 0 { '-' } else { '+' };
        out.push_str(&format!("{sign}{:02}:{:02}", offset / 60, offset % 60));
        Some(out)
    }
}

/// What is left of the text while a layout is matched against it.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl Cursor<'_> {
    /// One expected byte.
    fn literal(&mut self, c: u8) -> Option<()> {
        let (&first, rest) = self.rest.split_first()?;
        (first == c).then(|| self.rest = rest)
    }

    /// A space of the layout: the text must not continue with anything but spaces there, and
    /// all of them are skipped (Go's `skip`).
    fn spaces(&mut self) -> Option<()> {
        if self.rest.first().is_some_and(|c| *c != b' ') {
            return None;
        }
        while let Some(rest) = self.rest.strip_prefix(b" ") {
            self.rest = rest;
        }
        Some(())
    }

    /// One or two digits (Go's `getnum` without `fixed`).
    fn number(&mut self) -> Option<u32> {
        let digit = |i: usize| self.rest.get(i).filter(|c| c.is_ascii_digit()).copied();
        let first = u32::from(digit(0)? - b'0');
        let Some(second) = digit(1) else {
            self.rest = &self.rest[1..];
            return Some(first);
        };
        self.rest = &self.rest[2..];
        Some(first * 10 + u32::from(second - b'0'))
    }

    /// Exactly `n` digits.
    fn fixed(&mut self, n: usize) -> Option<u32> {
        let digits = self.rest.get(..n)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.rest = &self.rest[n..];
        digits
            .iter()
            .try_fold(0u32, |acc, d| Some(acc * 10 + u32::from(d - b'0')))
    }

    /// An optional fraction of a second: `.` or `,` and at least one digit; digits beyond the
    /// ninth are dropped (Go's `parseNanoseconds`).
    fn fraction(&mut self) -> u32 {
        let [b'.' | b',', d, ..] = self.rest else {
            return 0;
        };
        if !d.is_ascii_digit() {
            return 0;
        }
        let len = self.rest[1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let digits = &self.rest[1..=len];
        self.rest = &self.rest[1 + len..];
        let kept = &digits[..len.min(9)];
        let value = kept
            .iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
        value * 10u32.pow(9 - kept.len() as u32)
    }

    /// `Z`, or `±hh:mm` (Go's `Z07:00`), as minutes east of UTC.
    fn zone(&mut self) -> Option<i32> {
        if self.literal(b'Z').is_some() {
            return Some(0);
        }
        let sign = match self.rest.first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        if self.rest.len() < 6 || self.rest[3] != b':' {
            return None;
        }
        self.rest = &self.rest[1..];
        let hours = self.fixed(2)?;
        self.literal(b':')?;
        let minutes = self.fixed(2)?;
        if hours > 24 || minutes > 60 {
            return None;
        }
        i32::try_from(hours * 60 + minutes).ok().map(|m| sign * m)
    }
}

fn parse_layout(text: &[u8], layout: Layout) -> Option<GoTime> {
    let mut c = Cursor { rest: text };
    let year = c.fixed(4)?;
    c.literal(b'-')?;
    let month = c.number()?;
    c.literal(b'-')?;
    let day = c.number()?;
    let mut time = GoTime::midnight_utc(year, month, day);
    match layout {
        Layout::Date => {}
        Layout::Upper | Layout::Lower | Layout::Space => {
            match layout {
                Layout::Upper => c.literal(b'T')?,
                Layout::Lower => c.literal(b't')?,
                _ => c.spaces()?,
            }
            time.hour = c.number()?;
            c.literal(b':')?;
            time.minute = c.number()?;
            c.literal(b':')?;
            time.second = c.number()?;
            time.nanos = c.fraction();
            if !matches!(layout, Layout::Space) {
                time.offset_minutes = c.zone()?;
            }
        }
    }
    (c.rest.is_empty() && time.in_range()).then_some(time)
}

impl GoTime {
    fn in_range(&self) -> bool {
        (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in(self.year, self.month)
            && self.hour < 24
            && self.minute < 60
            && self.second < 60
    }
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// go-yaml's verdict on each text (v2.4.0 / v3.0.1, which share `parseTimestamp`): not a
    /// timestamp, a timestamp Go's JSON encoding refuses, or the JSON text of the time.
    #[rustfmt::skip]
    const GO_TIMESTAMPS: &[(&str, Option<Option<&str>>)] = &[
            ("2024-01-01", Some(Some("2024-01-01T00:00:00Z"))),
            ("2024-1-2", Some(Some("2024-01-02T00:00:00Z"))),
            ("2001-12-14t21:59:43.10-05:00", Some(Some("2001-12-14T21:59:43.1-05:00"))),
            ("2001-12-14T21:59:43Z", Some(Some("2001-12-14T21:59:43Z"))),
            ("2001-12-14 21:59:43.10", Some(Some("2001-12-14T21:59:43.1Z"))),
            ("2002-01-01  01:02:03", Some(Some("2002-01-01T01:02:03Z"))),
            ("2024-2-3", Some(Some("2024-02-03T00:00:00Z"))),
            ("2024-02-30", None),
            ("2024-02-29", Some(Some("2024-02-29T00:00:00Z"))),
            ("2023-02-29", None),
            ("1900-02-29", None),
            ("2000-02-29", Some(Some("2000-02-29T00:00:00Z"))),
            ("2002-13-01", None),
            ("2002-00-01", None),
            ("2002-01-00", None),
            ("0000-01-01", Some(Some("0000-01-01T00:00:00Z"))),
            ("2001-12-14 21:59:43.10 -5", None),
            ("24-01-01", None),
            ("02024-01-01", None),
            ("2024-01-01 ", None),
            ("2024-01-01T", None),
            ("2002-01-01T01:02:03", None),
            ("2002-01-01T1:2:3Z", Some(Some("2002-01-01T01:02:03Z"))),
            ("2002-01-01T01:02:03z", None),
            ("2002-01-01t01:02:03Z", Some(Some("2002-01-01T01:02:03Z"))),
            ("2002-01-01T24:00:00Z", None),
            ("2002-01-01T23:60:00Z", None),
            ("2002-01-01T23:59:60Z", None),
            ("2002-01-01T01:02:03.Z", None),
            ("2002-01-01T01:02:03.000000000Z", Some(Some("2002-01-01T01:02:03Z"))),
            ("2002-01-01T01:02:03.123456789Z", Some(Some("2002-01-01T01:02:03.123456789Z"))),
            ("2002-01-01T01:02:03.1234567891Z", Some(Some("2002-01-01T01:02:03.123456789Z"))),
            ("2002-01-01T01:02:03,5Z", Some(Some("2002-01-01T01:02:03.5Z"))),
            ("2002-01-01T01:02:03+00:00", Some(Some("2002-01-01T01:02:03Z"))),
            ("2002-01-01T01:02:03-00:00", Some(Some("2002-01-01T01:02:03Z"))),
            ("2002-01-01T01:02:03+05:30", Some(Some("2002-01-01T01:02:03+05:30"))),
            ("2002-01-01T01:02:03+0530", None),
            ("2002-01-01T01:02:03+05", None),
            ("2002-01-01T01:02:03+23:59", Some(Some("2002-01-01T01:02:03+23:59"))),
            ("2002-01-01T01:02:03+01:60", Some(Some("2002-01-01T01:02:03+02:00"))),
            ("2002-01-01T01:02:03+01:61", None),
            ("2002-01-01T01:02:03+24:00", Some(None)),
            ("2002-01-01 01:02:03Z", None),
            ("2002-01-01 01:02:03.5", Some(Some("2002-01-01T01:02:03.5Z"))),
            ("2002-01-01\t01:02:03", None),
            ("1.20", None),
            ("v2024-01-01", None),
            ("2024-01-01x", None),
    ];

    #[test]
    fn timestamps_parse_and_print_as_in_go() {
        for (text, want) in GO_TIMESTAMPS {
            let parsed = parse_go_timestamp(text);
            assert_eq!(parsed.is_some(), want.is_some(), "{text:?}");
            assert_eq!(go_timestamp(text).as_deref(), want.flatten(), "{text:?}");
        }
    }
}
