//! What kustomize's printing does to numbers.
//!
//! kustomize prints each object by writing it as JSON and reading that JSON back as YAML
//! (`Resource.AsYAML`: `encoding/json`, then `sigs.k8s.io/yaml`). Go writes a float whose
//! value is a whole number below 1e21 with no fraction or exponent (`3600.0` becomes
//! `3600`, `1e3` becomes `1000`, `-0.0` becomes `-0`), and the YAML reader then takes that
//! text for an integer when it fits 64 bits. So every such float of the build comes out an
//! integer, in custom resources and built-in kinds alike; other floats (`1.5`, `1e+21`,
//! whole numbers beyond 64 bits) stay floats. Strings are untouched (`"3600.0"`).

use serde_json::{Number, Value};

/// Go's JSON writes floats from 1e21 up in exponent form, which reads back as a float.
const EXPONENT_FROM: f64 = 1e21;
/// 2^63: the first whole number beyond `i64`.
const I64_END: f64 = 9_223_372_036_854_775_808.0;
/// 2^64: the first whole number beyond `u64`.
const U64_END: f64 = 18_446_744_073_709_551_616.0;

/// Turns every float in `value` that kustomize's printing makes an integer into that
/// integer.
pub fn whole_floats_to_integers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(integer) = as_integer(n) {
                *n = integer;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(whole_floats_to_integers),
        _ => {}
    }
}

/// The integer a float number reads back as after Go's JSON round trip, if any.
fn as_integer(n: &Number) -> Option<Number> {
    if !n.is_f64() {
        return None;
    }
    let f = n.as_f64()?;
    if !f.is_finite() || f.fract() != 0.0 || f.abs() >= EXPONENT_FROM {
        return None;
    }
    // Whole and in range, so the casts are exact.
    if (-I64_END..I64_END).contains(&f) {
        Some(Number::from(f as i64))
    } else if (0.0..U64_END).contains(&f) {
        Some(Number::from(f as u64))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn float(f: f64) -> Value {
        Value::Number(Number::from_f64(f).expect("finite"))
    }

    fn converted(mut value: Value) -> Value {
        whole_floats_to_integers(&mut value);
        value
    }

    #[test]
    fn whole_floats_become_integers() {
        assert_eq!(converted(float(3600.0)), json!(3600));
        assert_eq!(converted(float(-0.0)), json!(0));
        assert_eq!(converted(float(-12.0)), json!(-12));
        assert_eq!(converted(float(1e18)), json!(1_000_000_000_000_000_000_i64));
        // Between 2^63 and 2^64 it reads back unsigned.
        assert_eq!(
            converted(float(1e19)),
            json!(10_000_000_000_000_000_000_u64)
        );
        assert!(converted(float(3600.0)).is_i64());
    }

    #[test]
    fn other_numbers_stay_as_they_are() {
        assert_eq!(converted(float(1.5)), float(1.5));
        assert_eq!(converted(float(2e19)), float(2e19), "beyond u64");
        assert_eq!(
            converted(float(1e21)),
            float(1e21),
            "written with an exponent"
        );
        assert_eq!(converted(float(1e-7)), float(1e-7));
        assert_eq!(
            converted(json!(9_007_199_254_740_993_u64)),
            json!(9_007_199_254_740_993_u64)
        );
        assert_eq!(converted(json!("3600.0")), json!("3600.0"));
    }

    #[test]
    fn nested_values_are_converted() {
        let value = json!({"spec": {"list": [float(1.0), float(2.5), {"x": float(4.0)}]}});
        assert_eq!(
            converted(value),
            json!({"spec": {"list": [1, float(2.5), {"x": 4}]}})
        );
    }
}
