//! sops' JSON store: a token reader that keeps key order (and repeated keys) like Go's
//! `json.Decoder.Token`, numbers typed as sops types them (an `int` when the text parses as
//! an `int64`, a `float64` otherwise), and the writer `json.Marshal` + `json.Indent` with a tab (sops'
//! default) make.

use zeroize::Zeroizing;

use super::StoreError;
use crate::tree::{Branch, Branches, Item, Key, Value};

/// Deepest nesting accepted (Go's decoder allows 10000).
const MAX_DEPTH: usize = 10_000;

/// Loads a JSON file: one branch, its top-level object.
pub(super) fn load(data: &[u8]) -> Result<Branches, StoreError> {
    let mut reader = Reader {
        data,
        pos: 0,
        depth: 0,
    };
    reader.skip_space();
    match reader.peek() {
        Some(b'{') => {
            reader.pos += 1;
            Ok(Branches(vec![reader.object()?]))
        }
        None => Err(reader.error("unexpected end of JSON input")),
        Some(_) => {
            // Validate the value so a syntax error is reported as such.
            reader.value()?;
            Err(StoreError::JsonNotObject)
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn error(&self, reason: &str) -> StoreError {
        let before = &self.data[..self.pos.min(self.data.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        StoreError::Syntax {
            format: "JSON",
            line,
            column,
            reason: reason.to_string(),
        }
    }

    fn expect(&mut self, byte: u8, reason: &str) -> Result<(), StoreError> {
        self.skip_space();
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(reason))
        }
    }

    fn enter(&mut self) -> Result<(), StoreError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("exceeded max depth"));
        }
        Ok(())
    }

    /// The members of an object whose `{` was read. Like sops, the end of the input where a
    /// key is expected ends the object.
    fn object(&mut self) -> Result<Branch, StoreError> {
        self.enter()?;
        let mut branch = Branch::new();
        let mut first = true;
        loop {
            self.skip_space();
            match self.peek() {
                None => break,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                Some(b',') if !first => {
                    self.pos += 1;
                    self.skip_space();
                    if self.peek().is_none() {
                        break;
                    }
                }
                Some(_) if first => {}
                Some(_) => return Err(self.error("expected ',' or '}' after object value")),
            }
            first = false;
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string object key"));
            }
            let key = self.string()?;
            self.expect(b':', "expected ':' after object key")?;
            let value = self.value()?;
            branch.push(Item {
                key: Key::Name(key),
                value,
            });
        }
        self.depth -= 1;
        Ok(branch)
    }

    fn array(&mut self) -> Result<Vec<Value>, StoreError> {
        self.enter()?;
        let mut items = Vec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(items);
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                None => return Err(self.error("unexpected end of JSON input")),
                Some(_) => return Err(self.error("expected ',' or ']' after array element")),
            }
        }
        self.depth -= 1;
        Ok(items)
    }

    fn value(&mut self) -> Result<Value, StoreError> {
        self.skip_space();
        match self.peek() {
            None => Err(self.error("unexpected end of JSON input")),
            Some(b'{') => {
                self.pos += 1;
                Ok(Value::Map(self.object()?))
            }
            Some(b'[') => {
                self.pos += 1;
                Ok(Value::Seq(self.array()?))
            }
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("invalid character looking for beginning of value")),
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, StoreError> {
        if self.data[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("invalid literal"))
        }
    }

    fn number(&mut self) -> Result<Value, StoreError> {
        let start = self.pos;
        let b = self.data;
        let mut i = self.pos;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => i = skip_digits(b, i),
            _ => {
                self.pos = i;
                return Err(self.error("invalid character in numeric literal"));
            }
        }
        if b.get(i) == Some(&b'.') {
            i = self.digits(i + 1, "invalid character after decimal point")?;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            i = self.digits(i, "invalid character in exponent")?;
        }
        self.pos = i;
        let text = std::str::from_utf8(&b[start..i]).unwrap_or_default();
        if let Ok(n) = text.parse::<i64>() {
            return Ok(Value::Int(n));
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Value::Float(f)),
            _ => Err(self.error("number out of range")),
        }
    }

    /// The index after the digits that must start at `i`; without one, the error `message`
    /// at `i`.
    fn digits(&mut self, i: usize, message: &str) -> Result<usize, StoreError> {
        let end = skip_digits(self.data, i);
        if end == i {
            self.pos = i;
            return Err(self.error(message));
        }
        Ok(end)
    }

    /// A string at `"`: escapes decoded; invalid UTF-8 and lone surrogates become U+FFFD.
    fn string(&mut self) -> Result<String, StoreError> {
        self.pos += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unexpected end of JSON input in string"));
            };
            match c {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                0..=0x1f => return Err(self.error("invalid control character in string literal")),
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let Some(c) = self.peek() else {
            return Err(self.error("unexpected end of JSON input in string escape"));
        };
        self.pos += 1;
        let simple = match c {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let ch = self.unicode_escape()?;
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                return Ok(());
            }
            _ => return Err(self.error("invalid character in string escape code")),
        };
        out.push(simple);
        Ok(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.data.get(self.pos..self.pos + 4)?;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let n = u32::from_str_radix(text, 16).ok()?;
        self.pos += 4;
        Some(n)
    }

    fn unicode_escape(&mut self) -> Result<char, StoreError> {
        let Some(first) = self.hex4() else {
            return Err(self.error("invalid character in \\u hexadecimal character escape"));
        };
        if !(0xD800..0xE000).contains(&first) {
            return Ok(char::from_u32(first).unwrap_or('\u{FFFD}'));
        }
        if first < 0xDC00 && self.data[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            match self.hex4() {
                Some(second) if (0xDC00..0xE000).contains(&second) => {
                    let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
                }
                _ => self.pos = save,
            }
        }
        Ok('\u{FFFD}')
    }
}

/// Writes the first branch as sops does: compact `json.Marshal` pieces re-indented with tabs,
/// and a final newline. Comments are dropped.
pub(super) fn emit(branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    let branch = branches.0.first().map(Vec::as_slice).unwrap_or_default();
    let mut out = Zeroizing::new(String::new());
    write_branch(&mut out, branch, 0)?;
    out.push('\n');
    Ok(Zeroizing::new(out.as_bytes().to_vec()))
}

/// The index after the ASCII digits of `b` from `i`.
fn skip_digits(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

const INDENT: &str = "\t";

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str(INDENT);
    }
}

fn write_branch(out: &mut String, branch: &[Item], depth: usize) -> Result<(), StoreError> {
    let items: Vec<&Item> = branch
        .iter()
        .filter(|i| !matches!(i.key, Key::Comment(_)))
        .collect();
    write_items(out, depth, ('{', '}'), &items, |out, item| {
        let key = match &item.key {
            Key::Name(k) | Key::NonString(k) => k,
            Key::Comment(_) => return Ok(()),
        };
        write_string(out, key);
        out.push_str(": ");
        write_value(out, &item.value, depth + 1, key)
    })
}

/// Writes `items` between the `brackets` as `json.MarshalIndent` lays them out: one a line at
/// `depth + 1`, commas between, the closing bracket on a line of its own at `depth`; an empty
/// container as `{}` or `[]`.
fn write_items<T>(
    out: &mut String,
    depth: usize,
    (open, close): (char, char),
    items: &[T],
    mut write_item: impl FnMut(&mut String, &T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    out.push(open);
    if items.is_empty() {
        out.push(close);
        return Ok(());
    }
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(',');
        }
        newline(out, depth + 1);
        write_item(out, item)?;
    }
    newline(out, depth);
    out.push(close);
    Ok(())
}

fn write_value(out: &mut String, value: &Value, depth: usize, key: &str) -> Result<(), StoreError> {
    match value {
        Value::Map(branch) => write_branch(out, branch, depth)?,
        Value::Seq(items) => {
            let items: Vec<&Value> = items
                .iter()
                .filter(|v| !matches!(v, Value::Comment(_)))
                .collect();
            write_items(out, depth, ('[', ']'), &items, |out, item| {
                write_value(out, item, depth + 1, key)
            })?;
        }
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(StoreError::JsonValue {
                    key: key.to_string(),
                });
            }
            out.push_str(&json_float(*f));
        }
        Value::String(s) | Value::Time(s) => write_string(out, s),
        Value::Bytes(b) => write_string(out, &String::from_utf8_lossy(b)),
        Value::Comment(c) => write_string(out, &c.text),
    }
    Ok(())
}

pub(super) use goyaml::go_json::write_string;

/// Go's `encoding/json` float: shortest digits, `%f` style between 1e-6 and 1e21, otherwise
/// `%e` with a negative exponent's leading zero dropped (`1e-07` becomes `1e-7`).
fn json_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let e = go_format_float(f, 'e');
    match e.rsplit_once("e-0") {
        Some((mantissa, digit)) if digit.len() == 1 => format!("{mantissa}e-{digit}"),
        _ => e,
    }
}

/// Go's `strconv.FormatFloat(f, fmt, -1, 64)` for `fmt` in `e`, `E`, `g`, `G`.
pub(super) fn go_format_float(f: f64, fmt: char) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `d.ddde<exp>`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let upper = fmt.is_ascii_uppercase();
    let use_exp = match fmt {
        'e' | 'E' => true,
        _ => !(-4..6).contains(&exp),
    };
    if !use_exp {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{sign}{:02}", exp.abs())
}

/// A serde_json object as a branch (numbers typed like sops' JSON store).
pub(super) fn branch_from_serde(map: &serde_json::Map<String, serde_json::Value>) -> Branch {
    map.iter()
        .map(|(k, v)| Item {
            key: Key::Name(k.clone()),
            value: value_from_serde(v),
        })
        .collect()
}

fn value_from_serde(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::Seq(items.iter().map(value_from_serde).collect()),
        serde_json::Value::Object(map) => Value::Map(branch_from_serde(map)),
    }
}

/// A branch as a serde_json object; comments are dropped.
pub(super) fn serde_from_branch(branch: &[Item]) -> Result<serde_json::Value, StoreError> {
    let mut map = serde_json::Map::new();
    for item in branch {
        let key = match &item.key {
            Key::Comment(_) => continue,
            Key::Name(k) => k,
            Key::NonString(k) => {
                return Err(StoreError::NonStringKey {
                    format: "JSON",
                    key: k.clone(),
                });
            }
        };
        map.insert(key.clone(), serde_from_value(&item.value, key)?);
    }
    Ok(serde_json::Value::Object(map))
}

fn serde_from_value(value: &Value, key: &str) -> Result<serde_json::Value, StoreError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| StoreError::JsonValue {
                key: key.to_string(),
            })?,
        Value::String(s) | Value::Time(s) => serde_json::Value::String(s.clone()),
        Value::Bytes(b) => serde_json::Value::String(String::from_utf8_lossy(b).into_owned()),
        Value::Comment(c) => serde_json::Value::String(c.text.clone()),
        Value::Map(branch) => serde_from_branch(branch)?,
        Value::Seq(items) => serde_json::Value::Array(
            items
                .iter()
                .filter(|v| !matches!(v, Value::Comment(_)))
                .map(|v| serde_from_value(v, key))
                .collect::<Result<_, _>>()?,
        ),
    })
}
