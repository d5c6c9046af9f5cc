//! Flux artifact digests: parsing `<algorithm>:<hex>` strings and streaming
//! verification of downloaded bytes.
//!
//! source-controller publishes `status.artifact.digest` in the
//! [OCI digest](https://github.com/opencontainers/go-digest) format, for example
//! `sha256:3b0c…`. Like Flux's fetcher, a bare hex string without an algorithm
//! prefix is taken to be SHA-256. Flux also accepts `blake3`; this
//! implementation supports `sha256`, `sha384` and `sha512` only and reports any
//! other algorithm as [`DigestError::UnsupportedAlgorithm`].

use std::fmt;
use std::str::FromStr;

use sha2::Digest as _;

/// Errors from parsing or verifying an artifact digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    /// The digest string was empty.
    #[error("artifact digest is empty")]
    Empty,
    /// The digest string is not of the form `<algorithm>:<hex>`, or its hex
    /// part is not valid for the algorithm.
    #[error("malformed artifact digest {digest:?}: {reason}")]
    Malformed {
        /// The digest string as given.
        digest: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The algorithm is well-formed but not supported (e.g. `blake3`).
    #[error("unsupported digest algorithm {algorithm:?}")]
    UnsupportedAlgorithm {
        /// The algorithm named in the digest string.
        algorithm: String,
    },
    /// The data did not hash to the expected digest.
    #[error("artifact digest mismatch: expected {expected}, got {actual}")]
    Mismatch {
        /// The expected digest, as `<algorithm>:<hex>`.
        expected: String,
        /// The digest computed over the data, as `<algorithm>:<hex>`.
        actual: String,
    },
}

/// A supported digest algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// SHA-256 (the Flux default).
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl Algorithm {
    /// The algorithm's name as used in digest strings (`sha256`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        }
    }

    /// Length of the hex encoding of a digest of this algorithm.
    pub fn hex_len(self) -> usize {
        match self {
            Algorithm::Sha256 => 64,
            Algorithm::Sha384 => 96,
            Algorithm::Sha512 => 128,
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "sha256" => Some(Algorithm::Sha256),
            "sha384" => Some(Algorithm::Sha384),
            "sha512" => Some(Algorithm::Sha512),
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed artifact digest: an algorithm and the expected hash value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest {
    algorithm: Algorithm,
    /// Lower-case hex encoding of the hash.
    hex: String,
}

impl Digest {
    /// Parses a digest string `<algorithm>:<hex>`.
    ///
    /// A string without `:` is treated as a SHA-256 hex digest, as Flux does.
    /// Hex digits may be upper or lower case; they are normalised to lower case.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if s.is_empty() {
            return Err(DigestError::Empty);
        }
        let (algo_name, hex) = match s.split_once(':') {
            Some(parts) => parts,
            None => ("sha256", s),
        };
        if algo_name.is_empty() {
            return Err(DigestError::Malformed {
                digest: s.to_string(),
                reason: "missing algorithm before ':'".to_string(),
            });
        }
        let algorithm =
            Algorithm::from_name(algo_name).ok_or_else(|| DigestError::UnsupportedAlgorithm {
                algorithm: algo_name.to_string(),
            })?;
        if hex.is_empty() {
            return Err(DigestError::Malformed {
                digest: s.to_string(),
                reason: "missing hex value after ':'".to_string(),
            });
        }
        if let Some(bad) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(DigestError::Malformed {
                digest: s.to_string(),
                reason: format!("invalid hex character {bad:?}"),
            });
        }
        if hex.len() != algorithm.hex_len() {
            return Err(DigestError::Malformed {
                digest: s.to_string(),
                reason: format!(
                    "{algorithm} digest must have {} hex characters, got {}",
                    algorithm.hex_len(),
                    hex.len()
                ),
            });
        }
        Ok(Digest {
            algorithm,
            hex: hex.to_ascii_lowercase(),
        })
    }

    /// The digest's algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The expected hash value, lower-case hex.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// A streaming verifier for data that should hash to this digest.
    pub fn verifier(&self) -> Verifier {
        Verifier::new(self.clone())
    }
}

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Digest::parse(s)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.algorithm, self.hex)
    }
}

#[derive(Clone)]
enum Hasher {
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

/// Streaming digest verifier: feed it chunks with [`Verifier::update`], then
/// call [`Verifier::verify`].
#[derive(Clone)]
pub struct Verifier {
    expected: Digest,
    hasher: Hasher,
    len: u64,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("expected", &self.expected.to_string())
            .field("len", &self.len)
            .finish()
    }
}

impl Verifier {
    /// Creates a verifier expecting `expected`.
    pub fn new(expected: Digest) -> Self {
        let hasher = match expected.algorithm {
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algorithm::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algorithm::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        };
        Verifier {
            expected,
            hasher,
            len: 0,
        }
    }

    /// Feeds the next chunk of data.
    pub fn update(&mut self, chunk: &[u8]) {
        self.len = self.len.saturating_add(chunk.len() as u64);
        match &mut self.hasher {
            Hasher::Sha256(h) => h.update(chunk),
            Hasher::Sha384(h) => h.update(chunk),
            Hasher::Sha512(h) => h.update(chunk),
        }
    }

    /// Number of bytes fed so far.
    pub fn bytes_seen(&self) -> u64 {
        self.len
    }

    /// The expected digest.
    pub fn expected(&self) -> &Digest {
        &self.expected
    }

    /// Finishes hashing and returns the digest of the data seen, as `<algorithm>:<hex>`.
    pub fn finish(self) -> Digest {
        let hex = match self.hasher {
            Hasher::Sha256(h) => hex::encode(h.finalize()),
            Hasher::Sha384(h) => hex::encode(h.finalize()),
            Hasher::Sha512(h) => hex::encode(h.finalize()),
        };
        Digest {
            algorithm: self.expected.algorithm,
            hex,
        }
    }

    /// Finishes hashing and checks the result against the expected digest.
    pub fn verify(self) -> Result<(), DigestError> {
        let expected = self.expected.clone();
        let actual = self.finish();
        if actual == expected {
            Ok(())
        } else {
            Err(DigestError::Mismatch {
                expected: expected.to_string(),
                actual: actual.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO_SHA256: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    const HELLO_SHA384: &str = "59e1748777448c69de6b800d7a33bbfb9ff1b463e44354c3553bcdb9c666fa90125a3c79f90397bdf5f6a13de828684f";
    const HELLO_SHA512: &str = "9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043";

    #[test]
    fn parses_supported_algorithms() {
        let d = Digest::parse(&format!("sha256:{HELLO_SHA256}")).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha256);
        assert_eq!(d.hex(), HELLO_SHA256);
        assert_eq!(d.to_string(), format!("sha256:{HELLO_SHA256}"));
        let d: Digest = format!("sha384:{HELLO_SHA384}").parse().unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha384);
        let d = Digest::parse(&format!("sha512:{HELLO_SHA512}")).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha512);
    }

    #[test]
    fn bare_hex_is_sha256_and_case_is_normalised() {
        let d = Digest::parse(&HELLO_SHA256.to_uppercase()).unwrap();
        assert_eq!(d.algorithm(), Algorithm::Sha256);
        assert_eq!(d.hex(), HELLO_SHA256);
    }

    #[test]
    fn rejects_unsupported_algorithm() {
        let err = Digest::parse(&format!("blake3:{HELLO_SHA256}")).unwrap_err();
        assert_eq!(
            err,
            DigestError::UnsupportedAlgorithm {
                algorithm: "blake3".into()
            }
        );
        assert_eq!(err.to_string(), "unsupported digest algorithm \"blake3\"");
        assert!(matches!(
            Digest::parse("md5:abcd").unwrap_err(),
            DigestError::UnsupportedAlgorithm { .. }
        ));
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Digest::parse("").unwrap_err(), DigestError::Empty);
        for bad in [
            ":abc",
            "sha256:",
            "sha256:xyz",
            "sha256:abcd",
            "abcd",
            &format!("sha512:{HELLO_SHA256}"),
            &format!("sha256:{HELLO_SHA256}:00"),
        ] {
            let err = Digest::parse(bad).unwrap_err();
            assert!(
                matches!(err, DigestError::Malformed { ref digest, .. } if digest == bad),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn verifier_accepts_matching_data_in_chunks() {
        for d in [
            format!("sha256:{HELLO_SHA256}"),
            format!("sha384:{HELLO_SHA384}"),
            format!("sha512:{HELLO_SHA512}"),
        ] {
            let mut v = Digest::parse(&d).unwrap().verifier();
            v.update(b"he");
            v.update(b"");
            v.update(b"llo");
            assert_eq!(v.bytes_seen(), 5);
            v.verify().unwrap();
        }
    }

    #[test]
    fn verifier_reports_expected_and_actual() {
        let mut v = Digest::parse(&format!("sha256:{HELLO_SHA256}"))
            .unwrap()
            .verifier();
        v.update(b"hello!");
        let err = v.verify().unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "artifact digest mismatch: expected sha256:{HELLO_SHA256}, got sha256:"
            )),
            "{msg}"
        );
        let DigestError::Mismatch { actual, .. } = err else {
            panic!("wrong variant")
        };
        assert_eq!(actual.len(), "sha256:".len() + 64);
    }
}
