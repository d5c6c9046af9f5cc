//! Build reuse: a periodic reconcile whose inputs are those of the last successful run, and
//! none of whose objects anybody wrote since, would fetch the same artifact, build the same
//! objects and apply them without changing anything. It skips the fetch, the build and the
//! apply, and goes on to the health checks and the status as a run that found nothing to
//! change does.
//!
//! The inputs are the artifact (revision and digest), the whole spec, and the
//! `resourceVersion` of every `substituteFrom` object: noted from the render's own reads
//! ([`NotedReads`]) when a build is recorded, read as metadata only (never its data) when a
//! later run checks whether it may reuse it, and only then.
//! A build that depends on anything else is never reused: one that decrypted anything or read
//! variables from a Secret (the values it revealed must mask every later message, and keys
//! held by key services can be revoked), and one that fetched remote bases (they can change
//! without the artifact changing). A run a user requested (`reconcile.fluxcd.io/requestedAt`)
//! always builds, as does the first run after the controller starts.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;

use crate::api::Kustomization;
use crate::api::kustomization::SubstituteKind;
use crate::api::source::Artifact;
use crate::cluster::ControllerReads;
use apply::ObjectId;
use render::cluster::{ObjectReader, SourceFuture};

/// What the last successful run of a Kustomization built, when its build may be reused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastBuild {
    /// The [`Inputs`] it was built from.
    pub inputs: Inputs,
    /// The build's digest, for `status.history`.
    pub digest: String,
    /// The Jobs of the build that may vanish once they finished (`ttlSecondsAfterFinished`).
    pub jobs_with_ttl: HashSet<ObjectId>,
}

/// A fingerprint of everything a build reads besides its source files' content: equal
/// inputs build the same objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inputs(u64);

/// The inputs of `ks`'s build of `artifact`; `None` when they cannot be told (a
/// `substituteFrom` object could not be read), and the build is not to be reused.
pub async fn inputs(
    reads: &ControllerReads,
    ks: &Kustomization,
    artifact: &Artifact,
) -> Option<Inputs> {
    let namespace = ks.namespace().unwrap_or_default();
    let mut versions = Vec::new();
    let references = ks.spec.post_build.iter();
    for reference in references.flat_map(|p| p.substitute_from.iter().flatten()) {
        let secret = reference.kind == SubstituteKind::Secret;
        let version = reads.version(secret, &namespace, &reference.name).await;
        versions.push(version.ok()?);
    }
    fingerprint(ks, artifact, &versions)
}

/// An [`ObjectReader`] that notes the `resourceVersion` of every object read through it, so
/// that a build's inputs are fingerprinted from what its render actually read.
pub struct NotedReads<'a> {
    reader: &'a dyn ObjectReader,
    versions: Mutex<HashMap<(SubstituteKind, String), Option<String>>>,
}

impl<'a> NotedReads<'a> {
    /// Reads through `reader`, noting versions.
    pub fn new(reader: &'a dyn ObjectReader) -> Self {
        NotedReads {
            reader,
            versions: Mutex::new(HashMap::new()),
        }
    }

    fn note(&self, kind: SubstituteKind, name: &str, version: Option<String>) {
        if let Ok(mut versions) = self.versions.lock() {
            versions.insert((kind, name.to_string()), version);
        }
    }

    /// The inputs of `ks`'s build of `artifact`, from the versions of the `substituteFrom`
    /// objects read through this reader; `None` when one of them was not read.
    pub fn inputs(&self, ks: &Kustomization, artifact: &Artifact) -> Option<Inputs> {
        let versions = {
            let noted = self.versions.lock().ok()?;
            let references = ks.spec.post_build.iter();
            references
                .flat_map(|p| p.substitute_from.iter().flatten())
                .map(|reference| {
                    noted
                        .get(&(reference.kind, reference.name.clone()))
                        .cloned()
                })
                .collect::<Option<Vec<_>>>()?
        };
        fingerprint(ks, artifact, &versions)
    }
}

impl ObjectReader for NotedReads<'_> {
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str) -> SourceFuture<'a, Option<Secret>> {
        Box::pin(async move {
            let secret = self.reader.secret(namespace, name).await?;
            let version = secret.as_ref().and_then(|s| s.resource_version());
            self.note(SubstituteKind::Secret, name, version);
            Ok(secret)
        })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> SourceFuture<'a, Option<ConfigMap>> {
        Box::pin(async move {
            let config_map = self.reader.config_map(namespace, name).await?;
            let version = config_map.as_ref().and_then(|c| c.resource_version());
            self.note(SubstituteKind::ConfigMap, name, version);
            Ok(config_map)
        })
    }

    fn answers_from_cache(&self, namespace: &str) -> bool {
        self.reader.answers_from_cache(namespace)
    }
}

/// The fingerprint of a build of `artifact` by `ks`, whose `substituteFrom` objects are at
/// `versions` (in order; `None` for one that does not exist).
fn fingerprint(
    ks: &Kustomization,
    artifact: &Artifact,
    versions: &[Option<String>],
) -> Option<Inputs> {
    let mut hasher = DefaultHasher::new();
    artifact.revision.hash(&mut hasher);
    artifact.digest.hash(&mut hasher);
    serde_json::to_vec(&ks.spec).ok()?.hash(&mut hasher);
    versions.hash(&mut hasher);
    Some(Inputs(hasher.finish()))
}

/// Whether a successful build may be reused by later runs with the same inputs: it
/// revealed no secret value (nothing decrypted, no variable read from a Secret) and fetched
/// no remote base.
pub fn reusable(revealed_secrets: bool, fetched_remote_bases: bool) -> bool {
    !revealed_secrets && !fetched_remote_bases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KustomizationSpec;

    fn artifact(revision: &str, digest: &str) -> Artifact {
        serde_json::from_value(serde_json::json!({
            "url": "http://source-controller/a.tar.gz",
            "revision": revision,
            "digest": digest,
        }))
        .expect("an artifact")
    }

    #[test]
    fn every_input_changes_the_fingerprint() {
        let ks = Kustomization::new("app", KustomizationSpec::default());
        let base = artifact("main@sha1:1", "sha256:1");
        let at = |ks: &Kustomization, artifact: &Artifact, versions: &[Option<String>]| {
            fingerprint(ks, artifact, versions).expect("a fingerprint")
        };
        let same = at(&ks, &base, &[Some("5".into())]);
        assert_eq!(same, at(&ks.clone(), &base.clone(), &[Some("5".into())]));
        assert_ne!(
            same,
            at(
                &ks,
                &artifact("main@sha1:2", "sha256:1"),
                &[Some("5".into())]
            )
        );
        assert_ne!(
            same,
            at(
                &ks,
                &artifact("main@sha1:1", "sha256:2"),
                &[Some("5".into())]
            )
        );
        assert_ne!(
            same,
            at(&ks, &base, &[Some("6".into())]),
            "a variables object written"
        );
        assert_ne!(same, at(&ks, &base, &[None]), "a variables object deleted");
        let mut pruning = ks.clone();
        pruning.spec.prune = !pruning.spec.prune;
        assert_ne!(
            same,
            at(&pruning, &base, &[Some("5".into())]),
            "the spec changed"
        );
    }

    /// One ConfigMap `vars` at version 7; no Secret.
    struct OneConfigMap;

    impl ObjectReader for OneConfigMap {
        fn secret<'a>(&'a self, _: &'a str, _: &'a str) -> SourceFuture<'a, Option<Secret>> {
            Box::pin(async { Ok(None) })
        }

        fn config_map<'a>(
            &'a self,
            _: &'a str,
            name: &'a str,
        ) -> SourceFuture<'a, Option<ConfigMap>> {
            Box::pin(async move {
                let mut config_map = ConfigMap::default();
                config_map.metadata.name = Some(name.to_string());
                config_map.metadata.resource_version = Some("7".to_string());
                Ok((name == "vars").then_some(config_map))
            })
        }
    }

    fn substituting(references: serde_json::Value) -> Kustomization {
        let spec = serde_json::json!({
            "interval": "10m",
            "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
            "postBuild": {"substituteFrom": references},
        });
        Kustomization::new("app", serde_json::from_value(spec).expect("a spec"))
    }

    #[tokio::test]
    async fn the_inputs_of_a_build_are_the_versions_its_render_read() {
        let ks = substituting(serde_json::json!([
            {"kind": "ConfigMap", "name": "vars"},
            {"kind": "Secret", "name": "absent", "optional": true},
        ]));
        let base = artifact("main@sha1:1", "sha256:1");
        let noted = NotedReads::new(&OneConfigMap);
        assert_eq!(noted.inputs(&ks, &base), None, "nothing read yet");
        noted.config_map("default", "vars").await.expect("read");
        assert_eq!(noted.inputs(&ks, &base), None, "the Secret not read yet");
        noted.secret("default", "absent").await.expect("read");
        assert_eq!(
            noted.inputs(&ks, &base),
            fingerprint(&ks, &base, &[Some("7".into()), None]),
        );
    }

    #[test]
    fn only_builds_that_read_nothing_beyond_their_inputs_are_reused() {
        assert!(reusable(false, false));
        assert!(!reusable(true, false), "decrypted or read a Secret");
        assert!(!reusable(false, true), "fetched a remote base");
    }
}
