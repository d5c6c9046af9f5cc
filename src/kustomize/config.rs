//! Transformer configurations: which fields each builtin transformer touches in which
//! kinds. The builtin tables are merged with a kustomization's `configurations:` files.

use serde::Deserialize;

use super::fieldspec::FieldSpec;
use super::resource::Gvk;

/// A kind whose objects are referenced by name, and the fields that hold those names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameBackReference {
    /// Group of the referenced kind.
    #[serde(default)]
    pub group: String,
    /// Version of the referenced kind.
    #[serde(default)]
    pub version: String,
    /// The referenced kind.
    #[serde(default)]
    pub kind: String,
    /// Fields (in referrer kinds) holding the referenced object's name.
    #[serde(default, rename = "fieldSpecs")]
    pub referrers: Vec<FieldSpec>,
}

impl NameBackReference {
    /// The referenced kind as a selector.
    pub fn gvk(&self) -> Gvk {
        Gvk {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// Field specs for every builtin transformer (kustomize's `TransformerConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TransformerConfig {
    /// Where `namePrefix` applies.
    #[serde(default)]
    pub name_prefix: Vec<FieldSpec>,
    /// Where `nameSuffix` applies.
    #[serde(default)]
    pub name_suffix: Vec<FieldSpec>,
    /// Where `namespace` applies (the `namespace` key of a configuration file).
    #[serde(default, rename = "namespace")]
    pub name_space: Vec<FieldSpec>,
    /// Where `commonLabels` / `labels` apply.
    #[serde(default)]
    pub common_labels: Vec<FieldSpec>,
    /// Extra fields every `labels` entry applies to (selectors and templates of custom kinds).
    #[serde(default)]
    pub labels: Vec<FieldSpec>,
    /// Where `labels` with `includeTemplates` apply.
    #[serde(default)]
    pub template_labels: Vec<FieldSpec>,
    /// Where `labels` with `includeVolumeClaimTemplates` apply.
    #[serde(default)]
    pub volume_claim_template_labels: Vec<FieldSpec>,
    /// Where `commonAnnotations` apply.
    #[serde(default)]
    pub common_annotations: Vec<FieldSpec>,
    /// Fields holding names of other objects.
    #[serde(default)]
    pub name_reference: Vec<NameBackReference>,
    /// Fields where `$(VAR)` references are expanded.
    #[serde(default)]
    pub var_reference: Vec<FieldSpec>,
    /// Fields holding container images.
    #[serde(default)]
    pub images: Vec<FieldSpec>,
    /// Fields holding replica counts.
    #[serde(default)]
    pub replicas: Vec<FieldSpec>,
}

impl TransformerConfig {
    /// Kustomize's builtin configuration.
    pub fn builtin() -> Self {
        let mut config = super::config_defaults::builtin_field_specs();
        config.name_reference = super::namereference::builtin_name_references();
        config
    }

    /// Adds `other`'s entries to this configuration, skipping exact duplicates; entries for
    /// the same referenced kind in `name_reference` are merged.
    pub fn merge(&mut self, other: TransformerConfig) {
        fn extend(into: &mut Vec<FieldSpec>, from: Vec<FieldSpec>) {
            for spec in from {
                if !into.contains(&spec) {
                    into.push(spec);
                }
            }
        }
        extend(&mut self.name_prefix, other.name_prefix);
        extend(&mut self.name_suffix, other.name_suffix);
        extend(&mut self.name_space, other.name_space);
        extend(&mut self.common_labels, other.common_labels);
        extend(&mut self.labels, other.labels);
        extend(&mut self.template_labels, other.template_labels);
        extend(
            &mut self.volume_claim_template_labels,
            other.volume_claim_template_labels,
        );
        extend(&mut self.common_annotations, other.common_annotations);
        extend(&mut self.var_reference, other.var_reference);
        extend(&mut self.images, other.images);
        extend(&mut self.replicas, other.replicas);
        for backref in other.name_reference {
            match self
                .name_reference
                .iter_mut()
                .find(|b| b.gvk() == backref.gvk())
            {
                Some(existing) => extend(&mut existing.referrers, backref.referrers),
                None => self.name_reference.push(backref),
            }
        }
    }
}
