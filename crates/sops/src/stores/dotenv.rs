//! sops' dotenv store: `KEY=value` lines (split at the first `=`, nothing trimmed), `#`
//! comment lines, `\n` in values written as the two characters `\` `n`, and the metadata
//! flattened into `sops_...` keys.

use zeroize::Zeroizing;

use super::{StoreError, flatten, key_text, value_to_string};
use crate::tree::{Branch, Branches, Comment, Item, Key, Value};

const SOPS_PREFIX: &str = "sops_";

/// Loads a dotenv file: one branch of string values and comments.
pub(super) fn load(data: &[u8]) -> Result<Branches, StoreError> {
    let text = std::str::from_utf8(data).map_err(|_| StoreError::NotUtf8 { format: "dotenv" })?;
    let mut branch = Branch::new();
    for (index, line) in text.split('\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            branch.push(Item {
                key: Key::Comment(Comment {
                    text: comment.to_string(),
                    inline: false,
                }),
                value: Value::Null,
            });
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or(StoreError::DotenvLine { line: index + 1 })?;
        branch.push(Item {
            key: Key::Name(key.to_string()),
            value: Value::String(value.replace("\\n", "\n")),
        });
    }
    Ok(Branches(vec![branch]))
}

/// Moves the `sops_` keys of the first branch into the metadata and unflattens it.
pub(super) fn split_metadata(mut branches: Branches) -> Result<(Branches, Branch), StoreError> {
    let mut flat = Branch::new();
    if let Some(branch) = branches.0.first_mut() {
        let mut i = 0;
        while i < branch.len() {
            let stripped = match &branch[i].key {
                Key::Name(k) => k.strip_prefix(SOPS_PREFIX).map(str::to_string),
                _ => None,
            };
            match stripped {
                Some(key) => {
                    let item = branch.remove(i);
                    flat.push(Item {
                        key: Key::Name(key),
                        value: item.value,
                    });
                }
                None => i += 1,
            }
        }
    }
    if flat.is_empty() {
        return Err(StoreError::MetadataNotFound);
    }
    Ok((branches, flatten::unflatten(flat)?))
}

/// Writes the first branch as `KEY=value` lines.
pub(super) fn emit(branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    let mut out = Zeroizing::new(String::new());
    let branch = branches.0.first().map(Vec::as_slice).unwrap_or_default();
    for item in branch {
        if matches!(item.value, Value::Map(_) | Value::Seq(_)) {
            return Err(StoreError::ComplexValue {
                format: "dotenv",
                key: key_text(&item.key),
            });
        }
        match (&item.key, &item.value) {
            (Key::Comment(c), _) => {
                out.push('#');
                out.push_str(&c.text);
            }
            (key, Value::String(s)) => {
                out.push_str(&key_text(key));
                out.push('=');
                out.push_str(&s.replace('\n', "\\n"));
            }
            (key, value) => {
                out.push_str(&key_text(key));
                out.push('=');
                out.push_str(&value_to_string(value));
            }
        }
        out.push('\n');
    }
    Ok(Zeroizing::new(out.as_bytes().to_vec()))
}
