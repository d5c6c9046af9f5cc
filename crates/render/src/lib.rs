//! The build stage of the pipeline (rendering): turns the directory at `spec.path` into the
//! list of objects to apply, the way Flux does it.
//!
//! When the directory has no kustomization file, one is generated listing every manifest
//! under it (Flux's rules); then the Kustomization's own build fields (targetNamespace,
//! namePrefix/nameSuffix, patches, images, components, buildMetadata) are laid over it, the
//! native kustomize engine builds it with no load restriction inside the artifact root.
//! `spec.commonMetadata` is applied by [`apply_common_metadata`] after post-build
//! substitution, as Flux applies it (and after the manifests are digested for
//! `status.history`, see [`manifests_yaml`]). With decryption keys,
//! SOPS-encrypted sources are decrypted in memory before the build and encrypted objects
//! after it.
//!
//! [`render`] runs the whole stage in order, for the controller, `diff` and the offline
//! `build` alike; the keys ([`keys`]) and variables ([`variables`]) come from a
//! [`KeySource`] and a [`VariableSource`]; what they read from the cluster comes through the
//! traits of [`cluster`].
#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod decrypt;
pub mod keys;
mod pipeline;
mod post_build;
pub mod redact;
pub mod remote;
pub mod variables;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use api::KustomizationSpec;
use api::kustomization::BuildMetadataOption;
use apply::Object;
use kustomize::kustfile::{self, KUSTOMIZATION_FILE_NAMES, Kustomization};
use kustomize::loader::{LoadRestrictions, Loader};
use kustomize::{self, RemoteFetcher, target};
use sops::Keyring;

pub use decrypt::{DecryptionError, is_encrypted_secret};
pub use pipeline::{
    Inputs, KeySource, LocalKeys, LocalVariables, RenderError, Rendered, Settings, VariableSource,
    digest, render,
};
pub use post_build::{PostBuildError, substitute_objects, substitute_objects_redacting};
pub use redact::SecretValues;

/// Why a build failed. Every variant names the file or field at fault.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The directory could not be scanned.
    #[error("failed to read {path}: {source}")]
    Read {
        /// Path relative to the artifact root.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A manifest found while generating a kustomization is not Kubernetes YAML.
    #[error("failed to decode Kubernetes YAML from {path}: {message}")]
    Manifest {
        /// Path relative to the artifact root.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The kustomize build failed.
    #[error(transparent)]
    Kustomize(#[from] target::BuildError),
    /// SOPS decryption of a source or an object failed.
    #[error(transparent)]
    Decryption(#[from] DecryptionError),
    /// A failure after something was decrypted, with the decrypted values masked out of
    /// its message.
    #[error("{0}")]
    Redacted(String),
}

/// A build's objects and the secret values it revealed by decrypting (to be masked out of
/// any message written about them later).
#[derive(Debug)]
pub struct Built {
    /// The objects, decrypted.
    pub objects: Vec<Object>,
    /// What decryption revealed.
    pub secrets: SecretValues,
}

/// Builds the objects under `dir` (inside the artifact extracted at `root`) for `spec`,
/// decrypting with `keys` when the Kustomization asks for decryption.
pub fn build(
    root: &Path,
    dir: &Path,
    spec: &KustomizationSpec,
    keys: Option<&Keyring>,
) -> Result<Vec<Object>, BuildError> {
    build_with_secrets(root, dir, spec, keys, None).map(|built| built.objects)
}

/// [`build`], also returning the values decryption revealed. A failure after any value was
/// decrypted (a kustomize error about a decrypted patch, say) comes back with those values
/// masked out of its message. Remote bases are fetched with `remote`; without one they are
/// refused (`--no-remote-bases`).
pub fn build_with_secrets(
    root: &Path,
    dir: &Path,
    spec: &KustomizationSpec,
    keys: Option<&Keyring>,
    remote: Option<Arc<dyn RemoteFetcher>>,
) -> Result<Built, BuildError> {
    let mut secrets = SecretValues::new();
    match build_revealing(root, dir, spec, keys, remote, &mut secrets) {
        Ok(objects) => Ok(Built { objects, secrets }),
        Err(e) if secrets.is_empty() => Err(e),
        Err(e) => Err(BuildError::Redacted(secrets.redact(&e.to_string()))),
    }
}

fn build_revealing(
    root: &Path,
    dir: &Path,
    spec: &KustomizationSpec,
    keys: Option<&Keyring>,
    remote: Option<Arc<dyn RemoteFetcher>>,
    secrets: &mut SecretValues,
) -> Result<Vec<Object>, BuildError> {
    let mut loader = Loader::new(root, LoadRestrictions::None).map_err(target::BuildError::from)?;
    if let Some(remote) = remote {
        loader = loader.with_remote_fetcher(remote);
    }
    let dir = dir.canonicalize().map_err(|source| BuildError::Read {
        path: loader.display(dir),
        source,
    })?;
    let kustomization = flux_kustomization(&loader, &dir, spec)?;
    if let Some(keys) = keys {
        let sources = decrypt::decrypt_sources(&loader, &dir, &kustomization, keys, secrets)?;
        loader = loader.with_in_memory_files(sources);
    }
    let built = target::build_kustomization(&loader, &dir, kustomization)?;
    let mut objects: Vec<Object> = built.into_iter().map(Object::new).collect();
    if let Some(keys) = keys {
        decrypt::decrypt_objects(&mut objects, keys, secrets)?;
    }
    Ok(objects)
}

/// The kustomization Flux builds for `dir`: the directory's own kustomization file (or one
/// generated from the manifests under it) with the Kustomization's build fields laid over.
pub fn flux_kustomization(
    loader: &Loader,
    dir: &Path,
    spec: &KustomizationSpec,
) -> Result<Kustomization, BuildError> {
    let mut kustomization = if has_kustomization_file(dir) {
        let mut existing = target::load_kustomization_as_flux(loader, dir)?;
        // Flux sets this on a kustomization file with no resources so that kustomize does not
        // refuse it as empty (its objects then carry origin annotations).
        if existing.resources.is_empty() {
            existing.build_metadata = vec!["originAnnotations".to_string()];
        }
        existing
    } else {
        generate_kustomization(loader, dir)?
    };
    overlay_spec(&mut kustomization, dir, spec);
    Ok(kustomization)
}

pub(crate) fn has_kustomization_file(dir: &Path) -> bool {
    KUSTOMIZATION_FILE_NAMES
        .iter()
        .any(|name| dir.join(name).is_file())
}

/// Flux's generated kustomization: every `.yaml`/`.yml` manifest under `dir`, in walk
/// order; a sub-directory holding a kustomization file is listed as one entry and not
/// descended into.
pub fn generate_kustomization(loader: &Loader, dir: &Path) -> Result<Kustomization, BuildError> {
    let mut resources = Vec::new();
    scan(loader, dir, dir, &mut resources)?;
    Ok(Kustomization {
        api_version: kustfile::KUSTOMIZATION_API_VERSION.to_string(),
        kind: "Kustomization".to_string(),
        resources,
        ..Kustomization::default()
    })
}

fn scan(loader: &Loader, base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), BuildError> {
    let read_error = |path: &Path| {
        let path = loader.display(path);
        move |source| BuildError::Read { path, source }
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_error(dir))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(read_error(dir))?;
    entries.sort();
    for path in entries {
        let relative = path
            .strip_prefix(base)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        // As Go's filepath.Walk, symlinks are not followed into directories (a link to an
        // ancestor would loop forever); a linked manifest is read like any file, by the
        // loader, which confines it to the root and reads only regular files.
        let metadata = std::fs::symlink_metadata(&path).map_err(read_error(&path))?;
        if metadata.is_dir() {
            if has_kustomization_file(&path) {
                out.push(relative);
            } else {
                scan(loader, base, &path, out)?;
            }
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        ) {
            let text = loader
                .read_text(dir, &relative_to(dir, &path))
                .map_err(target::BuildError::from)?;
            target::parse_resources(&text, &loader.display(&path)).map_err(|e| {
                let message = match e {
                    target::BuildError::Resource { message, .. } => message,
                    other => other.to_string(),
                };
                BuildError::Manifest {
                    path: loader.display(&path),
                    message,
                }
            })?;
            out.push(relative);
        }
    }
    Ok(())
}

/// The file name of `path`, an entry of `dir`.
fn relative_to(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Lays the Kustomization's build fields over the kustomization file, as Flux does.
fn overlay_spec(k: &mut Kustomization, dir: &Path, spec: &KustomizationSpec) {
    if let Some(namespace) = &spec.target_namespace {
        k.namespace = namespace.clone();
    }
    if let Some(prefix) = &spec.name_prefix {
        k.name_prefix = prefix.clone();
    }
    if let Some(suffix) = &spec.name_suffix {
        k.name_suffix = suffix.clone();
    }
    for patch in spec.patches.iter().flatten() {
        k.patches.push(kustfile::Patch {
            patch: patch.patch.clone(),
            target: patch.target.as_ref().map(|t| kustfile::Selector {
                group: t.group.clone().unwrap_or_default(),
                version: t.version.clone().unwrap_or_default(),
                kind: t.kind.clone().unwrap_or_default(),
                name: t.name.clone().unwrap_or_default(),
                namespace: t.namespace.clone().unwrap_or_default(),
                label_selector: t.label_selector.clone().unwrap_or_default(),
                annotation_selector: t.annotation_selector.clone().unwrap_or_default(),
            }),
            ..kustfile::Patch::default()
        });
    }
    for image in spec.images.iter().flatten() {
        let image = kustfile::Image {
            name: image.name.clone(),
            new_name: image.new_name.clone().unwrap_or_default(),
            new_tag: image.new_tag.clone().unwrap_or_default(),
            digest: image.digest.clone().unwrap_or_default(),
            tag_suffix: String::new(),
        };
        // Flux replaces an entry for the same image rather than adding a second one.
        match k.images.iter_mut().find(|i| i.name == image.name) {
            Some(existing) => *existing = image,
            None => k.images.push(image),
        }
    }
    let ignore_missing = spec.ignore_missing_components.unwrap_or(false);
    for component in spec.components.iter().flatten() {
        if ignore_missing && !dir.join(component).exists() {
            continue;
        }
        k.components.push(component.clone());
    }
    // The Kustomization's buildMetadata replaces the file's, as in Flux.
    let build_metadata: Vec<String> = spec
        .build_metadata
        .iter()
        .flatten()
        .map(|option| match option {
            BuildMetadataOption::OriginAnnotations => "originAnnotations".to_string(),
            BuildMetadataOption::TransformerAnnotations => "transformerAnnotations".to_string(),
        })
        .collect();
    if !build_metadata.is_empty() {
        k.build_metadata = build_metadata;
    }
}

/// The objects as the multi-document YAML kustomize prints (what Flux digests for
/// `status.history`).
pub fn manifests_yaml(objects: &[Object]) -> String {
    goyaml::mappings_to_yaml_stream(objects.iter().map(Object::as_map))
}

/// Sets `spec.commonMetadata`'s labels and annotations on every object (after substitution:
/// its values are not substituted, as with Flux).
pub fn apply_common_metadata(objects: &mut [Object], spec: &KustomizationSpec) {
    let Some(common) = &spec.common_metadata else {
        return;
    };
    for object in objects {
        if let Some(labels) = &common.labels {
            object.set_labels(labels);
        }
        if let Some(annotations) = &common.annotations {
            object.set_annotations(annotations);
        }
    }
}

/// Builds a directory offline exactly as the controller would for `spec` (`None` for a plain
/// `kustomize build`), confining reads to `root`; returns the objects and the values
/// decryption revealed (for [`substitute_objects_redacting`] and any later message), as
/// [`build_with_secrets`] does.
pub fn build_offline(
    root: &Path,
    dir: &Path,
    spec: Option<&KustomizationSpec>,
    restrictions: LoadRestrictions,
    keys: Option<&Keyring>,
    remote: Option<Arc<dyn RemoteFetcher>>,
) -> Result<Built, BuildError> {
    match spec {
        Some(spec) => build_with_secrets(root, dir, spec, keys, remote),
        None if keys.is_some() => {
            build_with_secrets(root, dir, &KustomizationSpec::default(), keys, remote)
        }
        None => {
            let options = kustomize::BuildOptions {
                load_restrictions: restrictions,
                remote_fetcher: remote,
            };
            let objects = kustomize::build(root, dir, &options)?
                .into_iter()
                .map(Object::new)
                .collect();
            Ok(Built {
                objects,
                secrets: SecretValues::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn cm(name: &str) -> String {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n")
    }

    fn names(objects: &[Object]) -> Vec<String> {
        objects
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap_or(""), o.name()))
            .collect()
    }

    #[test]
    fn generates_a_kustomization_from_plain_manifests() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b.yaml", &cm("b"));
        write(
            dir.path(),
            "a/z.yml",
            &format!("{}---\n{}", cm("a1"), cm("a2")),
        );
        write(dir.path(), "a/readme.md", "not yaml");
        write(
            dir.path(),
            "sub/kustomization.yaml",
            "resources: [c.yaml]\nnamePrefix: sub-\n",
        );
        write(dir.path(), "sub/c.yaml", &cm("c"));
        write(dir.path(), "sub/ignored.yaml", &cm("never-listed"));
        let objects = build(dir.path(), dir.path(), &KustomizationSpec::default(), None).unwrap();
        assert_eq!(names(&objects), ["/a1", "/a2", "/b", "/sub-c"]);
    }

    #[test]
    fn lays_the_kustomization_fields_over_the_build() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "app/a.yaml", &cm("a"));
        write(
            dir.path(),
            "comp/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [extra.yaml]\n",
        );
        write(dir.path(), "comp/extra.yaml", &cm("extra"));
        let spec: KustomizationSpec = serde_json::from_value(serde_json::json!({
            "interval": "1m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
            "targetNamespace": "apps", "namePrefix": "p-", "nameSuffix": "-s",
            "components": ["../comp", "../missing"], "ignoreMissingComponents": true,
            "patches": [{"patch": "- op: add\n  path: /data/patched\n  value: \"yes\"\n",
                         "target": {"kind": "ConfigMap", "name": "a"}}],
            "commonMetadata": {"labels": {"team": "platform"}}
        }))
        .unwrap();
        let mut objects = build(dir.path(), &dir.path().join("app"), &spec, None).unwrap();
        assert_eq!(names(&objects), ["apps/p-a-s", "apps/p-extra-s"]);
        assert_eq!(objects[0].label("team"), None);
        apply_common_metadata(&mut objects, &spec);
        assert_eq!(objects[0].label("team"), Some("platform"));
        let data = objects[0].as_map()["data"].clone();
        assert_eq!(data["patched"], "yes");
    }

    #[test]
    fn the_root_kustomization_file_is_read_as_flux_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        // No resources, an unknown field and generators only: Flux drops the field, sets
        // originAnnotations so that kustomize does not refuse the file as empty, and builds.
        write(
            dir.path(),
            "kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nunknownField: 1\n\
             configMapGenerator:\n- name: settings\n  literals: [a=b]\n",
        );
        let objects = build(dir.path(), dir.path(), &KustomizationSpec::default(), None).unwrap();
        assert_eq!(objects.len(), 1);
        assert!(
            objects[0]
                .annotation("config.kubernetes.io/origin")
                .is_some(),
            "{:?}",
            objects[0]
        );
        // A file with nothing in it builds nothing, as in Flux.
        write(dir.path(), "kustomization.yaml", "kind: Kustomization\n");
        let objects = build(dir.path(), dir.path(), &KustomizationSpec::default(), None).unwrap();
        assert!(objects.is_empty());
    }

    #[test]
    fn the_kustomizations_build_metadata_replaces_the_files() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "kustomization.yaml",
            "resources: [a.yaml]\nbuildMetadata: [transformerAnnotations]\n",
        );
        write(dir.path(), "a.yaml", &cm("a"));
        let spec: KustomizationSpec = serde_json::from_value(serde_json::json!({
            "interval": "1m", "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
            "buildMetadata": ["originAnnotations"]
        }))
        .unwrap();
        let loader = Loader::new(dir.path(), LoadRestrictions::None).unwrap();
        let kustomization = flux_kustomization(&loader, dir.path(), &spec);
        assert_eq!(kustomization.unwrap().build_metadata, ["originAnnotations"]);
    }

    #[test]
    fn a_missing_component_fails_unless_ignored() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &cm("a"));
        let spec = KustomizationSpec {
            components: Some(vec!["missing".into()]),
            ..Default::default()
        };
        let err = build(dir.path(), dir.path(), &spec, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn an_oversized_manifest_is_refused_without_being_read() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", &cm("a"));
        let huge = std::fs::File::create(dir.path().join("huge.yaml")).unwrap();
        huge.set_len(kustomize::loader::MAX_FILE_SIZE + 1).unwrap();
        let err = build(dir.path(), dir.path(), &KustomizationSpec::default(), None).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("huge.yaml") && err.contains("limit"), "{err}");
    }

    #[test]
    fn invalid_manifests_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "deploy/bad.yaml", "kind: [\n");
        let err = build(dir.path(), dir.path(), &KustomizationSpec::default(), None).unwrap_err();
        assert!(err.to_string().contains("deploy/bad.yaml"), "{err}");
    }

    #[test]
    fn reads_nothing_outside_the_artifact_root() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("artifact");
        write(outer.path(), "secret.yaml", &cm("secret"));
        write(
            &root,
            "app/kustomization.yaml",
            "resources: [../../secret.yaml]\n",
        );
        let err = build(
            &root,
            &root.join("app"),
            &KustomizationSpec::default(),
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn generation_does_not_follow_directory_symlinks_and_reads_only_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "deploy/a.yaml", &cm("a"));
        // A link to an ancestor: followed, the walk would never end.
        std::os::unix::fs::symlink("..", dir.path().join("deploy/loop")).unwrap();
        std::os::unix::fs::symlink("a.yaml", dir.path().join("deploy/linked.yaml")).unwrap();
        let deploy = dir.path().join("deploy");
        let objects = build(dir.path(), &deploy, &KustomizationSpec::default(), None);
        // The linked manifest is read (as by Go's filepath.Walk), so `a` comes twice.
        let err = objects.unwrap_err().to_string();
        assert!(err.contains("already registered id"), "{err}");

        std::fs::remove_file(dir.path().join("deploy/linked.yaml")).unwrap();
        let objects = build(dir.path(), &deploy, &KustomizationSpec::default(), None).unwrap();
        assert_eq!(names(&objects), ["/a"]);

        let status = std::process::Command::new("mkfifo")
            .arg(dir.path().join("deploy/pipe.yaml"))
            .status()
            .unwrap();
        assert!(status.success());
        let err = build(dir.path(), &deploy, &KustomizationSpec::default(), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pipe.yaml") && err.contains("named pipe"),
            "{err}"
        );
    }
}
