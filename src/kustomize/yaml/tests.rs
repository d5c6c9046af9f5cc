use serde_json::json;

use super::*;

#[test]
fn smoke() {
    let docs = parse_documents("a: 1\n---\n---\nb: [x, 'y']\n").unwrap();
    assert_eq!(docs, vec![json!({"a": 1}), json!({"b": ["x", "y"]})]);
}
