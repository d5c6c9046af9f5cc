use super::*;

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const M: u64 = 60 * S;
const H: u64 = 60 * M;

fn ns(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}

#[test]
fn go_durations_parse_and_print_as_go_does() {
    let ms = Duration::from_millis;
    for (text, expected) in [
        ("0", Some(Duration::ZERO)),
        ("27s", Some(ms(27_000))),
        ("1m1s", Some(ms(61_000))),
        ("1.5h", Some(Duration::from_secs(5400))),
        (".5s", Some(ms(500))),
        ("1.s", Some(ms(1000))),
        ("2h45m", Some(Duration::from_secs(9900))),
        ("10us", Some(Duration::from_micros(10))),
        ("10\u{b5}s", Some(Duration::from_micros(10))),
        ("10\u{3bc}s", Some(Duration::from_micros(10))),
        ("7ns", Some(Duration::from_nanos(7))),
        ("+5s", Some(ms(5000))),
        (
            "0.0000000000000000000000000000000000000001s",
            Some(Duration::ZERO),
        ),
        ("", None),
        ("s", None),
        ("5", None),
        (".s", None),
        ("5x", None),
        ("-1s", None),
        ("9999999999999999999h", None),
        ("3000000h", None),
    ] {
        assert_eq!(parse(text), expected, "{text:?}");
    }
    for (duration, text) in [
        (Duration::ZERO, "0s"),
        (Duration::from_secs(2), "2s"),
        (Duration::from_secs(27), "27s"),
        (Duration::from_secs(61), "1m1s"),
        (Duration::from_secs(90), "1m30s"),
        (Duration::from_secs(3600), "1h0m0s"),
        (Duration::from_secs(5430), "1h30m30s"),
        (ms(1500), "1.5s"),
        (ms(300), "300ms"),
        (ms(500), "500ms"),
        (Duration::from_micros(1500), "1.5ms"),
        (Duration::from_nanos(1500), "1.5\u{b5}s"),
        (Duration::from_nanos(7), "7ns"),
    ] {
        assert_eq!(format(duration), text);
    }
}

/// Go's `parseDurationTests` (time_test.go): the non-negative results as Go gives them, the
/// negative ones refused.
#[test]
fn parses_gos_own_test_table() {
    let max = ns(i64::MAX as u64);
    for (text, expected) in [
        // simple
        ("0", Some(Duration::ZERO)),
        ("5s", Some(ns(5 * S))),
        ("30s", Some(ns(30 * S))),
        ("1478s", Some(ns(1478 * S))),
        // sign
        ("-5s", None),
        ("+5s", Some(ns(5 * S))),
        ("-0", Some(Duration::ZERO)),
        ("+0", Some(Duration::ZERO)),
        // decimal
        ("5.0s", Some(ns(5 * S))),
        ("5.6s", Some(ns(5 * S + 600 * MS))),
        ("5.s", Some(ns(5 * S))),
        (".5s", Some(ns(500 * MS))),
        ("1.0s", Some(ns(S))),
        ("1.00s", Some(ns(S))),
        ("1.004s", Some(ns(S + 4 * MS))),
        ("1.0040s", Some(ns(S + 4 * MS))),
        ("100.00100s", Some(ns(100 * S + MS))),
        // different units
        ("10ns", Some(ns(10 * NS))),
        ("11us", Some(ns(11 * US))),
        ("12\u{b5}s", Some(ns(12 * US))),
        ("12\u{3bc}s", Some(ns(12 * US))),
        ("13ms", Some(ns(13 * MS))),
        ("14s", Some(ns(14 * S))),
        ("15m", Some(ns(15 * M))),
        ("16h", Some(ns(16 * H))),
        // composite durations
        ("3h30m", Some(ns(3 * H + 30 * M))),
        ("10.5s4m", Some(ns(4 * M + 10 * S + 500 * MS))),
        ("-2m3.4s", None),
        (
            "1h2m3s4ms5us6ns",
            Some(ns(H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS)),
        ),
        ("39h9m14.425s", Some(ns(39 * H + 9 * M + 14 * S + 425 * MS))),
        // large value
        ("52763797000ns", Some(ns(52_763_797_000))),
        // more than 9 digits after the decimal point (golang.org/issue/6617)
        ("0.3333333333333333333h", Some(ns(20 * M))),
        // 1<<53+1 cannot be held exactly by a float64
        ("9007199254740993ns", Some(ns((1 << 53) + 1))),
        // the largest duration an int64 of nanoseconds holds
        ("9223372036854775807ns", Some(max)),
        ("9223372036854775.807us", Some(max)),
        ("9223372036s854ms775us807ns", Some(max)),
        ("-9223372036854775808ns", None),
        ("-9223372036854775.808us", None),
        ("-9223372036s854ms775us808ns", None),
        ("-2562047h47m16.854775808s", None),
        // a huge string (golang.org/issue/15011)
        ("0.100000000000000000000h", Some(ns(6 * M))),
        // the first overflow check in leadingFraction
        (
            "0.830103483285477580700h",
            Some(ns(49 * M + 48 * S + 372_539_827)),
        ),
    ] {
        assert_eq!(parse(text), expected, "{text:?}");
    }
}

/// Go's `parseDurationErrorTests` (time_test.go) that are valid UTF-8.
#[test]
fn refuses_what_go_refuses() {
    for text in [
        // invalid
        "",
        "3",
        "-",
        "s",
        ".",
        "-.",
        ".s",
        "+.s",
        "1d",
        "\u{fffd}",
        "\u{fffd} hello \u{fffd} world",
        // overflow
        "9223372036854775810ns",
        "9223372036854775808ns",
        "-9223372036854775809ns",
        "9223372036854776us",
        "3000000h",
        "9223372036854775.808us",
        "9223372036854ms775us808ns",
    ] {
        assert_eq!(parse(text), None, "{text:?}");
    }
}

/// Go's `durationTests` (time_test.go) that are not negative, and the outputs of its
/// `ExampleDuration_String` and `ExampleParseDuration`.
#[test]
fn formats_gos_own_test_table() {
    for (duration, text) in [
        (Duration::ZERO, "0s"),
        (ns(NS), "1ns"),
        (ns(1100 * NS), "1.1\u{b5}s"),
        (ns(2200 * US), "2.2ms"),
        (ns(3300 * MS), "3.3s"),
        (ns(4 * M + 5 * S), "4m5s"),
        (ns(4 * M + 5001 * MS), "4m5.001s"),
        (ns(5 * H + 6 * M + 7001 * MS), "5h6m7.001s"),
        (ns(8 * M + NS), "8m0.000000001s"),
        (ns(i64::MAX as u64), "2562047h47m16.854775807s"),
        // ExampleDuration_String
        (ns(H + 2 * M + 300 * MS), "1h2m0.3s"),
        (ns(300 * MS), "300ms"),
    ] {
        assert_eq!(format(duration), text, "{duration:?}");
        assert_eq!(parse(text), Some(duration), "{text:?}");
    }
    // ExampleParseDuration
    for (text, printed) in [
        ("10h", "10h0m0s"),
        ("1h10m10s", "1h10m10s"),
        ("1\u{b5}s", "1\u{b5}s"),
        ("1us", "1\u{b5}s"),
    ] {
        let parsed = parse(text);
        assert_eq!(parsed.map(format).as_deref(), Some(printed), "{text:?}");
    }
    assert_eq!(parse("1h10m10s").map(|d| d.as_secs()), Some(4210));
}

#[test]
fn formats_beyond_gos_range_with_more_hours() {
    assert_eq!(
        format(Duration::from_secs(3_000_000 * 3600)),
        "3000000h0m0s"
    );
    assert_eq!(format(Duration::MAX).split('h').count(), 2);
}

#[test]
fn fraction_digits_beyond_an_int64_are_ignored_as_go_ignores_them() {
    // Go stops at the first digit that would take the fraction above 1<<63 and ignores the
    // rest, even a smaller digit that would still fit.
    assert_eq!(
        leading_fraction("92233720368547758090"),
        (922_337_203_685_477_580, 1e18, 20)
    );
    assert_eq!(
        leading_fraction("92233720368547758080"),
        (9_223_372_036_854_775_808, 1e19, 20)
    );
}
