//! Bounds on how much a build may copy: a transformer that writes one value into many places
//! (replacements, vars, patches selecting many targets, labels on every object) could
//! otherwise turn a few megabytes of input into gigabytes of output. Sizes are estimates:
//! the text of strings and keys plus a fixed overhead per node, roughly what the values
//! take in memory.

use serde_json::Value;

/// The most bytes (estimated, see [`extent`]) that the transformers of one build may add to
/// its objects by copying values. Far beyond what any real build copies (the API server
/// stores objects of at most about 1.5 MiB), low enough that a build of hostile input stays
/// within a few hundred megabytes of memory.
pub const MAX_COPIED_BYTES: usize = 64 << 20;

/// The most bytes (estimated, see [`extent`]) all objects of one kustomization may hold
/// once its transformers ran: each step's copies are bounded by [`MAX_COPIED_BYTES`], and
/// this bounds what many steps and kustomizations add up to.
pub const MAX_OBJECT_BYTES: usize = 128 << 20;

/// What one node counts for, besides its text.
const NODE_OVERHEAD: usize = 48;

/// A copy that would take a build past [`MAX_COPIED_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error(
    "{what}: the build would copy more than {} MiB of values (refusing an amplifying input)",
    MAX_COPIED_BYTES >> 20
)]
pub struct BudgetError {
    /// What was being copied, and where.
    pub what: String,
}

/// Estimated size of `value` in bytes. Values never nest deeper than the YAML reader's bound
/// (and what a bounded patch adds within it), so the recursion is bounded.
pub fn extent(value: &Value) -> usize {
    match value {
        Value::Array(items) => items
            .iter()
            .fold(NODE_OVERHEAD, |acc, item| acc.saturating_add(extent(item))),
        Value::Object(map) => map.iter().fold(NODE_OVERHEAD, |acc, (key, item)| {
            acc.saturating_add(key.len()).saturating_add(extent(item))
        }),
        Value::String(text) => NODE_OVERHEAD.saturating_add(text.len()),
        _ => NODE_OVERHEAD,
    }
}

/// Estimated size of an object (a map of fields), as [`extent`].
pub fn extent_map(map: &serde_json::Map<String, Value>) -> usize {
    map.iter().fold(NODE_OVERHEAD, |acc, (key, item)| {
        acc.saturating_add(key.len()).saturating_add(extent(item))
    })
}

/// A running count of copied bytes, refusing past [`MAX_COPIED_BYTES`].
#[derive(Debug, Default)]
pub struct Budget {
    used: usize,
}

impl Budget {
    /// A fresh budget.
    pub fn new() -> Self {
        Budget::default()
    }

    /// How many bytes may still be copied.
    pub fn remaining(&self) -> usize {
        MAX_COPIED_BYTES.saturating_sub(self.used)
    }

    /// Counts `bytes` more, or refuses naming `what`.
    pub fn charge(
        &mut self,
        bytes: usize,
        what: impl FnOnce() -> String,
    ) -> Result<(), BudgetError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_COPIED_BYTES {
            return Err(BudgetError { what: what() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extent_counts_text_and_nodes() {
        assert_eq!(extent(&json!("abcd")), NODE_OVERHEAD + 4);
        assert_eq!(
            extent(&json!({"ab": [1, "x"]})),
            NODE_OVERHEAD + 2 + NODE_OVERHEAD + NODE_OVERHEAD + NODE_OVERHEAD + 1
        );
    }

    #[test]
    fn budget_refuses_past_the_bound() {
        let mut budget = Budget::new();
        budget.charge(MAX_COPIED_BYTES, || "a".into()).unwrap();
        let err = budget.charge(1, || "the thing".into()).unwrap_err();
        assert!(err.to_string().starts_with("the thing: "), "{err}");
    }
}
