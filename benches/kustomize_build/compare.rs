//! Checking that two builds produced the same objects: a benchmark of a wrong build is
//! meaningless, so any difference in the multiset of (kind, namespace, name) stops the bench.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// (kind, namespace, name) of one output object; "" for a missing namespace.
pub type Id = (String, String, String);

/// How many times each id occurs in one build's output.
#[derive(Debug, PartialEq, Eq)]
pub struct Ids {
    counts: BTreeMap<Id, usize>,
    documents: usize,
}

impl Ids {
    /// The ids of a YAML stream (as `kustomize build` prints it); panics naming `who` if the
    /// stream is not YAML or holds something other than objects.
    pub fn from_yaml_stream(who: &str, stdout: &[u8]) -> Ids {
        let text = std::str::from_utf8(stdout)
            .unwrap_or_else(|e| panic!("the output of {who} is not UTF-8: {e}"));
        // No budget: serde-saphyr's default caps (1,024 documents, 250,000 nodes) are below
        // what a large build prints.
        let mut options = serde_saphyr::Options::default();
        options.budget = None;
        let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options)
            .unwrap_or_else(|e| panic!("the output of {who} is not a YAML stream: {e}"));
        let objects = documents.iter().filter(|d| !d.is_null()).map(|d| {
            d.as_object()
                .unwrap_or_else(|| panic!("{who} printed a document that is not a mapping: {d}"))
        });
        Ids::from_objects(objects)
    }

    /// The ids of built objects.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Map<String, Value>>) -> Ids {
        let mut ids = Ids {
            counts: BTreeMap::new(),
            documents: 0,
        };
        for object in objects {
            *ids.counts.entry(id(object)).or_default() += 1;
            ids.documents += 1;
        }
        ids
    }

    /// How many documents (objects) the build printed.
    pub fn documents(&self) -> usize {
        self.documents
    }

    /// Objects per kind, e.g. "Deployment 500, Service 500".
    pub fn kinds(&self) -> String {
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for ((kind, _, _), n) in &self.counts {
            *kinds.entry(kind).or_default() += n;
        }
        kinds
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Panics, listing up to 10 differences each way, unless `other` holds the same ids.
    pub fn assert_same(&self, name: &str, other: &Ids, other_name: &str) {
        if self == other {
            return;
        }
        let only = |a: &Ids, b: &Ids| -> Vec<String> {
            a.counts
                .iter()
                .filter(|(id, n)| b.counts.get(*id) != Some(*n))
                .take(10)
                .map(|((kind, ns, name), n)| format!("  {kind} {ns}/{name} x{n}"))
                .collect()
        };
        panic!(
            "the builds differ: {name} printed {} documents, {other_name} {}.\n\
             In {name} and not (as often) in {other_name} (first 10):\n{}\n\
             In {other_name} and not (as often) in {name} (first 10):\n{}",
            self.documents,
            other.documents,
            only(self, other).join("\n"),
            only(other, self).join("\n"),
        );
    }
}

fn id(object: &Map<String, Value>) -> Id {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_string();
    let metadata = object.get("metadata");
    (
        text(object.get("kind")),
        text(metadata.and_then(|m| m.get("namespace"))),
        text(metadata.and_then(|m| m.get("name"))),
    )
}

/// Where two outputs first differ, as "identical" or "differ from line N".
pub fn byte_comparison(a: &[u8], b: &[u8]) -> String {
    if a == b {
        return "identical".to_string();
    }
    let a_lines = a.split(|&c| c == b'\n');
    let mut b_lines = b.split(|&c| c == b'\n');
    let mut line = 1;
    for a_line in a_lines {
        if b_lines.next() != Some(a_line) {
            break;
        }
        line += 1;
    }
    format!("differ from line {line}")
}
