//! The few protocol buffers messages of the SPIFFE Workload API and Broker API this crate
//! sends and reads, in the protobuf wire format (proto3: unknown fields skipped, absent
//! fields default).

use bytes::{BufMut, Bytes, BytesMut};

/// A message that is not valid protobuf.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed protobuf message: {0}")]
pub struct DecodeError(&'static str);

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Writes fields of a message.
#[derive(Default)]
pub struct Encoder {
    buf: BytesMut,
}

impl Encoder {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.put_u8((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buf.put_u8(value as u8);
    }

    /// A length-delimited field (string, bytes or nested message); proto3 omits an empty one.
    pub fn bytes(&mut self, field: u32, value: &[u8]) -> &mut Self {
        if !value.is_empty() {
            self.varint(u64::from(field) << 3 | u64::from(LEN));
            self.varint(value.len() as u64);
            self.buf.put_slice(value);
        }
        self
    }

    /// A nested message, written even when empty (its presence matters).
    pub fn message(&mut self, field: u32, value: &[u8]) -> &mut Self {
        self.varint(u64::from(field) << 3 | u64::from(LEN));
        self.varint(value.len() as u64);
        self.buf.put_slice(value);
        self
    }

    /// The encoded message.
    pub fn finish(&mut self) -> Bytes {
        std::mem::take(&mut self.buf).freeze()
    }
}

/// Reads the fields of a message in order.
pub struct Decoder<'a> {
    rest: &'a [u8],
}

/// A field's value: length-delimited ones as their bytes, the others skipped.
pub enum Value<'a> {
    /// A string, bytes or nested message.
    Bytes(&'a [u8]),
    /// A scalar this crate does not read.
    Other,
}

impl<'a> Decoder<'a> {
    /// A decoder over `message`.
    pub fn new(message: &'a [u8]) -> Self {
        Decoder { rest: message }
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or(DecodeError("truncated varint"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint longer than ten bytes"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < len {
            return Err(DecodeError("field longer than the message"));
        }
        let (value, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(value)
    }

    /// The next field's number and value; `None` at the end of the message.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, DecodeError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3).map_err(|_| DecodeError("field number too large"))?;
        let value = match (key & 7) as u8 {
            VARINT => {
                self.varint()?;
                Value::Other
            }
            FIXED64 => {
                self.take(8)?;
                Value::Other
            }
            LEN => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| DecodeError("length too large"))?;
                Value::Bytes(self.take(len)?)
            }
            FIXED32 => {
                self.take(4)?;
                Value::Other
            }
            _ => return Err(DecodeError("unsupported wire type")),
        };
        Ok(Some((field, value)))
    }
}

/// A field's bytes as UTF-8 text.
pub fn text(value: &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(value.to_vec()).map_err(|_| DecodeError("string field is not UTF-8"))
}

/// A `map<string, bytes>` entry: its key (field 1) and value (field 2).
pub fn map_entry(entry: &[u8]) -> Result<(String, Vec<u8>), DecodeError> {
    let mut decoder = Decoder::new(entry);
    let (mut key, mut value) = (String::new(), Vec::new());
    while let Some((field, v)) = decoder.next()? {
        match (field, v) {
            (1, Value::Bytes(b)) => key = text(b)?,
            (2, Value::Bytes(b)) => value = b.to_vec(),
            _ => {}
        }
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_length_delimited_fields_and_skips_scalars() {
        let inner = Encoder::default().bytes(1, b"pods").finish();
        let mut encoder = Encoder::default();
        encoder
            .message(1, &inner)
            .bytes(2, &[7u8; 300])
            .bytes(3, b"");
        let mut message = encoder.finish().to_vec();
        // A varint field 4 and a fixed32 field 5, which readers skip.
        message.extend_from_slice(&[4 << 3, 0x96, 0x01, (5 << 3) | 5, 1, 2, 3, 4]);
        let mut decoder = Decoder::new(&message);
        let mut seen = Vec::new();
        while let Some((field, value)) = decoder.next().expect("valid") {
            seen.push(match value {
                Value::Bytes(b) => (field, b.len()),
                Value::Other => (field, 0),
            });
        }
        assert_eq!(seen, [(1, inner.len()), (2, 300), (4, 0), (5, 0)]);
    }

    #[test]
    fn truncated_messages_are_errors() {
        let message = Encoder::default().bytes(2, b"abcdef").finish();
        let mut decoder = Decoder::new(&message[..4]);
        assert!(decoder.next().is_err());
        assert!(Decoder::new(&[0x80]).next().is_err());
    }
}
