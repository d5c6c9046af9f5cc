//! What applying a Kustomization's build of a local directory would change on a live
//! cluster, as `kustomize-controller diff` prints it: the controller's render pipeline
//! ([`render::render`]) with the post-build variables and decryption keys read from the
//! cluster as the controller reads them, a server-side dry-run of every object with the
//! controller's field manager, and the objects a prune would delete. Nothing is written.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::api::Kustomization;
use crate::cluster::reads::ControllerReads;
use crate::render::keys::ClusterKeys;
use crate::render::variables::ClusterVariables;
use crate::render::{self, RenderError, SecretValues};
use apply::{AppliedObjects, Applier, ApplyOptions, IgnoreRules, ObjectId, Owner, Preview};

/// What to compare with the cluster.
pub struct DiffInput {
    /// The Kustomization: its build fields, post-build variables and decryption apply.
    pub kustomization: Kustomization,
    /// The inventory of the live Kustomization, whose objects the build may drop.
    pub inventory: Vec<ObjectId>,
    /// The directory built in place of `spec.path` in the source.
    pub dir: PathBuf,
    /// Files may only be read under this directory.
    pub root: PathBuf,
    /// How the build renders: the controller's strictness and remote bases rule.
    pub settings: render::Settings,
}

/// Why there is no diff. Messages name the object or file at fault and never quote a
/// decrypted or Secret value.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The render (keys, build, variables, substitution) failed, as in the controller.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// `spec.ignore` does not compile.
    #[error("{0}")]
    Ignore(String),
    /// A dry-run or a read was refused.
    #[error("{0}")]
    Apply(String),
}

/// The changes applying `input` would make, and the values to keep out of any output.
pub async fn preview(
    client: &Client,
    input: DiffInput,
) -> Result<(Vec<Preview>, SecretValues), DiffError> {
    let ks = input.kustomization;
    // The keys and variables the controller would read, with its default decryption
    // settings: `diff` has no `--sops-age-secret` nor a default decryption ServiceAccount.
    let inputs = render::Inputs {
        kustomization: &ks,
        root: &input.root,
        dir: &input.dir,
        plain: None,
    };
    let reads = ControllerReads::direct(client.clone());
    let keys = ClusterKeys {
        reader: Arc::new(reads.clone()),
        settings: &Default::default(),
    };
    let variables = ClusterVariables { reader: &reads };
    let render::Rendered {
        objects, secrets, ..
    } = render::render(inputs, keys, variables, input.settings).await?;
    let ignore = IgnoreRules::compile(ks.spec.ignore.as_deref().unwrap_or_default())
        .map_err(|e| DiffError::Ignore(e.to_string()))?;
    let applier = Applier::new(
        client.clone(),
        Owner {
            name: ks.name_any(),
            namespace: ks.namespace().unwrap_or_default(),
        },
        4,
        ApplyOptions {
            force: ks.spec.force,
            ignore,
            ..ApplyOptions::default()
        },
        Duration::from_secs(30),
        AppliedObjects::default(),
    );
    let prunable = if ks.spec.prune {
        input.inventory
    } else {
        Vec::new()
    };
    let previews = applier
        .preview(objects, &prunable)
        .await
        .map_err(|e| DiffError::Apply(secrets.redact(&e.to_string())))?;
    Ok((previews, secrets))
}

/// The changes as a user reads them: `► Kind/namespace/name created|drifted|deleted`; for a
/// drifted object, the fields the apply would change, one a line with the managers that wrote
/// them (`  .data.value (kubectl-edit)`), then a unified diff of the YAML; for a new one, the
/// whole object. Server
/// bookkeeping (managedFields, resourceVersion, status, ...) is left out, Secret values are
/// masked (`***`, or `*** (before)` / `*** (after)` where they change), and any value in
/// `secrets` is masked wherever it appears.
pub fn render(previews: &[Preview], secrets: &SecretValues) -> String {
    let mut out = String::new();
    for preview in previews {
        match preview {
            Preview::Create { id, desired } => {
                let mut desired = clean(desired);
                mask_secret(None, Some(&mut desired));
                out.push_str(&format!("► {} created\n", id.describe()));
                out.push_str(&unified(&Value::Null, &desired));
            }
            Preview::Configure {
                id,
                live,
                desired,
                drift,
            } => {
                let (mut live, mut desired) = (clean(live), clean(desired));
                mask_secret(Some(&mut live), Some(&mut desired));
                out.push_str(&format!("► {} drifted\n", id.describe()));
                for field in &drift.fields {
                    out.push_str("  ");
                    out.push_str(&field.path);
                    if !field.managers.is_empty() {
                        out.push_str(&format!(" ({})", field.managers.join(", ")));
                    }
                    out.push('\n');
                }
                out.push_str(&unified(&live, &desired));
            }
            Preview::Delete { id, .. } => {
                out.push_str(&format!("► {} deleted\n", id.describe()));
            }
        }
    }
    secrets.redact(&out)
}

/// The object without what the API server keeps for itself.
fn clean(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "managedFields",
                "resourceVersion",
                "uid",
                "generation",
                "creationTimestamp",
            ] {
                metadata.remove(field);
            }
            if let Some(annotations) = metadata
                .get_mut("annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(crate::api::names::KUBECTL_LAST_APPLIED_ANNOTATION);
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
    object
}

/// Masks the values of a core Secret's `data` and `stringData`, marking those that differ
/// between `live` and `desired`.
fn mask_secret(mut live: Option<&mut Value>, mut desired: Option<&mut Value>) {
    let is_secret = |object: &Option<&mut Value>| {
        object.as_ref().is_some_and(|o| {
            o.get("kind").and_then(Value::as_str) == Some("Secret")
                && o.get("apiVersion").and_then(Value::as_str) == Some("v1")
        })
    };
    if !is_secret(&live) && !is_secret(&desired) {
        return;
    }
    for field in ["data", "stringData"] {
        let before = live.as_deref().and_then(|o| o.get(field)).cloned();
        let after = desired.as_deref().and_then(|o| o.get(field)).cloned();
        let masked = |values: &Option<Value>, other: &Option<Value>, changed: &str| {
            values.as_ref().and_then(Value::as_object).map(|values| {
                values
                    .iter()
                    .map(|(key, value)| {
                        let same = other
                            .as_ref()
                            .and_then(|o| o.get(key))
                            .is_some_and(|o| o == value);
                        let shown = if same || other.is_none() {
                            "***".to_string()
                        } else {
                            format!("*** ({changed})")
                        };
                        (key.clone(), Value::String(shown))
                    })
                    .collect::<serde_json::Map<_, _>>()
            })
        };
        let (masked_before, masked_after) = (
            masked(&before, &after, "before"),
            masked(&after, &before, "after"),
        );
        if let (Some(object), Some(values)) = (live.as_deref_mut(), masked_before) {
            object[field] = Value::Object(values);
        }
        if let (Some(object), Some(values)) = (desired.as_deref_mut(), masked_after) {
            object[field] = Value::Object(values);
        }
    }
}

/// A unified diff of two objects' YAML (`Null` for none).
fn unified(live: &Value, desired: &Value) -> String {
    let yaml = |value: &Value| {
        if value.is_null() {
            String::new()
        } else {
            goyaml::to_yaml(value)
        }
    };
    let (before, after) = (yaml(live), yaml(desired));
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header("live", "after apply")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use apply::drift::{Drift, DriftedField};
    use serde_json::json;

    fn id(kind: &str, name: &str) -> ObjectId {
        ObjectId {
            namespace: "apps".into(),
            name: name.into(),
            group: String::new(),
            kind: kind.into(),
            version: "v1".into(),
        }
    }

    #[test]
    fn a_drifted_object_lists_its_fields_then_a_unified_diff_without_server_bookkeeping() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "apps", "resourceVersion": "42",
                "managedFields": [{"manager": "kubectl"}], "uid": "u"},
            "data": {"value": "1"}});
        let mut desired = live.clone();
        desired["data"]["value"] = json!("2");
        let text = render(
            &[Preview::Configure {
                id: id("ConfigMap", "a"),
                live: Box::new(live),
                desired: Box::new(desired),
                drift: Drift {
                    fields: vec![DriftedField {
                        path: ".data.value".into(),
                        managers: vec!["kubectl-edit".into()],
                    }],
                    deleted: false,
                },
            }],
            &SecretValues::new(),
        );
        assert!(
            text.starts_with(
                "► ConfigMap/apps/a drifted\n  .data.value (kubectl-edit)\n--- live\n+++ after apply\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("-  value: \"1\"\n") && text.contains("+  value: \"2\"\n"),
            "{text}"
        );
        assert!(
            !text.contains("resourceVersion") && !text.contains("managedFields"),
            "{text}"
        );
    }

    #[test]
    fn secret_values_are_masked_and_changes_still_show() {
        let live = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "apps"},
            "data": {"kept": "a2VwdA==", "changed": "b2xk"}});
        let mut desired = live.clone();
        desired["data"]["changed"] = json!("bmV3");
        let text = render(
            &[Preview::Configure {
                id: id("Secret", "s"),
                live: Box::new(live),
                desired: Box::new(desired),
                drift: Drift::default(),
            }],
            &SecretValues::new(),
        );
        assert!(
            !text.contains("b2xk") && !text.contains("bmV3") && !text.contains("a2VwdA=="),
            "{text}"
        );
        assert!(
            text.contains("-  changed: '*** (before)'")
                && text.contains("+  changed: '*** (after)'"),
            "{text}"
        );
        assert!(text.contains("   kept: '***'"), "{text}");
    }

    #[test]
    fn new_and_pruned_objects_are_listed() {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "n", "namespace": "apps"}, "data": {"token": "hunter2"}});
        let mut secrets = SecretValues::new();
        secrets.add("hunter2");
        let text = render(
            &[
                Preview::Create {
                    id: id("ConfigMap", "n"),
                    desired,
                },
                Preview::Delete {
                    id: id("ConfigMap", "old"),
                    live: Box::new(json!({})),
                },
            ],
            &secrets,
        );
        assert!(text.contains("► ConfigMap/apps/n created\n"), "{text}");
        assert!(text.contains("+kind: ConfigMap\n"), "{text}");
        assert!(text.ends_with("► ConfigMap/apps/old deleted\n"), "{text}");
        assert!(
            !text.contains("hunter2"),
            "a decrypted value never shows: {text}"
        );
    }
}
