//! Shamir secret sharing over GF(2^8), as sops uses it to split a data key between key groups.
//!
//! sops' scheme (from HashiCorp Vault): every part is the secret's length plus one byte; byte
//! `i` of a part is a random polynomial for secret byte `i` evaluated at the part's x
//! coordinate, which is the part's last byte. Combining interpolates each byte at x = 0.
//! The field is GF(2^8) modulo x^8 + x^4 + x^3 + x + 1 (the AES field).

use zeroize::Zeroizing;

/// Why Shamir parts could not be combined. Never carries part bytes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShamirError {
    /// Fewer than two parts: a secret cannot be rebuilt from one part.
    #[error("at least two Shamir parts are needed to rebuild the data key, got {0}")]
    TooFewParts(usize),
    /// A part too short to hold a value and its x coordinate.
    #[error("Shamir part {index} is {len} bytes long, at least 2 are needed")]
    PartTooShort {
        /// Position of the part in the input (0-based).
        index: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// Parts of different lengths.
    #[error(
        "Shamir part {index} is {len} bytes long, part 0 is {expected}: all parts must be the same length"
    )]
    LengthMismatch {
        /// Position of the part in the input (0-based).
        index: usize,
        /// Its length in bytes.
        len: usize,
        /// The length of the first part.
        expected: usize,
    },
    /// Two parts with the same x coordinate.
    #[error("Shamir parts {first} and {second} share an x coordinate (duplicate part)")]
    DuplicatePart {
        /// Position of the earlier part (0-based).
        first: usize,
        /// Position of the later part (0-based).
        second: usize,
    },
}

/// Combines Shamir parts as sops does (its shamir package, from HashiCorp Vault: GF(2^8), each
/// part's last byte is its x coordinate).
///
/// All given parts are used, as sops uses every part it recovered; the result is one byte
/// shorter than a part.
pub fn combine(parts: &[Zeroizing<Vec<u8>>]) -> Result<Zeroizing<Vec<u8>>, ShamirError> {
    let xs = x_coordinates(parts)?;
    let len = parts[0].len() - 1;
    let mut ys = Zeroizing::new(vec![0u8; parts.len()]);
    let mut secret = Zeroizing::new(Vec::with_capacity(len));
    for idx in 0..len {
        for (y, part) in ys.iter_mut().zip(parts) {
            *y = part[idx];
        }
        secret.push(interpolate_at_zero(&xs, &ys));
    }
    Ok(secret)
}

/// Checks the parts' shape and returns their x coordinates (last bytes), all distinct.
fn x_coordinates(parts: &[Zeroizing<Vec<u8>>]) -> Result<Vec<u8>, ShamirError> {
    if parts.len() < 2 {
        return Err(ShamirError::TooFewParts(parts.len()));
    }
    let expected = parts[0].len();
    if expected < 2 {
        return Err(ShamirError::PartTooShort {
            index: 0,
            len: expected,
        });
    }
    let mut seen: [Option<usize>; 256] = [None; 256];
    let mut xs = Vec::with_capacity(parts.len());
    for (index, part) in parts.iter().enumerate() {
        if part.len() != expected {
            return Err(ShamirError::LengthMismatch {
                index,
                len: part.len(),
                expected,
            });
        }
        let x = part[expected - 1];
        if let Some(first) = seen[usize::from(x)] {
            return Err(ShamirError::DuplicatePart {
                first,
                second: index,
            });
        }
        seen[usize::from(x)] = Some(index);
        xs.push(x);
    }
    Ok(xs)
}

/// Lagrange interpolation of the points `(xs[i], ys[i])` at x = 0. The xs are distinct.
fn interpolate_at_zero(xs: &[u8], ys: &[u8]) -> u8 {
    let mut result = 0u8;
    for (i, (&xi, &yi)) in xs.iter().zip(ys).enumerate() {
        let mut basis = 1u8;
        for (j, &xj) in xs.iter().enumerate() {
            if i != j {
                // (0 - xj) / (xi - xj); subtraction is XOR in GF(2^8).
                basis = gf_mul(basis, gf_mul(xj, gf_inv(xi ^ xj)));
            }
        }
        result ^= gf_mul(yi, basis);
    }
    result
}

/// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1, without data-dependent branches.
fn gf_mul(a: u8, b: u8) -> u8 {
    let mut acc = 0u8;
    for bit in (0..8).rev() {
        let reduce = 0u8.wrapping_sub(acc >> 7) & 0x1b;
        let take = 0u8.wrapping_sub((b >> bit) & 1) & a;
        acc = (acc << 1) ^ reduce ^ take;
    }
    acc
}

/// Multiplicative inverse in GF(2^8): a^254 (the multiplicative group has 255 elements);
/// 0 maps to 0.
fn gf_inv(a: u8) -> u8 {
    let mut result = 1u8;
    let mut base = a;
    let mut exp = 254u32;
    while exp > 0 {
        if exp & 1 == 1 {
            result = gf_mul(result, base);
        }
        base = gf_mul(base, base);
        exp >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The secret the vectors below split (hex), 32 bytes like a sops data key.
    const SECRET: &str = "00112233445566778899aabbccddeeff0f1e2d3c4b5a69788796a5b4c3d2e1f0";

    // Parts produced by sops v3.13.2's shamir.Split(SECRET, n, k).
    const TWO_OF_TWO: [&str; 2] = [
        "e8161dfe907c1f1a7fc8c88e449dfc0ce3f150d75ee04796aaf31e8bf2dafb1201",
        "cb1f5cb2f70794ad7d3b6ed1c75dca02ccdbd7f1613535bfdd5cc8caa1c2d52f02",
    ];
    const TWO_OF_THREE: [&str; 3] = [
        "3bff1ad48019ca4d0b0698178ecdc24a63e79b8c709199f4ac342edb0cc32edb01",
        "76d652e6d7cd250395bccef848fdb68ed7f75a473dd7927bd1c9a86a46f064a602",
        "4d386a01138189391623fc540aed9a3bbb0eecf7061c62f7fa6b230589e1ab8d03",
    ];
    const THREE_OF_FIVE: [&str; 5] = [
        "6ec536984ad456e6beb0e2f76e1083f023be5b8d58a606c4b8eb977dda66b47b01",
        "0d01047dff30c0b6244db52541457a89de160da3c1188238b152535eb5c2068702",
        "63d510d6f1b1f0271264fd69e3881786f2b67b12d2e4ed848e2f6197ac76530c03",
        "738b56a383740423e6049e84a892fea8a45970acc26c7074d0fd2cec24651bed04",
        "1d5f42088df534b2d02dd6c80a5f93a788f9061dd1901fc8ef801e253dd14e6605",
    ];
    /// shamir.Split([]byte("x"), 3, 2): a one-byte secret.
    const ONE_BYTE: [&str; 3] = ["4101", "0a02", "3303"];

    fn parts(hexes: &[&str]) -> Vec<Zeroizing<Vec<u8>>> {
        hexes
            .iter()
            .map(|h| Zeroizing::new(hex::decode(h).unwrap()))
            .collect()
    }

    fn combined_hex(hexes: &[&str]) -> String {
        hex::encode(combine(&parts(hexes)).unwrap().as_slice())
    }

    #[test]
    fn field_arithmetic() {
        // 0x53 * 0xca = 1 in the AES field (the classic inverse pair).
        assert_eq!(gf_mul(0x53, 0xca), 1);
        assert_eq!(gf_inv(0x53), 0xca);
        assert_eq!(gf_inv(0), 0);
        for a in 1..=255u8 {
            assert_eq!(gf_mul(a, gf_inv(a)), 1, "inverse of {a}");
        }
        assert_eq!(gf_mul(0x57, 0x83), 0xc1); // FIPS-197 example
    }

    #[test]
    fn two_of_two() {
        assert_eq!(combined_hex(&TWO_OF_TWO), SECRET);
        assert_eq!(combined_hex(&[TWO_OF_TWO[1], TWO_OF_TWO[0]]), SECRET);
    }

    #[test]
    fn two_of_three_every_pair() {
        for (a, b) in [(0, 1), (0, 2), (1, 2), (2, 0)] {
            assert_eq!(
                combined_hex(&[TWO_OF_THREE[a], TWO_OF_THREE[b]]),
                SECRET,
                "parts {a} and {b}"
            );
        }
        // All three parts (more than the threshold), as sops combines every part it has.
        assert_eq!(combined_hex(&TWO_OF_THREE), SECRET);
    }

    #[test]
    fn three_of_five() {
        for trio in [[0, 1, 2], [0, 2, 4], [1, 3, 4], [4, 3, 0], [2, 3, 4]] {
            let hexes: Vec<&str> = trio.iter().map(|&i| THREE_OF_FIVE[i]).collect();
            assert_eq!(combined_hex(&hexes), SECRET, "parts {trio:?}");
        }
        assert_eq!(combined_hex(&THREE_OF_FIVE), SECRET);
        // Below the threshold the result is some other value, not the secret.
        assert_ne!(combined_hex(&THREE_OF_FIVE[..2]), SECRET);
    }

    #[test]
    fn one_byte_secret() {
        assert_eq!(combine(&parts(&ONE_BYTE[1..])).unwrap().as_slice(), b"x");
    }

    #[test]
    fn too_few_parts() {
        assert_eq!(combine(&[]).unwrap_err(), ShamirError::TooFewParts(0));
        assert_eq!(
            combine(&parts(&TWO_OF_TWO[..1])).unwrap_err(),
            ShamirError::TooFewParts(1)
        );
    }

    #[test]
    fn duplicate_parts() {
        let err =
            combine(&parts(&[TWO_OF_THREE[1], TWO_OF_THREE[0], TWO_OF_THREE[1]])).unwrap_err();
        assert_eq!(
            err,
            ShamirError::DuplicatePart {
                first: 0,
                second: 2
            }
        );
        // Same x coordinate from different splits is a duplicate too.
        let err = combine(&parts(&[TWO_OF_TWO[0], TWO_OF_THREE[0]])).unwrap_err();
        assert!(matches!(err, ShamirError::DuplicatePart { .. }));
    }

    #[test]
    fn inconsistent_lengths() {
        let mut ps = parts(&TWO_OF_THREE[..2]);
        ps[1].pop();
        assert_eq!(
            combine(&ps).unwrap_err(),
            ShamirError::LengthMismatch {
                index: 1,
                len: 32,
                expected: 33
            }
        );
        let short = vec![Zeroizing::new(vec![1u8]), Zeroizing::new(vec![2u8])];
        assert_eq!(
            combine(&short).unwrap_err(),
            ShamirError::PartTooShort { index: 0, len: 1 }
        );
    }

    #[test]
    fn errors_do_not_show_part_bytes() {
        let ps = parts(&[TWO_OF_THREE[0], TWO_OF_THREE[0]]);
        let msg = combine(&ps).unwrap_err().to_string();
        assert!(!msg.contains("3bff"), "{msg}");
    }
}
