//! Output order: FIFO (the default of the library Flux embeds) or kustomize's legacy kind
//! order, as `sortOptions` or a `SortOrderTransformer` ask.

use super::kustfile::{LegacySortOptions, SortOptions};
use super::resource::{Gvk, ResId, ResMap};

/// Kinds the legacy order puts first, in this order.
pub const DEFAULT_ORDER_FIRST: [&str; 22] = [
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];

/// Kinds the legacy order puts last, in this order.
pub const DEFAULT_ORDER_LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Invalid sort options.
#[derive(Debug, thiserror::Error)]
pub enum SortError {
    /// `order` is neither `fifo` nor `legacy`.
    #[error("the field 'sortOptions.order' must be one of [fifo, legacy], not {0:?}")]
    Order(String),
    /// `legacySortOptions` given with `order: fifo`.
    #[error(
        "the field 'sortOptions.legacySortOptions' is set but the selected sort order is 'fifo', not 'legacy'"
    )]
    LegacyOptionsWithFifo,
}

/// Reorders `resmap` as `options` ask (FIFO leaves it as it is).
pub fn sort(resmap: &mut ResMap, options: &SortOptions) -> Result<(), SortError> {
    match options.order.as_str() {
        "fifo" | "" if options.legacy_sort_options.is_some() => {
            Err(SortError::LegacyOptionsWithFifo)
        }
        "fifo" => Ok(()),
        "legacy" => {
            let defaults = LegacySortOptions {
                order_first: DEFAULT_ORDER_FIRST.iter().map(|s| s.to_string()).collect(),
                order_last: DEFAULT_ORDER_LAST.iter().map(|s| s.to_string()).collect(),
            };
            let legacy = options.legacy_sort_options.as_ref().unwrap_or(&defaults);
            sort_legacy(resmap, legacy);
            Ok(())
        }
        other => Err(SortError::Order(other.to_string())),
    }
}

/// A kind's rank in a legacy order: negative for `first` kinds (in their order), positive
/// for `last` kinds, zero for every other kind.
pub(crate) fn kind_rank<S: AsRef<str>>(kind: &str, first: &[S], last: &[S]) -> i64 {
    if let Some(i) = first.iter().position(|k| k.as_ref() == kind) {
        return i as i64 - first.len() as i64;
    }
    last.iter()
        .position(|k| k.as_ref() == kind)
        .map_or(0, |i| 1 + i as i64)
}

fn type_order(kind: &str, options: &LegacySortOptions) -> i64 {
    kind_rank(kind, &options.order_first, &options.order_last)
}

/// `group_version_kind` with empty parts written `~G`, `~V`, `~K`, kustomize's stable sort
/// key for kinds (empty parts sort after named ones).
pub(crate) fn legacy_gvk_key(gvk: &Gvk) -> String {
    legacy_gvk_text(&gvk.group, &gvk.version, &gvk.kind)
}

/// A group, version and kind written as [`legacy_gvk_key`] writes them (also how kustomize
/// prints a field spec's kind selector).
pub(crate) fn legacy_gvk_text(group: &str, version: &str, kind: &str) -> String {
    format!(
        "{}_{}_{}",
        or_placeholder(group, "~G"),
        or_placeholder(version, "~V"),
        or_placeholder(kind, "~K")
    )
}

/// `text`, or `placeholder` when it is empty.
fn or_placeholder<'a>(text: &'a str, placeholder: &'a str) -> &'a str {
    if text.is_empty() { placeholder } else { text }
}

fn legacy_id_key(id: &ResId) -> String {
    let gvk = format!(
        "{}.{}.{}",
        or_placeholder(&id.gvk.kind, "[noKind]"),
        or_placeholder(&id.gvk.version, "[noVer]"),
        or_placeholder(&id.gvk.group, "[noGrp]")
    );
    format!(
        "{gvk}|{}|{}",
        or_placeholder(&id.namespace, "~X"),
        or_placeholder(&id.name, "~N")
    )
}

fn sort_legacy(resmap: &mut ResMap, options: &LegacySortOptions) {
    resmap.as_mut_vec().sort_by(|a, b| {
        let (a, b) = (a.id(), b.id());
        if a.gvk != b.gvk {
            let (ia, ib) = (
                type_order(&a.gvk.kind, options),
                type_order(&b.gvk.kind, options),
            );
            if ia != ib {
                return ia.cmp(&ib);
            }
            let (ka, kb) = (legacy_gvk_key(&a.gvk), legacy_gvk_key(&b.gvk));
            let namespace_pair = a.gvk.kind == "Namespace"
                && b.gvk.kind == "Namespace"
                && (a.gvk.group.is_empty() || b.gvk.group.is_empty());
            return if namespace_pair {
                kb.cmp(&ka)
            } else {
                ka.cmp(&kb)
            };
        }
        legacy_id_key(&a).cmp(&legacy_id_key(&b))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;
    use serde_json::json;

    fn resmap(objects: &[(&str, &str, &str)]) -> ResMap {
        let mut map = ResMap::new();
        for (api_version, kind, name) in objects {
            let obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
            map.append(Resource::new(obj.as_object().cloned().unwrap()))
                .unwrap();
        }
        map
    }

    fn names(map: &ResMap) -> Vec<String> {
        map.iter()
            .map(|r| format!("{}/{}", r.kind(), r.name()))
            .collect()
    }

    #[test]
    fn legacy_order_puts_kinds_in_apply_order() {
        let mut map = resmap(&[
            (
                "admissionregistration.k8s.io/v1",
                "ValidatingWebhookConfiguration",
                "w",
            ),
            ("apps/v1", "Deployment", "b"),
            ("example.com/v1", "Widget", "x"),
            ("apps/v1", "Deployment", "a"),
            ("v1", "ConfigMap", "c"),
            ("v1", "Namespace", "ns"),
        ]);
        let options = SortOptions {
            order: "legacy".into(),
            legacy_sort_options: None,
        };
        sort(&mut map, &options).unwrap();
        assert_eq!(
            names(&map),
            [
                "Namespace/ns",
                "ConfigMap/c",
                "Deployment/a",
                "Deployment/b",
                "Widget/x",
                "ValidatingWebhookConfiguration/w"
            ]
        );
    }

    #[test]
    fn fifo_keeps_order_and_rejects_legacy_options() {
        let mut map = resmap(&[("v1", "Service", "s"), ("v1", "Namespace", "n")]);
        sort(
            &mut map,
            &SortOptions {
                order: "fifo".into(),
                legacy_sort_options: None,
            },
        )
        .unwrap();
        assert_eq!(names(&map), ["Service/s", "Namespace/n"]);
        let bad = SortOptions {
            order: "fifo".into(),
            legacy_sort_options: Some(LegacySortOptions::default()),
        };
        assert!(sort(&mut map, &bad).is_err());
        assert!(
            sort(
                &mut map,
                &SortOptions {
                    order: "random".into(),
                    legacy_sort_options: None
                }
            )
            .is_err()
        );
    }
}
