//! The view this controller has of Flux's source kinds: only `status.artifact`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject, DynamicResourceScope, GroupVersionKind};
use serde::{Deserialize, Serialize};

use super::kustomization::SourceKind;
use super::names::SOURCE_GROUP;

/// The API version used for a source when `sourceRef.apiVersion` is empty.
pub const DEFAULT_SOURCE_VERSION: &str = "v1";

/// The versions of `source.toolkit.fluxcd.io` this controller reads.
pub const SUPPORTED_SOURCE_VERSIONS: [&str; 2] = ["v1", "v1beta2"];

/// Artifact represents the output of a Source reconciliation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Path is the relative file path of the Artifact.
    #[serde(default)]
    pub path: String,
    /// URL is the HTTP address of the Artifact as exposed by the controller managing the
    /// Source.
    pub url: String,
    /// Revision is a human-readable identifier traceable in the origin source system.
    #[serde(default)]
    pub revision: String,
    /// Digest is the digest of the file in the form of `<algorithm>:<checksum>`.
    #[serde(default)]
    pub digest: Option<String>,
    /// LastUpdateTime is the timestamp corresponding to the last update of the Artifact.
    #[serde(default)]
    pub last_update_time: Option<String>,
    /// Size is the number of bytes in the file.
    #[serde(default)]
    pub size: Option<i64>,
    /// Metadata holds upstream information such as OCI annotations.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Metadata key of the origin revision on OCI artifacts.
pub const ORIGIN_REVISION_KEY: &str = "org.opencontainers.image.revision";

impl Artifact {
    /// The revision of the origin, when the source records it.
    pub fn origin_revision(&self) -> Option<&str> {
        self.metadata
            .as_ref()?
            .get(ORIGIN_REVISION_KEY)
            .map(String::as_str)
    }
}

impl SourceKind {
    /// Every source kind, in a fixed order.
    pub const ALL: [SourceKind; 4] = [
        SourceKind::GitRepository,
        SourceKind::OciRepository,
        SourceKind::Bucket,
        SourceKind::ExternalArtifact,
    ];

    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::GitRepository => "GitRepository",
            SourceKind::OciRepository => "OCIRepository",
            SourceKind::Bucket => "Bucket",
            SourceKind::ExternalArtifact => "ExternalArtifact",
        }
    }

    /// The resource plural of the kind.
    pub fn plural(self) -> &'static str {
        match self {
            SourceKind::GitRepository => "gitrepositories",
            SourceKind::OciRepository => "ocirepositories",
            SourceKind::Bucket => "buckets",
            SourceKind::ExternalArtifact => "externalartifacts",
        }
    }

    /// The API resource of the kind at `version`.
    pub fn api_resource(self, version: &str) -> ApiResource {
        let gvk = GroupVersionKind::gvk(SOURCE_GROUP, version, self.as_str());
        ApiResource::from_gvk_with_plural(&gvk, self.plural())
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a `sourceRef.apiVersion` cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unsupported sourceRef.apiVersion {0:?}: expected {SOURCE_GROUP}/v1 or {SOURCE_GROUP}/v1beta2"
)]
pub struct UnsupportedSourceVersion(pub String);

/// The version to read a source at, from `sourceRef.apiVersion` (`group/version`, or empty).
pub fn source_version(api_version: Option<&str>) -> Result<&str, UnsupportedSourceVersion> {
    let Some(api_version) = api_version.filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_SOURCE_VERSION);
    };
    match api_version.split_once('/') {
        Some((SOURCE_GROUP, version)) if SUPPORTED_SOURCE_VERSIONS.contains(&version) => {
            Ok(version)
        }
        _ => Err(UnsupportedSourceVersion(api_version.to_string())),
    }
}

/// A source object as this controller reads it, at [`DEFAULT_SOURCE_VERSION`]: its metadata
/// and `status.artifact`. Everything else is skipped as it is decoded, so a watch of
/// thousands of sources holds little more than their artifacts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SourceObject {
    /// The source's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its `status`, of which only the artifact is kept.
    #[serde(
        default,
        deserialize_with = "lenient_status",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<SourceStatus>,
}

/// The part of a source's status this controller reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SourceStatus {
    /// The artifact the source controller produced last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
}

/// A status whose artifact does not read as one holds no artifact, as with
/// [`artifact_of`]: one malformed source must not fail the decoding of a whole watch page.
fn lenient_status<'de, D>(deserializer: D) -> Result<Option<SourceStatus>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    /// The status as decoded: its other fields (conditions, `observedIgnore`, ...) are
    /// skipped without being built.
    #[derive(Deserialize)]
    struct Decoded {
        #[serde(default)]
        artifact: Option<serde_json::Value>,
    }
    let status = Option::<Decoded>::deserialize(deserializer)?;
    Ok(status.map(|status| SourceStatus {
        artifact: status
            .artifact
            .and_then(|artifact| Artifact::deserialize(artifact).ok()),
    }))
}

impl SourceObject {
    /// The source's `status.artifact`; `None` when it has none yet.
    pub fn artifact(&self) -> Option<&Artifact> {
        self.status.as_ref()?.artifact.as_ref()
    }

    /// The metadata and artifact of `source`, read at any version.
    pub fn from_dynamic(source: DynamicObject) -> SourceObject {
        let artifact = artifact_of(&source);
        SourceObject {
            metadata: source.metadata,
            status: Some(SourceStatus { artifact }),
        }
    }
}

impl kube::Resource for SourceObject {
    type DynamicType = SourceKind;
    // Namespaced, but read across all namespaces too (`Api::all_with`).
    type Scope = DynamicResourceScope;

    fn kind(kind: &SourceKind) -> Cow<'_, str> {
        Cow::Borrowed(kind.as_str())
    }

    fn group(_: &SourceKind) -> Cow<'_, str> {
        Cow::Borrowed(SOURCE_GROUP)
    }

    fn version(_: &SourceKind) -> Cow<'_, str> {
        Cow::Borrowed(DEFAULT_SOURCE_VERSION)
    }

    fn plural(kind: &SourceKind) -> Cow<'_, str> {
        Cow::Borrowed(kind.plural())
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Reads `status.artifact` from a source object; `None` when the source has none yet.
pub fn artifact_of(source: &DynamicObject) -> Option<Artifact> {
    let artifact = source.data.get("status")?.get("artifact")?;
    serde_json::from_value(artifact.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_versions() {
        assert_eq!(source_version(None), Ok("v1"));
        assert_eq!(source_version(Some("")), Ok("v1"));
        assert_eq!(
            source_version(Some("source.toolkit.fluxcd.io/v1beta2")),
            Ok("v1beta2")
        );
        assert!(source_version(Some("source.toolkit.fluxcd.io/v2")).is_err());
        assert!(source_version(Some("example.com/v1")).is_err());
    }

    #[test]
    fn artifact_is_read_from_status() {
        let source: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": "app", "namespace": "flux-system"},
            "status": {"artifact": {
                "url": "http://source-controller/x.tar.gz",
                "revision": "latest@sha256:abc",
                "digest": "sha256:abc",
                "path": "ocirepository/flux-system/app/abc.tar.gz",
                "lastUpdateTime": "2026-01-01T00:00:00Z",
                "size": 10,
                "metadata": {"org.opencontainers.image.revision": "main@sha1:123"}
            }}
        }))
        .unwrap();
        let artifact = artifact_of(&source).unwrap();
        assert_eq!(artifact.revision, "latest@sha256:abc");
        assert_eq!(artifact.origin_revision(), Some("main@sha1:123"));
    }

    #[test]
    fn no_artifact_yet() {
        let source: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "app"},
            "status": {}
        }))
        .unwrap();
        assert!(artifact_of(&source).is_none());
    }
}
