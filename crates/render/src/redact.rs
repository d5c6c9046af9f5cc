//! Keeping secret values out of messages: the values a build decrypted (and the post-build
//! variables read from Secrets) are masked out of every message written after they were
//! revealed (Ready condition, events, logs), as Flux masks decrypted and `substituteFrom`
//! Secret values with `*****`.
//!
//! Flux masks every non-empty value wherever it occurs. Here a value of at least
//! [`MASK_EVERYWHERE_LEN`] bytes is masked wherever it occurs too; a shorter one (a port, a
//! PIN, `yes`) only where it stands alone, not inside a longer run of letters and digits:
//! masking every `1` or `ab` would make messages unreadable (`line *****2`), while a 1-3
//! byte value found inside a longer word gives away nothing an observer could single out.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, RandomState};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

/// What a masked value is replaced with (Flux's mask).
pub const MASK: &str = "*****";

/// Values at least this long are masked wherever they occur; shorter ones only as a whole
/// word.
pub const MASK_EVERYWHERE_LEN: usize = 4;

/// Secret values to keep out of messages, wiped on drop. `Debug` shows only their count.
#[derive(Default)]
pub struct SecretValues {
    values: Vec<Zeroizing<String>>,
    /// Positions in `values` by hash, so that adding stays linear however many there are.
    index: HashMap<u64, Vec<usize>>,
    hasher: RandomState,
}

impl fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretValues({} values)", self.values.len())
    }
}

impl SecretValues {
    /// No values.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How many forms are held (a value, its base64, its JSON escaping, its lines).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Adds a value, with the forms in which a message may quote it: its base64 encoding
    /// (Secret `data`), its JSON-escaped text, and each of its lines. Empty values are
    /// ignored.
    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        self.push(value);
        self.push(&STANDARD.encode(value.as_bytes()));
        let escaped = Zeroizing::new(serde_json::to_string(value).unwrap_or_default());
        if let Some(inner) = escaped.strip_prefix('"').and_then(|e| e.strip_suffix('"')) {
            self.push(inner);
        }
        if value.contains('\n') {
            for line in value.lines().map(str::trim) {
                if line.len() >= MASK_EVERYWHERE_LEN {
                    self.push(line);
                }
            }
        }
    }

    /// Adds a whole decrypted file and its base64 encoding (as a Secret generated from it
    /// holds it), but not its lines: those are its keys as much as its values, and the
    /// values are added one by one.
    pub fn add_file(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.push(text);
        self.push(&STANDARD.encode(text.as_bytes()));
    }

    /// Adds every value of `other`.
    pub fn extend(&mut self, other: SecretValues) {
        for value in other.values {
            self.push(&value);
        }
    }

    fn push(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(value);
        let positions = self.index.entry(hash).or_default();
        if positions.iter().any(|&i| self.values[i].as_str() == value) {
            return;
        }
        positions.push(self.values.len());
        self.values.push(Zeroizing::new(value.to_owned()));
    }

    /// Whether `text` occurs inside one of the values (so quoting it would quote part of
    /// a secret).
    pub fn contains_fragment(&self, text: &str) -> bool {
        !text.is_empty() && self.values.iter().any(|v| v.contains(text))
    }

    /// `message` with every occurrence of a value replaced by [`MASK`] (see the module
    /// documentation for short values). Overlapping occurrences are masked as one.
    pub fn redact(&self, message: &str) -> String {
        if self.values.is_empty() {
            return message.to_owned();
        }
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for value in &self.values {
            let whole_word_only = value.len() < MASK_EVERYWHERE_LEN;
            for (start, _) in message.match_indices(value.as_str()) {
                let end = start + value.len();
                if whole_word_only && !stands_alone(message, start, end) {
                    continue;
                }
                ranges.push((start, end));
            }
        }
        if ranges.is_empty() {
            return message.to_owned();
        }
        ranges.sort_unstable();
        let mut out = String::with_capacity(message.len());
        let mut at = 0;
        for (start, end) in ranges {
            if end <= at {
                continue;
            }
            if start >= at {
                out.push_str(&message[at..start]);
                out.push_str(MASK);
            }
            at = end;
        }
        out.push_str(&message[at..]);
        out
    }
}

/// Whether `message[start..end]` is not part of a longer run of letters and digits.
fn stands_alone(message: &str, start: usize, end: usize) -> bool {
    let before = message[..start].chars().next_back();
    let after = message[end..].chars().next();
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    !word(before) && !word(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(list: &[&str]) -> SecretValues {
        let mut v = SecretValues::new();
        list.iter().for_each(|s| v.add(s));
        v
    }

    #[test]
    fn masks_every_occurrence_and_overlaps_as_one() {
        let v = values(&["hunter2", "ter2-and"]);
        assert_eq!(
            v.redact("bad value \"hunter2\" and hunter2-and-more"),
            "bad value \"*****\" and *****-more"
        );
        assert_eq!(v.redact("nothing here"), "nothing here");
        assert_eq!(SecretValues::new().redact("hunter2"), "hunter2");
    }

    #[test]
    fn short_values_are_masked_only_as_whole_words() {
        let v = values(&["1", "ab"]);
        assert_eq!(
            v.redact("line 12: value 1 is invalid, ab=\"ab\", tab"),
            "line 12: value ***** is invalid, *****=\"*****\", tab"
        );
    }

    #[test]
    fn quoted_forms_are_masked_too() {
        let v = values(&["line one\nsecond \"line\"", "p4ss"]);
        // The JSON-escaped form, as an API server quotes a value.
        assert_eq!(
            v.redact(r#"Invalid value: "line one\nsecond \"line\"""#),
            r#"Invalid value: "*****""#
        );
        // One line of a multi-line value.
        assert_eq!(v.redact("at: second \"line\""), "at: *****");
        // The base64 of a value, as Secret data holds it.
        assert_eq!(v.redact("data: cDRzcw=="), "data: *****");
        assert!(v.contains_fragment("second"));
        assert!(!v.contains_fragment("third"));
        assert!(!v.contains_fragment(""));
    }

    #[test]
    fn adding_a_value_compares_it_with_its_hash_bucket_only() {
        let mut v = SecretValues::new();
        for i in 0..100_000 {
            v.add(&format!("value-{i}"));
            v.add(&format!("value-{i}"));
        }
        assert!(v.len() >= 200_000);
        // A push compares the new value with the values of its hash's bucket, not with every
        // value held: adding n values is linear as long as buckets stay this small (64-bit
        // hashes of 300,000 distinct forms collide with a probability of about 2e-9).
        let largest_bucket = v.index.values().map(Vec::len).max().unwrap_or_default();
        assert!(
            largest_bucket <= 2,
            "a bucket holds {largest_bucket} values"
        );
        assert_eq!(
            v.index.values().map(Vec::len).sum::<usize>(),
            v.len(),
            "every form is indexed once"
        );
        assert_eq!(v.redact("x value-99999 y"), "x ***** y");
    }

    #[test]
    fn empty_values_are_ignored_and_debug_hides_values() {
        let mut v = values(&[""]);
        assert!(v.is_empty());
        v.add("s3cret-value");
        v.extend(values(&["s3cret-value", "other"]));
        assert_eq!(v.len(), values(&["s3cret-value", "other"]).len());
        assert!(!format!("{v:?}").contains("s3cret"));
    }
}
