//! The order go-yaml gives map keys when it writes a map (its `keyList.Less`), for string keys:
//! character by character, with runs of digits compared as numbers and any character that is
//! not a letter placed before letters.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::unicode_go::{is_digit, is_letter};

/// Compares two map keys as go-yaml (v2 and v3) orders string keys when it writes a map, which
/// is the order of every mapping in kustomize's output.
///
/// The keys are compared character by character up to the first difference. There:
/// - two letters compare by code point (`B` < `a`);
/// - a letter and a non-letter: the non-letter comes first (`USE_PGBOUNCER` < `USER`,
///   `jwks_uri` < `jwksUri`);
/// - two non-letters: the runs of digits starting there are compared as numbers (`port9` <
///   `port10`, `-` < `0`); equal numbers put the shorter run first (`1` < `01`), and otherwise
///   the two characters compare by code point (`-` < `_`). When a `0` is involved and the digits
///   just before it are not all zeros, those digits count too (`a100` < `a101`).
///
/// A key that is a prefix of the other comes first. "Letter" and "digit" are Unicode general
/// categories L and Nd, as Go's `unicode` package has them; a digit's value is its code point
/// minus that of `0`, in wrapping 64-bit arithmetic, as Go computes it.
///
/// Only equal keys compare `Equal`. Go's comparison is a total order unless a run of digits
/// overflows 64 bits or holds non-ASCII digits; for such keys Go's own output order depends on
/// its map iteration order, so no order can be "the" Go one there.
pub fn go_key_order(a: &str, b: &str) -> Ordering {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) else {
        return a.len().cmp(&b.len());
    };
    let (x, y) = (a[i], b[i]);
    match (is_letter(x), is_letter(y)) {
        (true, true) => x.cmp(&y),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => compare_numbers_at(&a, &b, i),
    }
}

/// The comparison of two non-letters at `i`, the first position where the keys differ.
fn compare_numbers_at(a: &[char], b: &[char], i: usize) -> Ordering {
    let carry = i64::from((a[i] == '0' || b[i] == '0') && nonzero_digits_before(a, i));
    let (a_value, a_end) = digit_run(a, i, carry);
    let (b_value, b_end) = digit_run(b, i, carry);
    a_value
        .cmp(&b_value)
        .then(a_end.cmp(&b_end))
        .then(a[i].cmp(&b[i]))
}

/// True when the digits that end just before `i` include one that is not `0`.
fn nonzero_digits_before(key: &[char], i: usize) -> bool {
    key[..i]
        .iter()
        .rev()
        .take_while(|c| is_digit(**c))
        .any(|c| *c != '0')
}

/// The value of the digits from `start` on (after `initial`), and where they end.
fn digit_run(key: &[char], start: usize, initial: i64) -> (i64, usize) {
    let mut value = initial;
    let mut end = start;
    while let Some(&c) = key.get(end).filter(|c| is_digit(**c)) {
        let digit = i64::from(u32::from(c)) - i64::from(u32::from('0'));
        value = value.wrapping_mul(10).wrapping_add(digit);
        end += 1;
    }
    (value, end)
}

/// Reorders `map` by [`go_key_order`] (a merge sort: stable, and it never panics, even where
/// the order is not total).
pub(crate) fn sort_map(map: &mut Map<String, Value>) {
    let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    map.extend(merge_sort(entries));
}

fn merge_sort(mut entries: Vec<(String, Value)>) -> Vec<(String, Value)> {
    if entries.len() <= 1 {
        return entries;
    }
    let right = entries.split_off(entries.len() / 2);
    let (left, right) = (merge_sort(entries), merge_sort(right));
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut left, mut right) = (left.into_iter().peekable(), right.into_iter().peekable());
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        let next = if go_key_order(&r.0, &l.0) == Ordering::Less {
            right.next()
        } else {
            left.next()
        };
        out.extend(next);
    }
    out.extend(left);
    out.extend(right);
    out
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering::{self, Greater, Less};

    use serde_json::json;

    use super::*;

    /// `keyList.Less` of go-yaml v2.4.0 on these pairs.
    #[rustfmt::skip]
    const GO_PAIRS: &[(&str, &str, Ordering)] = &[
        ("USE_PGBOUNCER", "USER", Less),
        ("NAME_LABEL", "NAMESPACE_LABEL", Less),
        ("jwks_uri", "jwksUri", Less),
        ("port9", "port10", Less),
        ("a", "B", Greater),
        ("B", "a", Less),
        ("a", "ab", Less),
        ("", "a", Less),
        ("1", "01", Less),
        ("01", "001", Less),
        ("a1", "a01", Less),
        ("a100", "a101", Less),
        ("a10", "a1_", Greater),
        ("-", "_", Less),
        ("-", "0", Less),
        ("_", "a", Less),
        ("0", "a", Less),
        ("9", "a", Less),
        ("a9", "a10", Less),
        ("a09", "a10", Less),
        ("a0", "a00", Less),
        ("x-1", "x.1", Less),
        ("x.1", "x_1", Less),
        ("x_1", "x1", Less),
        ("v1", "v1beta1", Less),
        ("v1beta1", "v2alpha1", Less),
        ("v2alpha1", "v10", Less),
        ("v10", "v1beta1", Less),
        ("key2", "key10", Less),
        ("key10", "key_2", Greater),
        ("k8s", "k10s", Less),
        ("é", "f", Greater),
        ("é", "e", Greater),
        ("ª", "a", Greater),
        ("日", "a", Greater),
        ("Ⅳ", "a", Less),
        ("٣", "4", Greater),
        ("a٣", "a4", Greater),
        ("\u{1d7d8}", "0", Greater),
        ("12345678901234567890", "2", Less),
        ("99999999999999999999", "1", Greater),
        ("a 1", "a1", Less),
        ("a/b", "a.b", Greater),
        ("app.kubernetes.io/name", "app.kubernetes.io/instance", Greater),
        ("ZZ", "aa", Less),
        ("_z", "a", Less),
        ("0a", "1", Less),
        ("1a", "01", Less),
    ];

    #[test]
    fn pairs_compare_as_go_yaml_compares_them() {
        for (a, b, want) in GO_PAIRS {
            assert_eq!(go_key_order(a, b), *want, "{a:?} vs {b:?}");
            assert_eq!(go_key_order(b, a), want.reverse(), "{b:?} vs {a:?}");
        }
        assert_eq!(go_key_order("same", "same"), Ordering::Equal);
    }

    #[test]
    fn maps_are_sorted_in_go_yaml_order() {
        let mut map = json!({
            "USER": 0, "USE_PGBOUNCER": 0, "PORT": 0, "port10": 0, "port9": 0, "jwksUri": 0,
            "jwks_uri": 0, "NAMESPACE_LABEL": 0, "NAME_LABEL": 0, "a": 0, "B": 0, "_x": 0,
            "-y": 0, "0": 0, "10": 0, "9": 0, "key_2": 0, "key2": 0,
            "app.kubernetes.io/name": 0, "app.kubernetes.io/instance": 0, "helm.sh/chart": 0
        });
        let Value::Object(map) = &mut map else {
            unreachable!()
        };
        sort_map(map);
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "-y",
                "_x",
                "0",
                "9",
                "10",
                "B",
                "NAME_LABEL",
                "NAMESPACE_LABEL",
                "PORT",
                "USE_PGBOUNCER",
                "USER",
                "a",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/name",
                "helm.sh/chart",
                "jwks_uri",
                "jwksUri",
                "key_2",
                "key2",
                "port9",
                "port10"
            ]
        );
    }

    #[test]
    fn a_cycle_in_go_order_sorts_without_panicking() {
        // Go's comparison is not transitive here (`v1beta1` < `v2alpha1` < `v10` <
        // `v1beta1`), so Go's own order changes from run to run; ours is fixed.
        let mut map = Map::new();
        for key in ["v10", "v2alpha1", "v1beta1", "53", "210", "2B"] {
            map.insert(key.to_owned(), Value::Null);
        }
        sort_map(&mut map);
        assert_eq!(map.len(), 6);
    }
}
