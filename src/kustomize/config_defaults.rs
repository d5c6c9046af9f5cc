//! Kustomize's builtin field specs for the prefix/suffix, namespace, labels, annotations,
//! images, replicas and var-reference transformers.

use super::config::TransformerConfig;

/// The builtin field specs (name references excepted).
pub fn builtin_field_specs() -> TransformerConfig {
    TransformerConfig::default()
}
