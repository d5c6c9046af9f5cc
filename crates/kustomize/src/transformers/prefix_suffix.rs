//! `namePrefix` / `nameSuffix` and the `PrefixTransformer`, `SuffixTransformer` and
//! `PrefixSuffixTransformer` plugins.

use serde_json::Value;

use super::{Create, FieldSetError, TransformError, apply_spec, scalar_text};
use crate::fieldspec::FieldSpec;
use crate::resource::{Gvk, ResMap, Resource};

/// Which end of the name is extended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Prefix,
    Suffix,
}

/// Kinds whose names are never prefixed or suffixed: CustomResourceDefinitions (any
/// group), APIServices of `apiregistration.k8s.io` and Namespaces (any group).
fn never_renamed(gvk: &Gvk) -> bool {
    match gvk.kind.as_str() {
        "CustomResourceDefinition" | "Namespace" => true,
        "APIService" => gvk.group == "apiregistration.k8s.io",
        _ => false,
    }
}

/// Prepends `prefix` at every field `field_specs` selects (kustomize's `PrefixTransformer`;
/// `namePrefix` uses the `namePrefix` table, i.e. `metadata/name`).
///
/// Kinds and specs are matched against each resource's original id. A `metadata/name`
/// spec renames the resource keeping its id history, and records a non-empty prefix in
/// [`Resource::name_prefixes`].
pub fn add_name_prefix(
    resmap: &mut ResMap,
    prefix: &str,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    extend_names(resmap, End::Prefix, prefix, field_specs)
}

/// Appends `suffix` at every field `field_specs` selects (kustomize's `SuffixTransformer`),
/// with the same rules as [`add_name_prefix`].
pub fn add_name_suffix(
    resmap: &mut ResMap,
    suffix: &str,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    extend_names(resmap, End::Suffix, suffix, field_specs)
}

fn extend_names(
    resmap: &mut ResMap,
    end: End,
    affix: &str,
    field_specs: &[FieldSpec],
) -> Result<(), TransformError> {
    for res in resmap.iter_mut() {
        let original = res.org_id().gvk;
        if never_renamed(&original) {
            continue;
        }
        for spec in field_specs {
            if !spec.selects(&original) {
                continue;
            }
            if spec.path == "metadata/name" && !affix.is_empty() {
                record(res, end, affix);
                res.remember_id();
            }
            apply_spec(res, spec, Create::Scalar, &mut |node| {
                extend_value(node, end, affix)
            })?;
        }
    }
    Ok(())
}

fn record(res: &mut Resource, end: End, affix: &str) {
    match end {
        End::Prefix => res.name_prefixes.push(affix.to_string()),
        End::Suffix => res.name_suffixes.push(affix.to_string()),
    }
}

fn extend_value(node: &mut Value, end: End, affix: &str) -> Result<(), FieldSetError> {
    let Some(current) = scalar_text(node) else {
        return Err(FieldSetError::NameNotScalar);
    };
    let extended = match end {
        End::Prefix => format!("{affix}{current}"),
        End::Suffix => format!("{current}{affix}"),
    };
    *node = Value::String(extended);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TransformerConfig;
    use serde_json::json;

    use crate::resource::test_resmap as resmap;

    #[test]
    fn prefix_and_suffix_names_and_keep_history() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "apple"}}),
        ]);
        let config = TransformerConfig::builtin();
        add_name_prefix(&mut map, "baked-", &config.name_prefix).unwrap();
        add_name_suffix(&mut map, "-pie", &config.name_suffix).unwrap();
        let res = &map.as_slice()[0];
        assert_eq!(res.name(), "baked-apple-pie");
        let names: Vec<_> = res.all_ids().map(|id| id.name).collect();
        assert_eq!(names, ["apple", "baked-apple", "baked-apple-pie"]);
        assert_eq!(res.name_prefixes, ["baked-"]);
        assert_eq!(res.name_suffixes, ["-pie"]);
    }

    #[test]
    fn skipped_kinds_keep_their_names() {
        let mut map = resmap(vec![
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}),
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.x"}}),
            json!({"apiVersion": "example.com/v1", "kind": "APIService", "metadata": {"name": "mine"}}),
            json!({"apiVersion": "example.com/v1", "kind": "Namespace", "metadata": {"name": "ns"}}),
        ]);
        add_name_prefix(&mut map, "p-", &TransformerConfig::builtin().name_prefix).unwrap();
        let names: Vec<_> = map.iter().map(|r| r.name().to_string()).collect();
        assert_eq!(names, ["a.b", "v1.x", "p-mine", "ns"]);
    }

    #[test]
    fn empty_prefix_records_nothing() {
        let mut map = resmap(vec![
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}),
        ]);
        add_name_prefix(&mut map, "", &TransformerConfig::builtin().name_prefix).unwrap();
        let res = &map.as_slice()[0];
        assert_eq!(res.name(), "s");
        assert!(res.prev_ids.is_empty());
        assert!(res.name_prefixes.is_empty());
    }

    #[test]
    fn extra_field_specs_are_prefixed_too() {
        let mut map = resmap(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"ref": "x"}})]);
        let specs = [
            FieldSpec::any_kind("metadata/name", false),
            FieldSpec::for_kind("ConfigMap", "data/ref", false),
        ];
        add_name_prefix(&mut map, "p-", &specs).unwrap();
        let res = &map.as_slice()[0];
        assert_eq!(res.obj["data"]["ref"], json!("p-x"));
        assert_eq!(res.name(), "p-c");
    }

    #[test]
    fn configured_kinds_replace_the_wildcard_name_spec() {
        // TestIssue4884_UseLocalConfigAsNameRefSource: once a configuration names kinds for
        // `metadata/name`, kustomize's config merge leaves only those specs, so other kinds
        // keep their names and the named kinds are prefixed once.
        let mut files = TransformerConfig::default();
        files
            .merge(TransformerConfig {
                name_prefix: vec![FieldSpec::for_kind("Host", "metadata/name", false)],
                ..TransformerConfig::default()
            })
            .unwrap();
        let mut config = TransformerConfig::builtin();
        config.merge(files).unwrap();
        let mut accumulated = TransformerConfig::default();
        accumulated.merge(config).unwrap();
        let mut map = resmap(vec![
            json!({"apiVersion": "local/v1", "kind": "Host", "metadata": {"name": "h"}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}),
        ]);
        add_name_prefix(&mut map, "p-", &accumulated.name_prefix).unwrap();
        let names: Vec<_> = map.iter().map(|r| r.name().to_string()).collect();
        assert_eq!(names, ["p-h", "s"]);
        assert_eq!(map.as_slice()[0].name_prefixes, ["p-"]);
        assert!(map.as_slice()[1].name_prefixes.is_empty());
    }
}
