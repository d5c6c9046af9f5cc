//! Name-reference back-fixing: after prefixes, suffixes and hashes change names, the
//! fields that referred to the old names are rewritten.

use super::config::NameBackReference;

/// Kustomize's builtin table of which fields name which kinds.
pub fn builtin_name_references() -> Vec<NameBackReference> {
    Vec::new()
}
