//! SPIFFE IDs (`spiffe://<trust domain>/<path>`), as the SPIFFE-ID standard defines them.

use std::fmt;

/// A SPIFFE ID: the scheme `spiffe`, a trust domain and an optional path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpiffeId {
    id: String,
    trust_domain_end: usize,
}

/// Why a text is not a SPIFFE ID.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{id}' is not a SPIFFE ID: {why}")]
pub struct SpiffeIdError {
    id: String,
    why: &'static str,
}

const SCHEME: &str = "spiffe://";

impl SpiffeId {
    /// Parses `id`: the scheme `spiffe://` (lower case), a trust domain of lower-case
    /// letters, digits, `.`, `-` and `_`, and a path of non-empty segments of letters,
    /// digits, `.`, `-` and `_` (no `.` or `..` segment), with no query or fragment.
    pub fn parse(id: &str) -> Result<SpiffeId, SpiffeIdError> {
        let fail = |why| SpiffeIdError {
            id: id.to_owned(),
            why,
        };
        let rest = id
            .strip_prefix(SCHEME)
            .ok_or_else(|| fail("it does not start with 'spiffe://'"))?;
        let (trust_domain, path) = match rest.find('/') {
            Some(slash) => rest.split_at(slash),
            None => (rest, ""),
        };
        if trust_domain.is_empty() {
            return Err(fail("the trust domain is empty"));
        }
        if !trust_domain
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b))
        {
            return Err(fail(
                "the trust domain may hold only lower-case letters, digits, '.', '-' and '_'",
            ));
        }
        if !path.is_empty() {
            for segment in path[1..].split('/') {
                if segment.is_empty() {
                    return Err(fail("the path has an empty segment"));
                }
                if segment == "." || segment == ".." {
                    return Err(fail("the path has a '.' or '..' segment"));
                }
                if !segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
                {
                    return Err(fail(
                        "the path may hold only letters, digits, '.', '-', '_' and '/'",
                    ));
                }
            }
        }
        Ok(SpiffeId {
            id: id.to_owned(),
            trust_domain_end: SCHEME.len() + trust_domain.len(),
        })
    }

    /// The trust domain's name (`example.org` of `spiffe://example.org/ns/a`).
    pub fn trust_domain(&self) -> &str {
        &self.id[SCHEME.len()..self.trust_domain_end]
    }

    /// The SPIFFE ID of the trust domain itself (`spiffe://example.org`), the key of a
    /// federated bundle.
    pub fn trust_domain_id(&self) -> &str {
        &self.id[..self.trust_domain_end]
    }

    /// The ID as text.
    pub fn as_str(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trust_domain_and_path() {
        let id = SpiffeId::parse("spiffe://cluster.local/ns/flux-system/sa/source-controller")
            .expect("valid");
        assert_eq!(id.trust_domain(), "cluster.local");
        assert_eq!(id.trust_domain_id(), "spiffe://cluster.local");
        let bare = SpiffeId::parse("spiffe://example.org").expect("valid");
        assert_eq!(bare.trust_domain(), "example.org");
    }

    #[test]
    fn refuses_what_the_standard_refuses() {
        for bad in [
            "https://example.org/a",
            "spiffe://",
            "spiffe://Example.org/a",
            "spiffe://example.org/",
            "spiffe://example.org//a",
            "spiffe://example.org/a/../b",
            "spiffe://example.org/a?b",
            "spiffe://user@example.org/a",
        ] {
            let error = SpiffeId::parse(bad).expect_err(bad);
            assert!(error.to_string().contains(bad), "{error}");
        }
    }
}
