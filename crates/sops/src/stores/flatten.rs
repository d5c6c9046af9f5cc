//! sops' flattened metadata keys (`key_groups__list_0__map_age__list_0__map_recipient`) turned
//! back into nested maps and lists, as `stores/flatten.go` unflattens them: map keys sorted,
//! list indices dense from 0.

use std::collections::BTreeMap;

use super::StoreError;
use crate::tree::{Branch, Item, Key, Value};

const MAP_SEPARATOR: &str = "__map_";
const LIST_SEPARATOR: &str = "__list_";

enum Token {
    Map(String),
    List(usize),
}

/// Splits a flattened key at the separators. A list index that is not a number is 0, as Go's
/// ignored `Atoi` error gives.
fn tokenize(path: &str) -> Vec<Token> {
    let bytes = path.as_bytes();
    let mut tokens = Vec::new();
    let mut is_list = false;
    let mut start = 0;
    let mut i = 0;
    let finish = |tokens: &mut Vec<Token>, text: &str, is_list: bool| {
        tokens.push(if is_list {
            Token::List(text.parse().unwrap_or(0))
        } else {
            Token::Map(text.to_string())
        });
    };
    while i < bytes.len() {
        let separator = if bytes[i..].starts_with(MAP_SEPARATOR.as_bytes()) {
            Some((MAP_SEPARATOR, false))
        } else if bytes[i..].starts_with(LIST_SEPARATOR.as_bytes()) {
            Some((LIST_SEPARATOR, true))
        } else {
            None
        };
        match separator {
            Some((sep, list)) => {
                finish(&mut tokens, &path[start..i], is_list);
                is_list = list;
                i += sep.len();
                start = i;
            }
            None => i += 1,
        }
    }
    finish(&mut tokens, &path[start..], is_list);
    tokens
}

#[derive(Default)]
struct Node {
    value: Option<Value>,
    subkeys: BTreeMap<String, Node>,
    indices: BTreeMap<usize, Node>,
}

fn place(root: &mut Node, tokens: Vec<Token>, value: Value, key: &str) -> Result<(), StoreError> {
    let mut node = root;
    for token in tokens {
        node = match token {
            Token::Map(k) => node.subkeys.entry(k).or_default(),
            Token::List(i) => node.indices.entry(i).or_default(),
        };
    }
    if node.value.is_some() {
        return Err(StoreError::Unflatten {
            key: key.to_string(),
            reason: "duplicate value",
        });
    }
    node.value = Some(value);
    Ok(())
}

fn convert(node: Node) -> Result<Value, &'static str> {
    let kinds = usize::from(node.value.is_some())
        + usize::from(!node.subkeys.is_empty())
        + usize::from(!node.indices.is_empty());
    if kinds > 1 {
        return Err("type mismatch");
    }
    if let Some(value) = node.value {
        return Ok(value);
    }
    if !node.indices.is_empty() {
        let count = node.indices.len();
        if node.indices.keys().next_back() != Some(&(count - 1)) {
            return Err("incomplete list");
        }
        let items = node
            .indices
            .into_values()
            .map(convert)
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Value::Seq(items));
    }
    let branch = node
        .subkeys
        .into_iter()
        .map(|(k, v)| {
            Ok(Item {
                key: Key::Name(k),
                value: convert(v)?,
            })
        })
        .collect::<Result<Branch, &'static str>>()?;
    Ok(Value::Map(branch))
}

/// Unflattens a branch of flattened keys (comments are skipped).
pub(super) fn unflatten(branch: Branch) -> Result<Branch, StoreError> {
    let mut root = Node::default();
    for item in branch {
        match item.key {
            Key::Comment(_) => {}
            Key::Name(key) => place(&mut root, tokenize(&key), item.value, &key)?,
            Key::NonString(key) => {
                return Err(StoreError::Unflatten {
                    key,
                    reason: "non-string key",
                });
            }
        }
    }
    match convert(root) {
        Ok(Value::Map(branch)) => Ok(branch),
        Ok(_) => Err(StoreError::Unflatten {
            key: String::new(),
            reason: "cannot find root",
        }),
        Err(reason) => Err(StoreError::Unflatten {
            key: String::new(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn nested_lists_and_maps_come_back_sorted() {
        let flat = vec![
            Item {
                key: Key::Name("version".into()),
                value: s("3"),
            },
            Item {
                key: Key::Name("age__list_0__map_recipient".into()),
                value: s("r"),
            },
            Item {
                key: Key::Name("age__list_0__map_enc".into()),
                value: s("e"),
            },
            Item {
                key: Key::Name("age__list_1__map_enc".into()),
                value: s("f"),
            },
        ];
        let tree = unflatten(flat).unwrap();
        let keys: Vec<_> = tree.iter().map(|i| i.key.clone()).collect();
        assert_eq!(
            keys,
            vec![Key::Name("age".into()), Key::Name("version".into())]
        );
        let Value::Seq(list) = &tree[0].value else {
            panic!("age is not a list")
        };
        assert_eq!(list.len(), 2);
        let Value::Map(first) = &list[0] else {
            panic!("not a map")
        };
        assert_eq!(first[0].key, Key::Name("enc".into()));
        assert_eq!(first[1].value, s("r"));
    }

    #[test]
    fn gaps_and_mismatches_are_errors() {
        let gap = vec![Item {
            key: Key::Name("a__list_1".into()),
            value: s("x"),
        }];
        assert!(unflatten(gap).is_err());
        let mismatch = vec![
            Item {
                key: Key::Name("a".into()),
                value: s("x"),
            },
            Item {
                key: Key::Name("a__map_b".into()),
                value: s("y"),
            },
        ];
        assert!(unflatten(mismatch).is_err());
    }
}
