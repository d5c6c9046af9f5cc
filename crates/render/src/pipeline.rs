//! The one render pipeline: decryption keys -> build (with decryption) -> post-build
//! variables -> substitution -> the `status.history` digest -> `spec.commonMetadata`. The
//! controller, `diff` and the offline `build` all call [`render`]; they differ only in
//! where keys and variables come from ([`KeySource`], [`VariableSource`]) and in their
//! [`Settings`].
//!
//! The order is Flux's: keys are read before the build, variables after it (a build error
//! is reported before a missing `substituteFrom` object), and the history digest is taken
//! after substitution and before commonMetadata. The CPU-bound stages run on tokio's
//! blocking pool, so that they never stall the tasks sharing a worker thread; a panic in
//! one (a bug met on some input) fails this render instead of the process.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kustomize::LoadRestrictions;
use sha2::{Digest, Sha256};
use sops::Keyring;

use super::keys::KeysError;
use super::variables::VariablesError;
use super::{BuildError, Built, PostBuildError, SecretValues};
use api::Kustomization;
use apply::Object;

/// Where the SOPS keys of a Kustomization come from: the cluster for the controller and
/// `diff` ([`super::keys::ClusterKeys`]), local files for the offline build ([`LocalKeys`]).
pub trait KeySource {
    /// The keyring for `ks`, or `None` when nothing asks for decryption.
    fn keys(
        self,
        ks: &Kustomization,
    ) -> impl Future<Output = Result<Option<Keyring>, KeysError>> + Send;
}

/// Where the post-build variables of a Kustomization come from: the cluster for the
/// controller and `diff` ([`super::variables::ClusterVariables`]), flags and files for the
/// offline build ([`LocalVariables`]).
pub trait VariableSource {
    /// The variables for `ks`, or `None` when nothing asks for substitution. Values read
    /// from Secrets join `secrets`, to be masked out of messages.
    fn variables(
        self,
        ks: &Kustomization,
        secrets: &mut SecretValues,
    ) -> impl Future<Output = Result<Option<BTreeMap<String, String>>, VariablesError>> + Send;
}

/// Keys already loaded (or none): the offline build reads its `--sops-key` files first.
pub struct LocalKeys(pub Option<Keyring>);

impl KeySource for LocalKeys {
    async fn keys(self, _ks: &Kustomization) -> Result<Option<Keyring>, KeysError> {
        Ok(self.0)
    }
}

/// Variables already read (or none, for no substitution): the offline build's `--var`,
/// `--var-file` and inline `postBuild.substitute`.
pub struct LocalVariables(pub Option<BTreeMap<String, String>>);

impl VariableSource for LocalVariables {
    async fn variables(
        self,
        _ks: &Kustomization,
        _secrets: &mut SecretValues,
    ) -> Result<Option<BTreeMap<String, String>>, VariablesError> {
        Ok(self.0)
    }
}

/// How a render runs: the controller's flags and feature gates.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// A `${var}` with no value and no default is an error (feature gate
    /// `StrictPostBuildSubstitutions`).
    pub strict_substitution: bool,
    /// kustomize remote bases may be fetched (not `--no-remote-bases`).
    pub allow_remote_bases: bool,
}

/// What is rendered.
pub struct Inputs<'a> {
    /// The Kustomization: its build fields, decryption, post-build and commonMetadata.
    pub kustomization: &'a Kustomization,
    /// Files may only be read under this directory (the extracted artifact).
    pub root: &'a Path,
    /// The directory built (`spec.path` in the artifact).
    pub dir: &'a Path,
    /// `None` builds as the controller does. `Some` is the offline build without a
    /// Kustomization: a plain `kustomize build` with these load restrictions, unless there
    /// are keys to decrypt with (then the controller's build of an empty spec).
    pub plain: Option<LoadRestrictions>,
}

/// The rendered objects, ready to apply.
#[derive(Debug)]
pub struct Rendered {
    /// The objects: decrypted, substituted, with commonMetadata.
    pub objects: Vec<Object>,
    /// [`digest`] of the objects before commonMetadata, as Flux records it in
    /// `status.history`.
    pub digest: String,
    /// What decryption and the variables read from Secrets revealed: to be masked out of
    /// every later message.
    pub secrets: SecretValues,
    /// Whether the build asked for a remote base or file (a git repository or an http(s)
    /// URL), which can change without the source changing.
    pub fetched_remote: bool,
}

/// Why a render failed. No message quotes a decrypted or Secret value.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The decryption keys could not be loaded.
    #[error(transparent)]
    Keys(#[from] KeysError),
    /// The build (or decryption during it) failed; kustomize's errors are prefixed with
    /// Flux's wording.
    #[error("{}", build_message(.0))]
    Build(BuildError),
    /// A `substituteFrom` object could not be read (secret values masked out), when the
    /// first object that takes substitution asked for the variables, as Flux reads them.
    #[error("post build failed for '{object}': {source}")]
    Variables {
        /// That object, as kustomize names it (`ConfigMap.v1.[noGrp]/name`).
        object: String,
        /// The read that failed.
        source: VariablesError,
    },
    /// Post-build substitution failed (secret values masked out).
    #[error(transparent)]
    Substitute(PostBuildError),
    /// A stage stopped on a panic or was cancelled.
    #[error(
        "the {stage} stage stopped on an internal error (a bug: the controller log has the details)"
    )]
    Interrupted {
        /// `build` or `substitution`.
        stage: &'static str,
    },
}

fn build_message(e: &BuildError) -> String {
    match e {
        // Flux's wording for errors of the kustomize engine.
        BuildError::Kustomize(_) => format!("kustomize build failed: {e}"),
        _ => e.to_string(),
    }
}

/// Renders `inputs`: keys from `keys`, the build, variables from `variables`, substitution,
/// the history digest and commonMetadata.
pub async fn render(
    inputs: Inputs<'_>,
    keys: impl KeySource,
    variables: impl VariableSource,
    settings: Settings,
) -> Result<Rendered, RenderError> {
    let ks = inputs.kustomization;
    let keys = keys.keys(ks).await?;
    let asked_remote = Arc::new(AtomicBool::new(false));
    let fetcher = super::remote::fetcher(settings.allow_remote_bases);
    let remote = Some(super::remote::Noted::shared(fetcher, asked_remote.clone()));
    let (root, dir, plain) = (inputs.root.to_owned(), inputs.dir.to_owned(), inputs.plain);
    let spec = ks.spec.clone();
    // The keys move to the blocking thread and are dropped there.
    let Built {
        objects,
        mut secrets,
    } = off_runtime("build", move || match plain {
        Some(restrictions) => {
            super::build_offline(&root, &dir, None, restrictions, keys.as_ref(), remote)
        }
        None => super::build_with_secrets(&root, &dir, &spec, keys.as_ref(), remote),
    })
    .await?
    .map_err(RenderError::Build)?;
    // As Flux, the variables are read when the first object that takes substitution asks
    // for them (none asks: nothing is read), and a failed read names that object.
    let first_substituted = objects
        .iter()
        .find(|object| !envsubst::is_opted_out(object.as_map()));
    let vars = match first_substituted.map(kustomize_id) {
        Some(object) => {
            variables
                .variables(ks, &mut secrets)
                .await
                .map_err(|e| RenderError::Variables {
                    object: secrets.redact(&object),
                    source: e.redacted(&secrets),
                })?
        }
        None => None,
    };
    let strategy = ks
        .spec
        .post_build
        .as_ref()
        .and_then(|p| p.substitute_strategy)
        .unwrap_or_default();
    let strict = settings.strict_substitution;
    let spec = ks.spec.clone();
    off_runtime("substitution", move || {
        let mut objects = match vars {
            Some(vars) => {
                super::substitute_objects_redacting(objects, &vars, strategy, strict, &secrets)
                    .map_err(RenderError::Substitute)?
            }
            None => objects,
        };
        let digest = digest(&super::manifests_yaml(&objects));
        super::apply_common_metadata(&mut objects, &spec);
        Ok(Rendered {
            objects,
            digest,
            secrets,
            fetched_remote: asked_remote.load(Ordering::Relaxed),
        })
    })
    .await?
}

/// `object` as kustomize's `Gvk/name` names it in Flux's messages: `Kind.version.group/name`,
/// with `[noGrp]` (and `[noVer]`, `[noKind]`) for an empty part.
fn kustomize_id(object: &Object) -> String {
    let map = object.as_map();
    let text = |value: Option<&serde_json::Value>| {
        value
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let api_version = text(map.get("apiVersion"));
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let or = |part: &str, none: &str| {
        if part.is_empty() {
            none.to_string()
        } else {
            part.to_string()
        }
    };
    let metadata = map.get("metadata");
    format!(
        "{}.{}.{}/{}",
        or(&text(map.get("kind")), "[noKind]"),
        or(version, "[noVer]"),
        or(group, "[noGrp]"),
        text(metadata.and_then(|m| m.get("name")))
    )
}

/// The digest Flux records for a built set of manifests: `sha256:<hex>` of the YAML stream
/// ([`super::manifests_yaml`]).
pub fn digest(manifests: &str) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(manifests.as_bytes()))
    )
}

/// Runs a CPU-bound stage on tokio's blocking pool; a panic in it is logged and reported as
/// [`RenderError::Interrupted`].
async fn off_runtime<T, F>(stage: &'static str, work: F) -> Result<T, RenderError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(
            stage,
            panicked = e.is_panic(),
            "the {stage} stage did not finish"
        );
        RenderError::Interrupted { stage }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::KustomizationSpec;

    #[test]
    fn digests_are_sha256_of_the_yaml() {
        assert_eq!(
            digest(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn kustomization(spec: serde_json::Value) -> Kustomization {
        let mut spec = spec;
        spec["interval"] = "1m".into();
        spec["prune"] = true.into();
        spec["sourceRef"] = serde_json::json!({"kind": "GitRepository", "name": "repo"});
        let spec: KustomizationSpec = serde_json::from_value(spec).unwrap();
        Kustomization::new("app", spec)
    }

    const SETTINGS: Settings = Settings {
        strict_substitution: true,
        allow_remote_bases: false,
    };

    /// Renders the directory `dir` for `ks` with no keys and `vars` as the only variables.
    async fn render_dir(
        ks: &Kustomization,
        dir: &Path,
        vars: Option<BTreeMap<String, String>>,
        settings: Settings,
    ) -> Result<Rendered, RenderError> {
        let inputs = Inputs {
            kustomization: ks,
            root: dir,
            dir,
            plain: None,
        };
        render(inputs, LocalKeys(None), LocalVariables(vars), settings).await
    }

    #[tokio::test]
    async fn substitutes_then_digests_then_sets_common_metadata() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: ${VALUE}\n",
        );
        let ks = kustomization(serde_json::json!({
            "postBuild": {"substitute": {"VALUE": "v"}},
            "commonMetadata": {"labels": {"team": "platform"}}
        }));
        let vars = || Some(BTreeMap::from([("VALUE".to_string(), "v".to_string())]));
        let rendered = render_dir(&ks, dir.path(), vars(), SETTINGS).await.unwrap();
        assert_eq!(rendered.objects[0].as_map()["data"]["k"], "v");
        assert_eq!(rendered.objects[0].label("team"), Some("platform"));
        // The digest is that of the objects before commonMetadata.
        let plain = kustomization(serde_json::json!({"postBuild": {"substitute": {"VALUE": "v"}}}));
        let unlabelled = render_dir(&plain, dir.path(), vars(), SETTINGS)
            .await
            .unwrap();
        assert_eq!(unlabelled.objects[0].label("team"), None);
        assert_eq!(rendered.digest, unlabelled.digest);
        assert_eq!(
            rendered.digest,
            digest(&super::super::manifests_yaml(&unlabelled.objects))
        );
    }

    /// Variables whose `substituteFrom` ConfigMap `vars` cannot be read; counts the reads.
    struct Unreadable(Arc<std::sync::atomic::AtomicUsize>);

    impl VariableSource for Unreadable {
        async fn variables(
            self,
            _: &Kustomization,
            _: &mut SecretValues,
        ) -> Result<Option<BTreeMap<String, String>>, VariablesError> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Err(VariablesError {
                kind: "ConfigMap".into(),
                name: "vars".into(),
                message: "configmaps \"vars\" not found".into(),
            })
        }
    }

    #[tokio::test]
    async fn variables_are_read_for_the_first_object_that_takes_substitution_as_flux_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let opted_out = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n";
        write(dir.path(), "raw.yaml", opted_out);
        write(dir.path(), "kustomization.yaml", "resources: [raw.yaml]\n");
        let ks = kustomization(serde_json::json!({"postBuild": {"substituteFrom": [
            {"kind": "ConfigMap", "name": "vars"}
        ]}}));
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let render_with = async |reads: &Arc<std::sync::atomic::AtomicUsize>| {
            let inputs = Inputs {
                kustomization: &ks,
                root: dir.path(),
                dir: dir.path(),
                plain: None,
            };
            let variables = Unreadable(Arc::clone(reads));
            render(inputs, LocalKeys(None), variables, SETTINGS).await
        };
        render_with(&reads)
            .await
            .expect("no object takes substitution: nothing read");
        assert_eq!(reads.load(Ordering::Relaxed), 0);

        write(
            dir.path(),
            "deploy.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
        );
        write(
            dir.path(),
            "kustomization.yaml",
            "resources: [raw.yaml, deploy.yaml]\n",
        );
        let error = render_with(&reads).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "post build failed for 'Deployment.v1.apps/web': substitute from 'ConfigMap/vars' \
             error: configmaps \"vars\" not found"
        );
        assert_eq!(reads.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn an_unset_variable_fails_only_when_strict() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  k: x${MISSING}\n",
        );
        let ks = kustomization(serde_json::json!({"postBuild": {"substitute": {}}}));
        // With no variables at all, nothing is substituted (the default strategy).
        let vars = || Some(BTreeMap::from([("OTHER".into(), "o".into())]));
        let err = render_dir(&ks, dir.path(), vars(), SETTINGS)
            .await
            .unwrap_err();
        assert!(matches!(err, RenderError::Substitute(_)), "{err}");
        assert!(err.to_string().contains("MISSING"), "{err}");
        let lax = Settings {
            strict_substitution: false,
            ..SETTINGS
        };
        let rendered = render_dir(&ks, dir.path(), vars(), lax).await.unwrap();
        assert_eq!(rendered.objects[0].as_map()["data"]["k"], "x");
    }

    #[tokio::test]
    async fn kustomize_errors_carry_fluxs_prefix() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "kustomization.yaml",
            "resources: [missing.yaml]\n",
        );
        let ks = kustomization(serde_json::json!({}));
        let err = render_dir(&ks, dir.path(), None, SETTINGS)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("kustomize build failed: ") && err.contains("missing.yaml"),
            "{err}"
        );
    }
}
