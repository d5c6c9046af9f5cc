//! The Git side of the real Flux stack, shared by the tests: bare repositories on the control
//! plane's Git server (tests/flux/source-up.sh) that the tests commit to, and the source
//! objects source-controller reconciles from them.
//!
//! A source made with [`create_git_source`] is the real stack: what is applied from it comes
//! with source-controller's revisions, digests and status updates. A GitRepository made with
//! [`create_git_repository`] is one source-controller leaves alone and whose artifact the test
//! writes itself: only for what no Git server can serve (a wrong digest, a hostile tarball, a
//! slow download). [`publish`] publishes to either.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use kube::api::ApiResource;

use super::*;

/// A bare repository on the control plane's Git server, and a work tree the test commits from.
pub(super) struct GitRepo {
    pub(super) url: String,
    work: PathBuf,
}

/// The Git server's root directory and URL, as tests/flux/source-up.sh wrote them.
pub(super) fn git_server() -> (PathBuf, String) {
    let flux = support::kubeconfig_path()
        .parent()
        .map(|state| state.join("flux"))
        .expect("the control plane's state directory");
    let read = |name: &str| {
        std::fs::read_to_string(flux.join(name))
            .map(|text| text.trim().to_string())
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}: up.sh starts the Git server beside source-controller",
                    flux.join(name).display()
                )
            })
    };
    (PathBuf::from(read("git-root")), read("git-url"))
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=e2e", "-c", "user.email=e2e@localhost"])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

impl GitRepo {
    /// A new, empty repository named after `prefix`.
    pub(super) fn new(prefix: &str) -> GitRepo {
        let (root, url) = git_server();
        let name = support::unique_name(prefix);
        let bare = root.join(format!("{name}.git"));
        let work = std::env::temp_dir().join(format!("{name}-work"));
        std::fs::create_dir_all(&work).expect("work tree");
        git(
            &root,
            &[
                "init",
                "-q",
                "--bare",
                "--initial-branch=main",
                &format!("{name}.git"),
            ],
        );
        git(&work, &["init", "-q", "--initial-branch=main"]);
        git(
            &work,
            &["remote", "add", "origin", &bare.display().to_string()],
        );
        GitRepo {
            url: format!("{url}/{name}.git"),
            work,
        }
    }

    /// Commits `files` (path, content; an empty content removes the file) on the current
    /// branch, pushes it, and returns the commit id.
    pub(super) fn commit(&self, message: &str, files: &[(&str, &str)]) -> String {
        for (path, content) in files {
            let full = self.work.join(path);
            if content.is_empty() {
                let _ = std::fs::remove_file(&full);
            } else {
                if let Some(dir) = full.parent() {
                    std::fs::create_dir_all(dir).expect("dir");
                }
                std::fs::write(&full, content).expect("write file");
            }
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        git(&self.work, &["push", "-q", "origin", "HEAD:main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// Commits a tree of exactly `files` (path, content), whatever the last commit held, pushes
    /// it, and returns the commit id. A commit is made even when nothing changed, so that each
    /// call is a new revision.
    pub(super) fn commit_tree<P: AsRef<str>, C: AsRef<str>>(
        &self,
        message: &str,
        files: &[(P, C)],
    ) -> String {
        for entry in std::fs::read_dir(&self.work).expect("read the work tree") {
            let path = entry.expect("work tree entry").path();
            if path.file_name().is_some_and(|name| name == ".git") {
                continue;
            }
            if path.is_dir() {
                std::fs::remove_dir_all(&path).expect("clear the work tree");
            } else {
                std::fs::remove_file(&path).expect("clear the work tree");
            }
        }
        for (path, content) in files {
            let full = self.work.join(path.as_ref());
            if let Some(dir) = full.parent() {
                std::fs::create_dir_all(dir).expect("dir");
            }
            std::fs::write(&full, content.as_ref()).expect("write file");
        }
        git(&self.work, &["add", "-A"]);
        git(
            &self.work,
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        git(&self.work, &["push", "-q", "origin", "HEAD:main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// The work tree: the repository's files as of the last commit, plus local edits.
    pub(super) fn work_tree(&self) -> &std::path::Path {
        &self.work
    }

    /// Tags the current commit `tag` and pushes the tag.
    pub(super) fn tag(&self, tag: &str) {
        git(&self.work, &["tag", tag]);
        git(&self.work, &["push", "-q", "origin", tag]);
    }
}

/// The API of source kind `kind` (`GitRepository`, `OCIRepository`, `Bucket`) in `ns`.
pub(super) fn source_api(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let lower = kind.to_lowercase();
    let plural = match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    };
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", kind),
            &plural,
        ),
    )
}

pub(super) fn git_repository_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    source_api(client, ns, "GitRepository")
}

/// Creates the source object `source` (its apiVersion, kind and metadata included).
pub(super) async fn create_source_object(api: &Api<DynamicObject>, source: Value) {
    let object: DynamicObject = serde_json::from_value(source).expect("source object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create the source");
}

/// Waits until source-controller has stored an artifact of source `name` whose revision
/// `accept` takes, and returns that revision.
pub(super) async fn wait_source_artifact(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    accept: impl Fn(&str) -> bool,
) -> String {
    wait_for(WAIT, what, async || {
        let source = api.get(name).await.map_err(|e| e.to_string())?;
        match source.data["status"]["artifact"]["revision"].as_str() {
            Some(revision) if accept(revision) => Ok(revision.to_string()),
            _ => Err(format!("status: {}", source.data["status"])),
        }
    })
    .await
}

/// A GitRepository `name` of `url` at `reference` (`{"branch": "main"}`, `{"tag": ...}`, ...),
/// reconciled by source-controller.
pub(super) async fn create_source(
    client: &kube::Client,
    ns: &str,
    name: &str,
    url: &str,
    reference: Value,
) {
    create_source_object(
        &git_repository_api(client, ns),
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"url": url, "interval": "1h", "timeout": "20s", "ref": reference},
        }),
    )
    .await;
}

/// Asks source-controller to fetch GitRepository `name` now, as `flux reconcile source git`
/// does, and returns the request's token.
pub(super) async fn request_fetch(client: &kube::Client, ns: &str, name: &str) -> String {
    let token = format!("{:?}", std::time::SystemTime::now());
    let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}});
    git_repository_api(client, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotate GitRepository");
    token
}

/// A namespace and a source name.
type SourceKey = (String, String);

/// The repositories behind the sources made with [`create_git_source`].
static REPOSITORIES: LazyLock<Mutex<HashMap<SourceKey, Arc<GitRepo>>>> =
    LazyLock::new(Default::default);

/// The revision of each publication, by source and publication number.
static PUBLISHED: LazyLock<Mutex<HashMap<(SourceKey, u32), String>>> =
    LazyLock::new(Default::default);

fn key(ns: &str, name: &str) -> SourceKey {
    (ns.to_string(), name.to_string())
}

/// A GitRepository `name` in `ns` that source-controller reconciles, of branch `main` of a new
/// (still empty) repository on the control plane's Git server.
pub(super) async fn create_git_source(client: &kube::Client, ns: &str, name: &str) {
    let repo = GitRepo::new(&format!("{ns}-{name}"));
    create_source(client, ns, name, &repo.url, json!({"branch": "main"})).await;
    REPOSITORIES
        .lock()
        .expect("repositories lock")
        .insert(key(ns, name), Arc::new(repo));
}

/// Publishes `files` (the whole tree) as publication `n` of GitRepository `name` in `ns`, and
/// returns its revision: for a source made with [`create_git_source`], a commit that
/// source-controller has fetched and stored; otherwise a forged artifact at `revision(n)`.
pub(super) async fn publish<P: AsRef<str>, C: AsRef<str>>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    n: u32,
    files: &[(P, C)],
) -> String {
    let repo = REPOSITORIES
        .lock()
        .expect("repositories lock")
        .get(&key(ns, name))
        .cloned();
    let published = match repo {
        Some(repo) => {
            let commit = repo.commit_tree(&format!("publication {n}"), files);
            let token = request_fetch(client, ns, name).await;
            let revision = format!("main@sha1:{commit}");
            wait_fetch_finished(client, ns, name, &token, &revision).await;
            revision
        }
        None => {
            let (url, digest) = serve(tarball(files));
            publish_artifact(client, ns, name, &revision(n), &url, &digest).await;
            revision(n)
        }
    };
    PUBLISHED
        .lock()
        .expect("published lock")
        .insert((key(ns, name), n), published.clone());
    published
}

/// Waits until source-controller has finished the fetch requested with `token`: the artifact
/// of `revision` stored, Ready, and the request marked handled. Its last status write is then
/// behind it, so nothing more of this fetch reaches the Kustomizations of the source.
async fn wait_fetch_finished(
    client: &kube::Client,
    ns: &str,
    name: &str,
    token: &str,
    revision: &str,
) {
    let api = git_repository_api(client, ns);
    wait_for(
        WAIT,
        &format!("source-controller stores GitRepository {ns}/{name} at {revision}"),
        async || {
            let source = api.get(name).await.map_err(|e| e.to_string())?;
            let status = &source.data["status"];
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let finished = status["artifact"]["revision"] == revision
                && status["lastHandledReconcileAt"] == token
                && status["observedGeneration"] == source.metadata.generation.unwrap_or(-1)
                && ready;
            if finished {
                Ok(())
            } else {
                Err(format!("status: {status}"))
            }
        },
    )
    .await;
}

/// The revision of publication `n` of GitRepository `name` in `ns`.
pub(super) fn published_revision(ns: &str, name: &str, n: u32) -> String {
    PUBLISHED
        .lock()
        .expect("published lock")
        .get(&(key(ns, name), n))
        .cloned()
        .unwrap_or_else(|| panic!("publication {n} of {ns}/{name} was never published"))
}
