//! Transformer configurations: which fields each builtin transformer touches in which
//! kinds. The builtin tables are merged with a kustomization's `configurations:` files.

use std::cmp::Ordering;

use serde::Deserialize;

use super::fieldspec::FieldSpec;
use super::resource::Gvk;
use super::sort::{DEFAULT_ORDER_FIRST, DEFAULT_ORDER_LAST, kind_rank, legacy_gvk_key};

/// A kind whose objects are referenced by name, and the fields that hold those names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NameBackReference {
    /// Group of the referenced kind.
    pub group: String,
    /// Version of the referenced kind.
    pub version: String,
    /// The referenced kind.
    pub kind: String,
    /// Fields (in referrer kinds) holding the referenced object's name.
    #[serde(rename = "fieldSpecs")]
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
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct TransformerConfig {
    /// Where `namePrefix` applies.
    pub name_prefix: Vec<FieldSpec>,
    /// Where `nameSuffix` applies.
    pub name_suffix: Vec<FieldSpec>,
    /// Where `namespace` applies (the `namespace` key of a configuration file).
    #[serde(rename = "namespace")]
    pub name_space: Vec<FieldSpec>,
    /// Where `commonLabels` / `labels` apply.
    pub common_labels: Vec<FieldSpec>,
    /// Extra fields every `labels` entry applies to (selectors and templates of custom kinds).
    pub labels: Vec<FieldSpec>,
    /// Where `labels` with `includeTemplates` apply.
    pub template_labels: Vec<FieldSpec>,
    /// Where `labels` with `includeVolumeClaimTemplates` apply.
    pub volume_claim_template_labels: Vec<FieldSpec>,
    /// Where `commonAnnotations` apply.
    pub common_annotations: Vec<FieldSpec>,
    /// Fields holding names of other objects.
    pub name_reference: Vec<NameBackReference>,
    /// Fields where `$(VAR)` references are expanded.
    pub var_reference: Vec<FieldSpec>,
    /// Fields holding container images.
    pub images: Vec<FieldSpec>,
    /// Fields holding replica counts.
    pub replicas: Vec<FieldSpec>,
}

/// Why two configurations could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The same field (by kind selector and path) is listed once with `create: true` and
    /// once without.
    #[error(
        "failed to merge {table} fieldSpec: conflicting fieldspecs for path '{path}' of {selector} (create {existing} vs {incoming})"
    )]
    ConflictingFieldSpecs {
        /// The table, e.g. `namePrefix`.
        table: &'static str,
        /// The field path.
        path: String,
        /// The kind selector of the spec already present, as `group/version/kind`.
        selector: String,
        /// `create` of the spec already present.
        existing: bool,
        /// `create` of the incoming spec.
        incoming: bool,
    },
}

impl TransformerConfig {
    /// Merges `other` into this configuration as kustomize's `TransformerConfig.Merge`
    /// does: an incoming field spec is dropped when it has the same path as a spec already
    /// present and its kind selector selects that spec's selector (so a spec for every kind
    /// is dropped once a spec for one kind and the same path is present, but not the other
    /// way round); name references to the same kind merge their referrers that way. Every
    /// table is then sorted.
    pub fn merge(&mut self, other: TransformerConfig) -> Result<(), ConfigError> {
        merge_specs("namePrefix", &mut self.name_prefix, other.name_prefix)?;
        merge_specs("nameSuffix", &mut self.name_suffix, other.name_suffix)?;
        merge_specs("namespace", &mut self.name_space, other.name_space)?;
        merge_specs(
            "commonAnnotations",
            &mut self.common_annotations,
            other.common_annotations,
        )?;
        merge_specs("commonLabels", &mut self.common_labels, other.common_labels)?;
        merge_specs("labels", &mut self.labels, other.labels)?;
        merge_specs(
            "templateLabels",
            &mut self.template_labels,
            other.template_labels,
        )?;
        merge_specs(
            "volumeClaimTemplateLabels",
            &mut self.volume_claim_template_labels,
            other.volume_claim_template_labels,
        )?;
        merge_specs("varReference", &mut self.var_reference, other.var_reference)?;
        for backref in other.name_reference {
            merge_back_reference(&mut self.name_reference, backref)?;
        }
        merge_specs("images", &mut self.images, other.images)?;
        merge_specs("replicas", &mut self.replicas, other.replicas)?;
        self.sort();
        Ok(())
    }

    /// Sorts every table (and the list of name references, not their referrers) by kind
    /// selector in kustomize's order; specs with equal selectors keep their order.
    pub fn sort(&mut self) {
        for table in [
            &mut self.name_prefix,
            &mut self.name_suffix,
            &mut self.name_space,
            &mut self.common_labels,
            &mut self.labels,
            &mut self.template_labels,
            &mut self.volume_claim_template_labels,
            &mut self.common_annotations,
            &mut self.var_reference,
            &mut self.images,
            &mut self.replicas,
        ] {
            table.sort_by(|a, b| gvk_order(&a.gvk(), &b.gvk()));
        }
        self.name_reference
            .sort_by(|a, b| gvk_order(&a.gvk(), &b.gvk()));
    }
}

/// Adds each of `from` to `into` unless it matches a spec of `into` (see
/// [`TransformerConfig::merge`]); a match that differs in `create` is an error.
fn merge_specs(
    table: &'static str,
    into: &mut Vec<FieldSpec>,
    from: Vec<FieldSpec>,
) -> Result<(), ConfigError> {
    for spec in from {
        let present = into
            .iter()
            .find(|x| x.path == spec.path && spec.gvk().selects(&x.gvk()));
        match present {
            Some(x) if x.create != spec.create => {
                return Err(ConfigError::ConflictingFieldSpecs {
                    table,
                    path: spec.path,
                    selector: show_gvk(&x.gvk()),
                    existing: x.create,
                    incoming: spec.create,
                });
            }
            Some(_) => {}
            None => into.push(spec),
        }
    }
    Ok(())
}

/// Merges the referrers of `backref` into every entry for the same kind (exact group,
/// version and kind), or appends it when there is none.
fn merge_back_reference(
    into: &mut Vec<NameBackReference>,
    backref: NameBackReference,
) -> Result<(), ConfigError> {
    let target = backref.gvk();
    let mut found = false;
    for existing in into.iter_mut().filter(|b| b.gvk() == target) {
        merge_specs(
            "nameReference",
            &mut existing.referrers,
            backref.referrers.clone(),
        )?;
        found = true;
    }
    if !found {
        into.push(backref);
    }
    Ok(())
}

/// kustomize's ordering of kind selectors: first by the legacy kind order (kinds it does
/// not list, and the empty kind, in the middle), then by `group_version_kind` with empty
/// parts written `~G`, `~V`, `~K` (so they sort after named ones).
pub fn gvk_order(a: &Gvk, b: &Gvk) -> Ordering {
    let rank = |kind: &str| kind_rank(kind, &DEFAULT_ORDER_FIRST, &DEFAULT_ORDER_LAST);
    rank(&a.kind)
        .cmp(&rank(&b.kind))
        .then_with(|| legacy_gvk_key(a).cmp(&legacy_gvk_key(b)))
}

fn show_gvk(gvk: &Gvk) -> String {
    format!("{}/{}/{}", gvk.group, gvk.version, gvk.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    fn prefix_config(specs: Vec<FieldSpec>) -> TransformerConfig {
        TransformerConfig {
            name_prefix: specs,
            ..TransformerConfig::default()
        }
    }

    #[test]
    fn wildcard_spec_is_dropped_behind_kind_specific_ones() {
        // TestIssue4884: a configuration file names two kinds for `metadata/name`. Merged
        // with the builtin table the wildcard sorts last; merging that into the (empty)
        // accumulated configuration then drops it.
        let mut files = TransformerConfig::default();
        let mut file = prefix_config(vec![
            FieldSpec::for_kind("Secretish", "metadata/name", false),
            FieldSpec::for_kind("Hostish", "metadata/name", false),
        ]);
        file.sort();
        files.merge(file).unwrap();
        let mut config = TransformerConfig::builtin();
        config.merge(files).unwrap();
        assert_eq!(
            config.name_prefix,
            [
                FieldSpec::for_kind("Hostish", "metadata/name", false),
                FieldSpec::for_kind("Secretish", "metadata/name", false),
                FieldSpec::any_kind("metadata/name", false),
            ]
        );
        let mut acc = TransformerConfig::default();
        acc.merge(config).unwrap();
        assert_eq!(
            acc.name_prefix,
            [
                FieldSpec::for_kind("Hostish", "metadata/name", false),
                FieldSpec::for_kind("Secretish", "metadata/name", false),
            ]
        );
    }

    #[test]
    fn builtin_alone_survives_the_accumulator_merge() {
        let mut acc = TransformerConfig::default();
        acc.merge(TransformerConfig::builtin()).unwrap();
        acc.merge(TransformerConfig::builtin()).unwrap();
        assert_eq!(
            acc.name_prefix,
            [FieldSpec::any_kind("metadata/name", false)]
        );
        assert_eq!(acc.images.len(), TransformerConfig::builtin().images.len());
    }

    #[test]
    fn kind_specific_spec_is_kept_after_a_wildcard() {
        let mut config = prefix_config(vec![FieldSpec::any_kind("spec/x", false)]);
        config
            .merge(prefix_config(vec![
                FieldSpec::for_kind("Thing", "spec/x", false),
                FieldSpec::any_kind("spec/x", false),
                FieldSpec::any_kind("spec/y", false),
            ]))
            .unwrap();
        assert_eq!(
            config.name_prefix,
            [
                FieldSpec::for_kind("Thing", "spec/x", false),
                FieldSpec::any_kind("spec/x", false),
                FieldSpec::any_kind("spec/y", false),
            ]
        );
    }

    #[test]
    fn conflicting_create_is_an_error() {
        let mut config = prefix_config(vec![FieldSpec::for_kind("Thing", "spec/x", false)]);
        let err = config
            .merge(prefix_config(vec![FieldSpec::any_kind("spec/x", true)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("namePrefix"), "{err}");
        assert!(err.contains("spec/x"), "{err}");
        assert!(err.contains("Thing"), "{err}");
    }

    #[test]
    fn selectors_sort_in_kustomize_order() {
        let mut specs = [
            gvk("", "", ""),
            gvk("", "", "Zebra"),
            gvk("", "", "ValidatingWebhookConfiguration"),
            gvk("apps", "", "Zebra"),
            gvk("", "v1", "Zebra"),
            gvk("", "", "Deployment"),
            gvk("", "", "Namespace"),
            gvk("", "", "Apple"),
        ];
        specs.sort_by(gvk_order);
        let kinds: Vec<String> = specs
            .iter()
            .map(|g| format!("{}/{}/{}", g.group, g.version, g.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                "//Namespace",
                "//Deployment",
                "apps//Zebra",
                "/v1/Zebra",
                "//Apple",
                "//Zebra",
                "//",
                "//ValidatingWebhookConfiguration",
            ]
        );
    }

    #[test]
    fn name_references_merge_by_exact_kind_and_sort() {
        let backref = |version: &str, kind: &str, path: &str| NameBackReference {
            group: String::new(),
            version: version.into(),
            kind: kind.into(),
            referrers: vec![FieldSpec::for_kind("User", path, false)],
        };
        let mut config = TransformerConfig {
            name_reference: vec![backref("v1", "Widget", "spec/a")],
            ..TransformerConfig::default()
        };
        config
            .merge(TransformerConfig {
                name_reference: vec![
                    backref("v1", "Widget", "spec/b"),
                    backref("", "Widget", "spec/c"),
                    backref("v1", "Secret", "spec/d"),
                ],
                ..TransformerConfig::default()
            })
            .unwrap();
        let summary: Vec<(String, String, usize)> = config
            .name_reference
            .iter()
            .map(|b| (b.version.clone(), b.kind.clone(), b.referrers.len()))
            .collect();
        assert_eq!(
            summary,
            [
                ("v1".into(), "Secret".into(), 1),
                ("v1".into(), "Widget".into(), 2),
                ("".into(), "Widget".into(), 1),
            ]
        );
    }
}
