//! `metadata.resourceVersion` kept as a number.
//!
//! Kubernetes' API server writes an object's `resourceVersion` as the decimal revision of its
//! last write in etcd (kine does the same); the records and the watch-kept versions hold tens
//! of thousands of them, so each is kept in eight bytes rather than as a string. A version
//! written otherwise (an aggregated API server may write any string) is not kept at all: its
//! object keeps no record and takes Flux's full path on every reconcile.

use std::fmt;

/// A `resourceVersion` that is a decimal number, as etcd-backed API servers write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Revision(u64);

impl Revision {
    /// The revision `version` spells, when it is a decimal number written without a sign or
    /// leading zeros (so that it reads back as the same string); `None` otherwise.
    pub fn parse(version: &str) -> Option<Revision> {
        let digits = version.as_bytes();
        let canonical = !digits.is_empty()
            && digits.iter().all(u8::is_ascii_digit)
            && (digits.len() == 1 || digits[0] != b'0');
        canonical
            .then(|| version.parse().ok().map(Revision))
            .flatten()
    }
}

impl fmt::Display for Revision {
    /// The version as the API server wrote it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_versions_read_back_as_written() {
        for version in ["0", "7", "42", "18446744073709551615"] {
            let revision = Revision::parse(version);
            assert_eq!(revision.map(|r| r.to_string()).as_deref(), Some(version));
        }
    }

    #[test]
    fn other_versions_are_not_kept() {
        for version in [
            "",
            "007",
            "+1",
            "-1",
            "1.5",
            "12a",
            " 1",
            "18446744073709551616",
        ] {
            assert_eq!(Revision::parse(version), None, "{version:?}");
        }
    }

    #[test]
    fn equal_versions_are_equal_revisions() {
        assert_eq!(Revision::parse("123"), Revision::parse("123"));
        assert_ne!(Revision::parse("123"), Revision::parse("124"));
    }
}
