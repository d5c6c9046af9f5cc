//! Remote resources read through an injected fetcher: git repositories named by URL in
//! `resources` and `components`, and files named by http(s) URL. The fetcher here serves
//! "repositories" from directories written by each test (each clone a fresh copy) and files
//! from memory, so no test touches the network.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kustomize::{BuildOptions, ClonedRepo, RemoteError, RemoteFetcher, RepoSpec};

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

/// Copies `from` into `to`, symlinks as symlinks.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).expect("read_link");
            std::os::unix::fs::symlink(link, target).expect("symlink");
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

/// What a clone of one URL (and ref) gives.
enum Repo {
    /// A copy of this directory.
    Dir(PathBuf),
    /// git did not finish in time.
    Timeout,
    /// git failed with this message.
    Fails(String),
}

/// Counts live checkouts: one more on clone, one less when the guard is dropped.
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Default)]
struct FakeRemote {
    /// By clone URL, or `clone URL@ref`.
    repos: HashMap<String, Repo>,
    /// By URL: the body, or an HTTP status.
    files: HashMap<String, Result<String, u16>>,
    clones: Mutex<Vec<RepoSpec>>,
    fetches: Mutex<Vec<String>>,
    live: Arc<AtomicUsize>,
}

impl FakeRemote {
    fn repo(mut self, key: &str, dir: PathBuf) -> Self {
        self.repos.insert(key.to_string(), Repo::Dir(dir));
        self
    }

    fn failing_repo(mut self, key: &str, repo: Repo) -> Self {
        self.repos.insert(key.to_string(), repo);
        self
    }

    fn file(mut self, url: &str, body: Result<&str, u16>) -> Self {
        self.files.insert(url.to_string(), body.map(str::to_string));
        self
    }

    fn clones(&self) -> Vec<RepoSpec> {
        self.clones.lock().expect("lock").clone()
    }
}

impl RemoteFetcher for FakeRemote {
    fn clone_repo(&self, spec: &RepoSpec) -> Result<ClonedRepo, RemoteError> {
        self.clones.lock().expect("lock").push(spec.clone());
        let url = spec.clone_url();
        let with_ref = format!("{url}@{}", spec.git_ref);
        let repo = self
            .repos
            .get(&with_ref)
            .or_else(|| self.repos.get(&url))
            .ok_or_else(|| RemoteError::Failed(format!("fatal: repository '{url}' not found")))?;
        match repo {
            Repo::Dir(source) => {
                let checkout = tempfile::tempdir().expect("tempdir");
                copy_tree(source, checkout.path());
                self.live.fetch_add(1, Ordering::SeqCst);
                let dir = checkout.path().to_path_buf();
                Ok(ClonedRepo::new(dir, (checkout, Live(self.live.clone()))))
            }
            Repo::Timeout => Err(RemoteError::Timeout {
                operation: format!("git fetch --depth=1 {url}"),
                after: spec.timeout,
            }),
            Repo::Fails(message) => Err(RemoteError::Failed(message.clone())),
        }
    }

    fn fetch_file(&self, url: &str) -> Result<Vec<u8>, RemoteError> {
        self.fetches.lock().expect("lock").push(url.to_string());
        match self.files.get(url) {
            Some(Ok(body)) => Ok(body.clone().into_bytes()),
            Some(Err(status)) => Err(RemoteError::Http { status: *status }),
            None => Err(RemoteError::Failed(format!(
                "dial tcp: lookup for '{url}' failed"
            ))),
        }
    }
}

fn options(remote: &Arc<FakeRemote>) -> BuildOptions {
    BuildOptions {
        remote_fetcher: Some(remote.clone()),
        ..BuildOptions::default()
    }
}

fn build_yaml(root: &Path, dir: &str, remote: &Arc<FakeRemote>) -> String {
    match kustomize::build(root, &root.join(dir), &options(remote)) {
        Ok(objects) => goyaml::mappings_to_yaml_stream(objects.iter()),
        Err(e) => panic!("{dir}: {e}"),
    }
}

fn build_error(root: &Path, dir: &str, remote: &Arc<FakeRemote>) -> String {
    match kustomize::build(root, &root.join(dir), &options(remote)) {
        Ok(objects) => panic!("{dir} built {} objects", objects.len()),
        Err(e) => e.to_string(),
    }
}

fn pod(name: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n")
}

/// The repository kustomize's own remote-load tests use: a base, an overlay of it and a
/// component.
fn multibase(root: &Path) -> PathBuf {
    let repo = root.join("repos/multibase");
    write(
        &repo,
        &[
            (
                "base/kustomization.yaml",
                "resources: [pod.yaml]\nconfigMapGenerator:\n- name: cm\n  literals: [a=b]\n",
            ),
            ("base/pod.yaml", &pod("pod")),
            (
                "dev/kustomization.yaml",
                "resources: [../base]\nnamePrefix: dev-\n",
            ),
            (
                "comp/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nlabels:\n- pairs: {c: d}\n",
            ),
            ("kustomization.yaml", "resources: [pod.yaml]\n"),
            ("pod.yaml", &pod("root-pod")),
        ],
    );
    repo
}

#[test]
fn a_base_at_a_path_and_ref_of_a_repository_is_built_from_its_clone() {
    let (_keep, root) = tempdir();
    let repo = multibase(&root);
    let v2 = root.join("repos/multibase-v2");
    copy_tree(&repo, &v2);
    write(&v2, &[("base/pod.yaml", &pod("pod-v2"))]);
    let remote = Arc::new(
        FakeRemote::default()
            .repo("https://github.com/org/multibase", repo)
            .repo("https://github.com/org/multibase@v2", v2),
    );
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources:\n- https://github.com/org/multibase//dev?ref=v2&timeout=61&submodules=false\n- github.com/org/multibase/base\nnamespace: app\n",
        )],
    );
    let yaml = build_yaml(&root, "app", &remote);
    assert_eq!(
        yaml,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dev-pod-v2\n  namespace: app\n---\n\
         apiVersion: v1\ndata:\n  a: b\nkind: ConfigMap\nmetadata:\n  name: dev-cm-4h2mbtbbt6\n  namespace: app\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod\n  namespace: app\n---\n\
         apiVersion: v1\ndata:\n  a: b\nkind: ConfigMap\nmetadata:\n  name: cm-4h2mbtbbt6\n  namespace: app\n"
    );
    let clones = remote.clones();
    assert_eq!(clones.len(), 2);
    assert_eq!(clones[0].clone_url(), "https://github.com/org/multibase");
    assert_eq!(clones[0].git_ref, "v2");
    assert_eq!(clones[0].kust_root_path, "dev");
    assert_eq!(clones[0].timeout, Duration::from_secs(61));
    assert!(!clones[0].submodules);
    assert_eq!(clones[1].git_ref, "");
    assert_eq!(clones[1].timeout, Duration::from_secs(27));
    assert!(clones[1].submodules);
    // Every checkout is released once the build is done.
    assert_eq!(remote.live.load(Ordering::SeqCst), 0);
}

#[test]
fn a_remote_component_applies_to_the_kustomization_that_names_it() {
    let (_keep, root) = tempdir();
    let remote = Arc::new(FakeRemote::default().repo("file:///srv/multibase", multibase(&root)));
    write(
        &root,
        &[
            (
                "app/kustomization.yaml",
                "resources: [pod.yaml]\ncomponents:\n- file:///srv/multibase//comp\n",
            ),
            ("app/pod.yaml", &pod("local")),
        ],
    );
    assert_eq!(
        build_yaml(&root, "app", &remote),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    c: d\n  name: local\n"
    );
    // A Kustomization is no component, remote or not.
    write(
        &root,
        &[(
            "wrong/kustomization.yaml",
            "components:\n- file:///srv/multibase//dev\n",
        )],
    );
    let err = build_error(&root, "wrong", &remote);
    assert!(
        err.starts_with("wrong: in remote component 'file:///srv/multibase//dev': ")
            && err.contains("expected kind 'Component'"),
        "{err}"
    );
}

#[test]
fn an_http_file_resource_is_fetched_and_read_as_a_local_file_would_be() {
    let (_keep, root) = tempdir();
    let list = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: one\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: two\n";
    let remote = Arc::new(
        FakeRemote::default()
            .file("https://example.com/pod.yaml", Ok(&pod("web")))
            .file("HTTP://example.com/list.yaml", Ok(list))
            .file("https://example.com/env", Ok("KEY=value\n")),
    );
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources:\n- https://example.com/pod.yaml\n- HTTP://example.com/list.yaml\n\
             namePrefix: p-\nconfigMapGenerator:\n- name: env\n  envs: [https://example.com/env]\n\
             generatorOptions: {disableNameSuffixHash: true}\n",
        )],
    );
    assert_eq!(
        build_yaml(&root, "app", &remote),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-web\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p-one\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p-two\n---\n\
         apiVersion: v1\ndata:\n  KEY: value\nkind: ConfigMap\nmetadata:\n  name: p-env\n"
    );
    assert!(remote.clones().is_empty());
}

#[test]
fn a_remote_base_may_name_further_remote_bases() {
    let (_keep, root) = tempdir();
    let outer = root.join("repos/outer");
    write(
        &outer,
        &[
            (
                "app/kustomization.yaml",
                "resources:\n- https://example.com/org/inner//base?ref=v1\n- local.yaml\nnamePrefix: outer-\n",
            ),
            ("app/local.yaml", &pod("local")),
        ],
    );
    let inner = root.join("repos/inner");
    write(
        &inner,
        &[
            ("base/kustomization.yaml", "resources: [pod.yaml]\n"),
            ("base/pod.yaml", &pod("inner")),
        ],
    );
    let remote = Arc::new(
        FakeRemote::default()
            .repo("https://example.com/org/outer", outer)
            .repo("https://example.com/org/inner@v1", inner),
    );
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/outer//app]\n",
        )],
    );
    assert_eq!(
        build_yaml(&root, "app", &remote),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: outer-inner\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: outer-local\n"
    );
    assert_eq!(remote.clones().len(), 2);
    assert_eq!(remote.live.load(Ordering::SeqCst), 0);
}

#[test]
fn a_remote_base_naming_a_url_it_is_built_from_is_a_cycle() {
    let (_keep, root) = tempdir();
    let repo = root.join("repos/cycle");
    write(
        &repo,
        &[
            (
                "a/kustomization.yaml",
                "resources:\n- https://example.com/org/cycle//b\n",
            ),
            (
                "b/kustomization.yaml",
                "resources:\n- https://example.com/org/cycle//a\n",
            ),
        ],
    );
    let remote = Arc::new(FakeRemote::default().repo("https://example.com/org/cycle", repo));
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/cycle//a]\n",
        )],
    );
    let err = build_error(&root, "app", &remote);
    assert!(
        err.contains(
            "cycle detected: URI 'https://example.com/org/cycle//a' referenced by previous URI 'https://example.com/org/cycle//a'"
        ),
        "{err}"
    );
    assert!(
        err.starts_with("app: in remote base 'https://example.com/org/cycle//a': "),
        "{err}"
    );
    // The cycle is found before cloning again.
    assert_eq!(remote.clones().len(), 2);
}

#[test]
fn nesting_across_remote_bases_is_bounded() {
    let (_keep, root) = tempdir();
    let mut remote = FakeRemote::default();
    for n in 0..40 {
        let repo = root.join(format!("repos/r{n}"));
        write(
            &repo,
            &[(
                "kustomization.yaml",
                &format!("resources: [https://example.com/org/r{}]\n", n + 1),
            )],
        );
        remote = remote.repo(&format!("https://example.com/org/r{n}"), repo);
    }
    let remote = Arc::new(remote);
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/r0]\n",
        )],
    );
    let err = build_error(&root, "app", &remote);
    assert!(
        err.contains("kustomization directories nest more than 32 deep"),
        "{err}"
    );
    assert_eq!(remote.clones().len(), 31);
    assert_eq!(remote.live.load(Ordering::SeqCst), 0);
}

#[test]
fn a_remote_base_cannot_read_outside_its_clone_or_its_own_directory() {
    let (_keep, root) = tempdir();
    let repo = root.join("repos/escape");
    write(
        &repo,
        &[
            ("up/kustomization.yaml", "resources: [../../../app]\n"),
            (
                "file/kustomization.yaml",
                "resources: [../../secret.yaml]\n",
            ),
            (
                "sibling/kustomization.yaml",
                "resources: [../shared.yaml]\n",
            ),
            ("shared.yaml", &pod("shared")),
            ("pod.yaml", &pod("pod")),
        ],
    );
    std::os::unix::fs::symlink(root.join("app"), repo.join("to-local")).expect("symlink");
    std::os::unix::fs::symlink("/etc", repo.join("etc")).expect("symlink");
    write(
        &repo,
        &[(
            "linked/kustomization.yaml",
            "resources: [../etc/hostname]\n",
        )],
    );
    let remote = Arc::new(FakeRemote::default().repo("https://example.com/org/escape", repo));
    write(
        &root,
        &[
            ("app/kustomization.yaml", "resources: [secret.yaml]\n"),
            ("secret.yaml", &pod("secret")),
            ("app/secret.yaml", &pod("secret")),
        ],
    );
    for (path, reason) in [
        ("up", "resolves outside the root"),
        ("file", "resolves outside the root"),
        ("to-local", "resolves outside the root"),
        ("linked", "resolves outside the root"),
        // Files must lie under the kustomization's own directory in a clone.
        ("sibling", "is not in or below"),
        (
            "pod.yaml",
            "pod.yaml: is a file; a remote base must be a directory",
        ),
    ] {
        write(
            &root,
            &[(
                "top/kustomization.yaml",
                &format!("resources: [https://example.com/org/escape//{path}]\n"),
            )],
        );
        let err = build_error(&root, "top", &remote);
        assert!(
            err.starts_with(&format!(
                "top: in remote base 'https://example.com/org/escape//{path}': "
            )) && err.contains(reason),
            "{path}: {err}"
        );
        assert!(
            !err.contains("etc/hostname:") || err.contains("outside"),
            "{err}"
        );
    }
    assert_eq!(remote.live.load(Ordering::SeqCst), 0);
}

#[test]
fn fetcher_errors_are_reported_with_the_url() {
    let (_keep, root) = tempdir();
    let remote = Arc::new(
        FakeRemote::default()
            .failing_repo("https://example.com/org/slow", Repo::Timeout)
            .failing_repo(
                "file:///srv/broken",
                Repo::Fails("fatal: '/srv/broken' does not appear to be a git repository".into()),
            )
            .failing_repo(
                "https://user:secret@example.com/org/private",
                Repo::Fails("authentication failed".into()),
            )
            .file("https://example.com/missing.yaml", Err(404))
            .file(
                "https://example.com/org/repo/notyaml",
                Ok("key: [unclosed\n"),
            )
            .file(
                "https://example.com/org/slow/notyaml",
                Ok("key: [unclosed\n"),
            ),
    );
    let cases = [
        (
            "resources: [https://example.com/missing.yaml]",
            "app: accumulating resources from 'https://example.com/missing.yaml': HTTP Error: status code 404 (Not Found)",
        ),
        (
            "resources: ['https://example.com/org/slow?timeout=2m']",
            "app: accumulation err='accumulating resources from 'https://example.com/org/slow?timeout=2m': could not fetch 'https://example.com/org/slow?timeout=2m': dial tcp: lookup for 'https://example.com/org/slow?timeout=2m' failed': could not fetch 'https://example.com/org/slow?timeout=2m': git fetch --depth=1 https://example.com/org/slow timed out after 2m0s",
        ),
        (
            "resources: [file:///srv/broken]",
            "app: accumulation err='accumulating resources from 'file:///srv/broken': app/file:/srv/broken: no such file or directory': could not fetch 'file:///srv/broken': fatal: '/srv/broken' does not appear to be a git repository",
        ),
        (
            "components: ['https://user:secret@example.com/org/private//c?ref=v1']",
            "app: components: could not fetch 'https://user:xxxxx@example.com/org/private//c?ref=v1': authentication failed",
        ),
        (
            "components: [file:///srv/broken//comp]",
            "app: components: could not fetch 'file:///srv/broken//comp': fatal: '/srv/broken' does not appear to be a git repository",
        ),
        (
            "resources: [https://example.com/unreachable.yaml]",
            "app: accumulation err='accumulating resources from 'https://example.com/unreachable.yaml': could not fetch 'https://example.com/unreachable.yaml': dial tcp: lookup for 'https://example.com/unreachable.yaml' failed': 'https://example.com/unreachable.yaml' is not a repository URL kustomize can clone: failed to parse repo path segment",
        ),
        (
            "resources: ['ssh://git.example.com']",
            "app: accumulation err='accumulating resources from 'ssh://git.example.com': app/ssh:/git.example.com: no such file or directory': 'ssh://git.example.com' is not a repository URL kustomize can clone: failed to parse repo path segment",
        ),
        // The answer is not YAML and the URL's repository cannot be cloned either: only why
        // the file is not YAML is reported...
        (
            "resources: [https://example.com/org/repo/notyaml]",
            "https://example.com/org/repo/notyaml: ",
        ),
        // ... unless cloning timed out.
        (
            "resources: [https://example.com/org/slow/notyaml]",
            "app: accumulation err='accumulating resources from 'https://example.com/org/slow/notyaml': https://example.com/org/slow/notyaml: ",
        ),
        (
            "patches: [{path: 'https://example.com/missing.yaml'}]",
            "app: patches: failed to get the patch file from path(https://example.com/missing.yaml): could not fetch 'https://example.com/missing.yaml': HTTP Error: status code 404 (Not Found)",
        ),
    ];
    for (kustomization, expected) in cases {
        write(
            &root,
            &[("app/kustomization.yaml", &format!("{kustomization}\n"))],
        );
        let err = build_error(&root, "app", &remote);
        assert!(
            err.starts_with(expected),
            "{kustomization}:\n{err}\n{expected}"
        );
    }
    // A malformed answer from a repository URL: only the YAML error.
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/repo/notyaml]\n",
        )],
    );
    let err = build_error(&root, "app", &remote);
    assert!(!err.contains("accumulation err"), "{err}");
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/slow/notyaml]\n",
        )],
    );
    let err = build_error(&root, "app", &remote);
    assert!(err.ends_with("timed out after 27s"), "{err}");
}

#[test]
fn a_404_for_a_repository_url_falls_back_to_cloning_it() {
    let (_keep, root) = tempdir();
    let remote = Arc::new(
        FakeRemote::default()
            .repo("https://example.com/org/repo", multibase(&root))
            .file("https://example.com/org/repo//base", Err(404)),
    );
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/repo//base]\n",
        )],
    );
    let yaml = build_yaml(&root, "app", &remote);
    assert!(yaml.contains("name: pod\n"), "{yaml}");
    assert_eq!(
        *remote.fetches.lock().expect("lock"),
        vec!["https://example.com/org/repo//base".to_string()]
    );
}

#[test]
fn origins_record_the_repository_ref_and_path_as_kustomize_does() {
    let (_keep, root) = tempdir();
    let remote = Arc::new(
        FakeRemote::default()
            .repo("file:///tmp/hx/repo", multibase(&root))
            .file("http://127.0.0.1:18765/x.yaml", Ok(&pod("x")))
            .file(
                "http://127.0.0.1:18765/org/repo/v1/pod.yaml",
                Ok(&pod("pod2")),
            ),
    );
    write(
        &root,
        &[(
            "top/kustomization.yaml",
            "resources:\n- file:///tmp/hx/repo//dev?ref=v1\n- file:///tmp/hx/repo\n\
             - http://127.0.0.1:18765/x.yaml\n- http://127.0.0.1:18765/org/repo/v1/pod.yaml\n\
             components:\n- file:///tmp/hx/repo//comp\n\
             buildMetadata: [originAnnotations, transformerAnnotations]\n",
        )],
    );
    // As kustomize v5.8.2 prints it for the same tree (with `labels` for `commonLabels`).
    let transformations = |dev: bool| {
        let prefix = "      - repo: file:///tmp/hx/repo\n        ref: v1\n        configuredIn: dev/kustomization.yaml\n        configuredBy:\n          apiVersion: builtin\n          kind: PrefixTransformer\n";
        format!(
            "    alpha.config.kubernetes.io/transformations: |\n{}      - repo: file:///tmp/hx/repo\n        configuredIn: comp/kustomization.yaml\n        configuredBy:\n          apiVersion: builtin\n          kind: LabelTransformer\n",
            if dev { prefix } else { "" }
        )
    };
    let expected = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n{}    config.kubernetes.io/origin: |\n      path: base/pod.yaml\n      repo: file:///tmp/hx/repo\n      ref: v1\n  labels:\n    c: d\n  name: dev-pod\n---\n\
         apiVersion: v1\ndata:\n  a: b\nkind: ConfigMap\nmetadata:\n  annotations:\n{}    config.kubernetes.io/origin: |\n      repo: file:///tmp/hx/repo\n      ref: v1\n      configuredIn: base/kustomization.yaml\n      configuredBy:\n        apiVersion: builtin\n        kind: ConfigMapGenerator\n  labels:\n    c: d\n  name: dev-cm-4h2mbtbbt6\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n{}    config.kubernetes.io/origin: |\n      path: notCloned/pod.yaml\n      repo: file:///tmp/hx/repo\n  labels:\n    c: d\n  name: root-pod\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n{}    config.kubernetes.io/origin: |\n      path: http:/127.0.0.1:18765/x.yaml\n  labels:\n    c: d\n  name: x\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n{}    config.kubernetes.io/origin: |\n      path: v1/pod.yaml\n      repo: http://127.0.0.1:18765/org/repo\n  labels:\n    c: d\n  name: pod2\n",
        transformations(true),
        transformations(true),
        transformations(false),
        transformations(false),
        transformations(false),
    );
    assert_eq!(build_yaml(&root, "top", &remote), expected);
}

#[test]
fn without_a_fetcher_remote_entries_are_still_refused_by_name() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://github.com/org/repo//dev?ref=v1]\n",
        )],
    );
    let err = kustomize::build(&root, &root.join("app"), &BuildOptions::default())
        .expect_err("refused")
        .to_string();
    assert_eq!(
        err,
        "app: remote resource 'https://github.com/org/repo//dev?ref=v1' is not supported: only files inside the source artifact can be built"
    );
}

#[test]
fn local_entries_still_build_as_before_with_a_fetcher() {
    let (_keep, root) = tempdir();
    let remote = Arc::new(FakeRemote::default());
    write(
        &root,
        &[
            ("app/kustomization.yaml", "resources: [pod.yaml, ../base]\n"),
            ("app/pod.yaml", &pod("a")),
            ("base/kustomization.yaml", "resources: [pod.yaml]\n"),
            ("base/pod.yaml", &pod("b")),
        ],
    );
    let yaml = build_yaml(&root, "app", &remote);
    assert!(
        yaml.contains("name: a\n") && yaml.contains("name: b\n"),
        "{yaml}"
    );
    write(
        &root,
        &[("app/kustomization.yaml", "resources: [missing.yaml]\n")],
    );
    let err = build_error(&root, "app", &remote);
    assert_eq!(err, "app/missing.yaml: no such file or directory");
    assert!(remote.clones().is_empty());
}

#[test]
fn a_build_fetches_a_bounded_number_of_remote_files() {
    let (_keep, root) = tempdir();
    let mut remote = FakeRemote::default();
    let mut resources = String::from("resources:\n");
    for n in 0..300 {
        let url = format!("https://example.com/p{n}.yaml");
        remote = remote.file(&url, Ok(&pod(&format!("p{n}"))));
        resources.push_str(&format!("- {url}\n"));
    }
    let remote = Arc::new(remote);
    write(&root, &[("app/kustomization.yaml", &resources)]);
    let err = build_error(&root, "app", &remote);
    assert!(
        err.contains("'https://example.com/p256.yaml' would be remote fetch number 257"),
        "{err}"
    );
}

/// A fetcher that refuses every URL, as the controller's does under `--no-remote-bases`.
#[derive(Default)]
struct Refusing {
    calls: Mutex<Vec<&'static str>>,
}

impl RemoteFetcher for Refusing {
    fn clone_repo(&self, _spec: &RepoSpec) -> Result<ClonedRepo, RemoteError> {
        self.calls.lock().expect("lock").push("clone");
        Err(RemoteError::Refused("remote bases are not allowed".into()))
    }

    fn fetch_file(&self, _url: &str) -> Result<Vec<u8>, RemoteError> {
        self.calls.lock().expect("lock").push("fetch");
        Err(RemoteError::Refused("remote bases are not allowed".into()))
    }
}

#[test]
fn a_refused_url_stops_the_build_without_a_second_try_as_a_repository() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[(
            "app/kustomization.yaml",
            "resources: [https://example.com/org/repo//base?ref=v1]\n",
        )],
    );
    let refusing = Arc::new(Refusing::default());
    let options = BuildOptions {
        remote_fetcher: Some(refusing.clone()),
        ..BuildOptions::default()
    };
    let err = kustomize::build(&root, &root.join("app"), &options)
        .expect_err("a refused remote base fails the build")
        .to_string();
    assert_eq!(
        err.matches("remote bases are not allowed").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("https://example.com/org/repo//base?ref=v1"),
        "{err}"
    );
    assert_eq!(*refusing.calls.lock().expect("lock"), ["fetch"]);
}
