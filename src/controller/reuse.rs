//! Build reuse: a periodic reconcile whose inputs are those of the last successful run, and
//! none of whose objects anybody wrote since, would fetch the same artifact, build the same
//! objects and apply them without changing anything. It skips the fetch, the build and the
//! apply, and goes on to the health checks and the status as a run that found nothing to
//! change does.
//!
//! The inputs are the artifact (revision and digest), the whole spec, and the
//! `resourceVersion` of every `substituteFrom` object (read as metadata only, never its data).
//! A build that depends on anything else is never reused: one that decrypted anything or read
//! variables from a Secret (the values it revealed must mask every later message, and keys
//! held by key services can be revoked), and one that fetched remote bases (they can change
//! without the artifact changing). A run a user requested (`reconcile.fluxcd.io/requestedAt`)
//! always builds, as does the first run after the controller starts.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::Api;

use crate::api::Kustomization;
use crate::api::kustomization::SubstituteKind;
use crate::api::source::Artifact;
use apply::ObjectId;

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
    client: &kube::Client,
    ks: &Kustomization,
    artifact: &Artifact,
) -> Option<Inputs> {
    let namespace = ks.namespace().unwrap_or_default();
    let mut versions = Vec::new();
    let references = ks.spec.post_build.iter();
    for reference in references.flat_map(|p| p.substitute_from.iter().flatten()) {
        let version = match reference.kind {
            SubstituteKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
                let metadata = api.get_metadata_opt(&reference.name).await.ok()?;
                metadata.and_then(|o| o.metadata.resource_version)
            }
            SubstituteKind::Secret => {
                let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
                let metadata = api.get_metadata_opt(&reference.name).await.ok()?;
                metadata.and_then(|o| o.metadata.resource_version)
            }
        };
        versions.push(version);
    }
    fingerprint(ks, artifact, &versions)
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

    #[test]
    fn only_builds_that_read_nothing_beyond_their_inputs_are_reused() {
        assert!(reusable(false, false));
        assert!(!reusable(true, false), "decrypted or read a Secret");
        assert!(!reusable(false, true), "fetched a remote base");
    }
}
