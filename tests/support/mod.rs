//! Shared helpers for integration tests that need a real API server.
//!
//! Include with `mod support;` from a file in `tests/`. The control plane is the one started by
//! `tests/controlplane/up.sh` (etcd + kube-apiserver on loopback, no controller-manager), unless
//! `KC_TEST_KUBECONFIG` points at a kubeconfig to use instead. Tests never skip: if no API server
//! can be had, they panic with the reason.
//!
//! The default control plane runs kube-controller-manager, kube-scheduler and kwok's fake nodes:
//! Deployments roll out, pods become Ready, namespaces finish terminating.
#![allow(dead_code)]

pub mod bounded;
pub mod event_receiver;
pub mod hostile;
pub mod huawei_kms;
pub mod keyservers;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Env var naming a kubeconfig to use instead of starting the local control plane.
pub const KUBECONFIG_ENV: &str = "KC_TEST_KUBECONFIG";

/// Env var naming the kubeconfig of a second cluster, the remote one of `spec.kubeConfig`.
pub const REMOTE_KUBECONFIG_ENV: &str = "KC_TEST_REMOTE_KUBECONFIG";

/// Path of the admin kubeconfig for the test cluster; starts the control plane on first use
/// (once per process; `up.sh` itself serialises concurrent test binaries with a file lock).
pub fn kubeconfig_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| control_plane(KUBECONFIG_ENV, None))
        .clone()
}

/// Path of the admin kubeconfig of the remote test cluster (a bare etcd and kube-apiserver
/// in `<repo>/.controlplane-remote`), started on first use like [`kubeconfig_path`].
pub fn remote_kubeconfig_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| control_plane(REMOTE_KUBECONFIG_ENV, Some(".controlplane-remote")))
        .clone()
}

/// The kubeconfig named by `env_var`, or the one of a control plane `up.sh` starts (in
/// `state_dir`, bare, when given).
fn control_plane(env_var: &str, bare_state_dir: Option<&str>) -> PathBuf {
    if let Some(path) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let script = repo_root().join("tests/controlplane/up.sh");
    eprintln!(
        "support: starting a test control plane with {} (the first run builds kube-apiserver \
         and takes a while; set {env_var} to use an existing cluster)",
        script.display()
    );
    let mut command = Command::new("bash");
    command.arg(&script).stdin(Stdio::null());
    if let Some(dir) = bare_state_dir {
        command
            .arg(repo_root().join(dir))
            .env("KC_APISERVER_ONLY", "1");
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail = tail_lines(&stderr, 40);
    if !output.status.success() {
        panic!(
            "{} failed ({}); tests need an API server. Last lines of its stderr:\n{tail}",
            script.display(),
            output.status
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    if !path.is_file() {
        panic!(
            "{} did not print a kubeconfig path (stdout: {stdout:?}); stderr tail:\n{tail}",
            script.display()
        );
    }
    path
}

/// A client with admin rights on the test cluster.
pub async fn client() -> kube::Client {
    client_for(&kubeconfig_path()).await
}

/// A client with admin rights on the remote test cluster.
#[allow(dead_code)]
pub async fn remote_client() -> kube::Client {
    client_for(&remote_kubeconfig_path()).await
}

async fn client_for(path: &std::path::Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("cannot read kubeconfig {}: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", path.display()));
    kube::Client::try_from(config).expect("cannot build a kube client")
}

/// `kubectl --kubeconfig <test kubeconfig>`, using the kubectl built alongside kube-apiserver.
pub fn kubectl() -> Command {
    let mut cmd = Command::new(kubectl_binary());
    cmd.arg("--kubeconfig").arg(kubeconfig_path());
    cmd
}

/// The repository root (the package's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A reference tool the tests compare with (kustomize, sops): the binary `env_var` names, else
/// the one `script` (relative to the repository) installs and prints the path of on its last
/// stdout line. Panics with the script's stderr when it cannot be had: tests never skip.
pub fn reference_tool(env_var: &str, script: &str) -> PathBuf {
    installed(env_var, script, Path::is_file)
}

/// Reference data the tests read (Flux's CRD, the kustomize conformance corpus): the folder or
/// file `env_var` names, else what `script` fetches and prints the path of, as
/// [`reference_tool`] does.
pub fn reference_data(env_var: &str, script: &str) -> PathBuf {
    installed(env_var, script, Path::exists)
}

fn installed(env_var: &str, script: &str, usable: fn(&Path) -> bool) -> PathBuf {
    if let Some(path) = std::env::var_os(env_var).filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let script = repo_root().join(script);
    eprintln!(
        "getting {env_var} with {} (the first run builds or fetches it and takes a while; set \
         {env_var} to use an existing copy)",
        script.display()
    );
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    assert!(
        output.status.success() && usable(&path),
        "{} failed ({}) or printed no usable path (stdout: {stdout:?}); set {env_var} or fix it. \
         Its stderr:\n{}",
        script.display(),
        output.status,
        tail_lines(&stderr, 40)
    );
    path
}

/// Finds kubectl: `<state dir>/bin/kubectl` (symlink written by up.sh next to the kubeconfig),
/// else the newest `k8s-*/kubectl` in the binary cache, else `kubectl` from PATH.
fn kubectl_binary() -> PathBuf {
    let config = kubeconfig_path();
    if let Some(candidate) = config.parent().map(|dir| dir.join("bin/kubectl"))
        && candidate.is_file()
    {
        return candidate;
    }
    let cache = std::env::var_os("KC_TEST_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(|d| Path::new(&d).join("kustomize-controller-tests"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|d| Path::new(&d).join(".cache/kustomize-controller-tests"))
        });
    let mut cached: Vec<PathBuf> = cache
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("k8s-"))
        .map(|entry| entry.path().join("kubectl"))
        .filter(|path| path.is_file() && path.with_file_name("kube-apiserver").is_file())
        .collect();
    cached.sort();
    cached.pop().unwrap_or_else(|| PathBuf::from("kubectl"))
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A namespace with a unique name (`t-<prefix>-<random>`), deleted (without waiting) on drop.
pub struct TestNamespace {
    name: String,
}

impl TestNamespace {
    /// Creates the namespace; `prefix` is usually the test name (sanitised and truncated here).
    pub async fn new(client: &kube::Client, prefix: &str) -> Self {
        let name = unique_name(prefix);
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": { "name": name, "labels": { "kustomize-controller-tests/test": "true" } },
        }))
        .expect("namespace manifest");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("cannot create test namespace {name}: {e}"));
        TestNamespace { name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestNamespace {
    /// Best effort: runs `kubectl delete --wait=false` synchronously (works inside or outside a
    /// runtime); the cluster's namespace controller finishes the deletion in the background.
    fn drop(&mut self) {
        let result = kubectl()
            .args([
                "delete",
                "namespace",
                &self.name,
                "--wait=false",
                "--ignore-not-found",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "support: deleting namespace {} failed: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!(
                "support: cannot run kubectl to delete namespace {}: {e}",
                self.name
            ),
        }
    }
}

/// `t-<prefix>-<8 hex>`, a valid DNS label of at most 63 characters.
pub fn unique_name(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    let suffix = format!("{:08x}", hasher.finish() as u32);
    let mut base: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    base.truncate(63 - "t--".len() - suffix.len());
    let base = base.trim_matches('-');
    if base.is_empty() {
        format!("t-{suffix}")
    } else {
        format!("t-{base}-{suffix}")
    }
}

/// Polls `check` every 250 ms until it returns `Ok`, and returns that value. `Err` carries the
/// state observed so far; on timeout this panics with `what` and the last such state.
///
/// ```ignore
/// let cm = wait_for(Duration::from_secs(30), "configmap to appear", async || {
///     api.get_opt("x").await.ok().flatten().ok_or("not found yet")
/// }).await;
/// ```
pub async fn wait_for<T, E, F>(timeout: Duration, what: &str, mut check: F) -> T
where
    E: std::fmt::Debug,
    F: AsyncFnMut() -> Result<T, E>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(state) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last observed: {state:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}
