//! The build stage: turns the directory at `spec.path` into the list of objects to apply.
//!
//! This stage reads plain manifests: every `.yaml`/`.yml` file under the directory,
//! recursively, in lexical path order. Kustomize overlays and the Kustomization fields that
//! need kustomize are refused with an error naming what is missing; the native kustomize
//! engine takes this stage's place behind the same [`build`] function.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::api::KustomizationSpec;
use crate::manifest::{ManifestError, Object, parse_objects};

/// Names kustomize recognises as a kustomization file.
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Why a build failed. Every variant names the file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A manifest could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// Path relative to the artifact root.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A manifest is not valid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Two manifests define the same object.
    #[error("duplicate object {object}: defined in {first} and {second}")]
    Duplicate {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// The file that defined it first.
        first: String,
        /// The file that defined it again.
        second: String,
    },
    /// The directory holds a kustomization file, which needs the kustomize engine.
    #[error("{path}: kustomize overlays are not supported by this build stage yet")]
    KustomizationFile {
        /// Path of the kustomization file relative to the artifact root.
        path: String,
    },
    /// A Kustomization field that needs the kustomize engine.
    #[error("spec.{field} is not supported by this build stage yet")]
    UnsupportedField {
        /// The spec field.
        field: &'static str,
    },
}

/// Builds the objects under `dir` (inside the artifact extracted at `root`) for `spec`, then
/// lays `spec.commonMetadata` over every object as Flux does.
pub fn build(root: &Path, dir: &Path, spec: &KustomizationSpec) -> Result<Vec<Object>, BuildError> {
    refuse_kustomize_only_fields(spec)?;
    let mut files = Vec::new();
    collect_manifests(root, dir, &mut files)?;
    let mut objects: Vec<Object> = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    let mut ids = HashSet::new();
    for file in files {
        let origin = relative(root, &file);
        let text = std::fs::read_to_string(&file).map_err(|source| BuildError::Read {
            path: origin.clone(),
            source,
        })?;
        for object in parse_objects(&text, &origin)? {
            let id = identity(&object);
            if !ids.insert(id.clone()) {
                let first = seen
                    .iter()
                    .find(|(seen_id, _)| *seen_id == id)
                    .map(|(_, f)| f.clone())
                    .unwrap_or_default();
                return Err(BuildError::Duplicate {
                    object: object.describe(),
                    first,
                    second: origin,
                });
            }
            seen.push((id, origin.clone()));
            objects.push(object);
        }
    }
    if let Some(common) = &spec.common_metadata {
        for object in &mut objects {
            if let Some(labels) = &common.labels {
                object.set_labels(labels);
            }
            if let Some(annotations) = &common.annotations {
                object.set_annotations(annotations);
            }
        }
    }
    Ok(objects)
}

fn refuse_kustomize_only_fields(spec: &KustomizationSpec) -> Result<(), BuildError> {
    let used = [
        ("targetNamespace", spec.target_namespace.is_some()),
        ("namePrefix", spec.name_prefix.is_some()),
        ("nameSuffix", spec.name_suffix.is_some()),
        (
            "patches",
            spec.patches.as_ref().is_some_and(|p| !p.is_empty()),
        ),
        (
            "images",
            spec.images.as_ref().is_some_and(|i| !i.is_empty()),
        ),
        (
            "components",
            spec.components.as_ref().is_some_and(|c| !c.is_empty()),
        ),
        (
            "buildMetadata",
            spec.build_metadata.as_ref().is_some_and(|b| !b.is_empty()),
        ),
    ];
    match used.into_iter().find(|(_, used)| *used) {
        Some((field, _)) => Err(BuildError::UnsupportedField { field }),
        None => Ok(()),
    }
}

fn collect_manifests(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    let read_error = |source| BuildError::Read {
        path: relative(root, dir),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error)?;
    entries.sort();
    if let Some(file) = entries.iter().find(|p| is_kustomization_file(p)) {
        return Err(BuildError::KustomizationFile {
            path: relative(root, file),
        });
    }
    for path in entries {
        // The artifact was extracted with every symlink kept inside the root, so following
        // them cannot leave it; metadata() follows links on purpose.
        let metadata = std::fs::metadata(&path).map_err(|source| BuildError::Read {
            path: relative(root, &path),
            source,
        })?;
        if metadata.is_dir() {
            collect_manifests(root, &path, out)?;
        } else if metadata.is_file() && is_manifest(&path) {
            out.push(path);
        }
    }
    Ok(())
}

fn is_kustomization_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| KUSTOMIZATION_FILES.contains(&n))
}

fn is_manifest(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn identity(object: &Object) -> String {
    format!(
        "{}|{}|{}|{}",
        object.group(),
        object.kind(),
        object.namespace().unwrap_or(""),
        object.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn cm(name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"
        )
    }

    #[test]
    fn reads_every_manifest_recursively_in_path_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.yaml", &cm("b"));
        write(
            dir.path(),
            "a/z.yml",
            &format!("{}---\n{}", cm("a1"), cm("a2")),
        );
        write(dir.path(), "a/readme.md", "not yaml");
        let objects = build(dir.path(), dir.path(), &KustomizationSpec::default()).unwrap();
        let names: Vec<_> = objects.iter().map(Object::name).collect();
        assert_eq!(names, ["a1", "a2", "b"]);
    }

    #[test]
    fn common_metadata_is_laid_over_every_object() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &cm("a"));
        let spec = KustomizationSpec {
            common_metadata: Some(crate::api::kustomization::CommonMetadata {
                labels: Some(BTreeMap::from([("team".into(), "platform".into())])),
                annotations: Some(BTreeMap::from([("note".into(), "x".into())])),
            }),
            ..Default::default()
        };
        let objects = build(dir.path(), dir.path(), &spec).unwrap();
        assert_eq!(objects[0].label("team"), Some("platform"));
        assert_eq!(objects[0].annotation("note"), Some("x"));
    }

    #[test]
    fn duplicates_name_both_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "one.yaml", &cm("a"));
        write(dir.path(), "two.yaml", &cm("a"));
        let err = build(dir.path(), dir.path(), &KustomizationSpec::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "duplicate object ConfigMap/default/a: defined in one.yaml and two.yaml"
        );
    }

    #[test]
    fn kustomize_overlays_and_fields_are_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "app/kustomization.yaml", "resources: []\n");
        let err = build(dir.path(), dir.path(), &KustomizationSpec::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "app/kustomization.yaml: kustomize overlays are not supported by this build stage yet"
        );
        let spec = KustomizationSpec {
            target_namespace: Some("x".into()),
            ..Default::default()
        };
        let err = build(dir.path(), dir.path(), &spec).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.targetNamespace is not supported by this build stage yet"
        );
    }

    #[test]
    fn invalid_manifests_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "deploy/bad.yaml", "kind: ConfigMap\n");
        let err = build(dir.path(), dir.path(), &KustomizationSpec::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "deploy/bad.yaml: document 1 is missing apiVersion"
        );
    }
}
