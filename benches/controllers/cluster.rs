//! The bench's own control plane (tests/controlplane/up.sh in target/bench-controlplane), a
//! client for it, and its request counters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// A running control plane; stopped with down.sh on drop unless `keep` is set.
pub struct ControlPlane {
    pub state_dir: PathBuf,
    pub kubeconfig: PathBuf,
    repo_root: PathBuf,
    keep: bool,
}

impl ControlPlane {
    /// Starts (or reuses) the control plane in `state_dir` with up.sh: etcd and kube-apiserver,
    /// and with `workload_controllers` kube-controller-manager, kube-scheduler and kwok.
    pub fn up(
        repo_root: &Path,
        state_dir: &Path,
        workload_controllers: bool,
        keep: bool,
    ) -> ControlPlane {
        let script = repo_root.join("tests/controlplane/up.sh");
        eprintln!(
            "bench: starting the control plane in {}",
            state_dir.display()
        );
        let mut up = Command::new("bash");
        // The compared controllers read the bench's own artifact server: no source-controller
        // competes with them for the API server's CPU.
        up.env("KC_NO_SOURCE_CONTROLLER", "1");
        if !workload_controllers {
            up.env("KC_APISERVER_ONLY", "1");
        }
        let output = up
            .arg(&script)
            .arg(state_dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            output.status.success(),
            "{} failed ({})",
            script.display(),
            output.status
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let kubeconfig = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
        assert!(
            kubeconfig.is_file(),
            "up.sh printed no kubeconfig path: {stdout:?}"
        );
        ControlPlane {
            state_dir: state_dir.to_path_buf(),
            kubeconfig,
            repo_root: repo_root.to_path_buf(),
            keep,
        }
    }

    /// An admin client.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.kubeconfig.display()));
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| {
                    panic!("invalid kubeconfig {}: {e}", self.kubeconfig.display())
                });
        kube::Client::try_from(config).expect("build a kube client")
    }

    /// `kubectl --kubeconfig <ours>`, with the kubectl up.sh linked into the state directory.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new(self.state_dir.join("bin/kubectl"));
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        cmd
    }

    /// The pid up.sh recorded for `name` (`kube-apiserver` or `etcd`).
    pub fn pid(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.state_dir.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// kube-apiserver's `apiserver_request_total`, summed per [`RequestKey`].
    pub fn request_counts(&self) -> BTreeMap<RequestKey, u64> {
        let output = self
            .kubectl()
            .args(["get", "--raw", "/metrics"])
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl get --raw /metrics");
        assert!(
            output.status.success(),
            "kubectl get --raw /metrics failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        parse_request_counts(&String::from_utf8_lossy(&output.stdout))
    }
}

/// What kube-apiserver counts a request under: its verb as the apiserver names it (`GET`,
/// `LIST`, `POST`, `PATCH`, `APPLY` for server-side apply, `DELETECOLLECTION`, ...), with
/// ` (dry-run)` appended for dry-run requests, and `resource[/subresource]` (or the path, such
/// as `/metrics`, for non-resource requests).
pub type RequestKey = (String, String);

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.keep {
            eprintln!(
                "bench: control plane left running; stop it with tests/controlplane/down.sh {}",
                self.state_dir.display()
            );
            return;
        }
        let status = Command::new("bash")
            .arg(self.repo_root.join("tests/controlplane/down.sh"))
            .arg(&self.state_dir)
            .stdin(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("bench: down.sh failed: {status:?}");
        }
    }
}

/// Sums `apiserver_request_total` samples per [`RequestKey`].
fn parse_request_counts(metrics: &str) -> BTreeMap<RequestKey, u64> {
    let mut counts = BTreeMap::new();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let value = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        let get = |name| label(labels, name).unwrap_or_default();
        let mut verb = get("verb").to_string();
        if !get("dry_run").is_empty() {
            verb.push_str(" (dry-run)");
        }
        let resource = match (get("resource"), get("subresource")) {
            ("", path) => path.to_string(),
            (resource, "") => resource.to_string(),
            (resource, sub) => format!("{resource}/{sub}"),
        };
        *counts.entry((verb, resource)).or_default() += value;
    }
    counts
}

/// The value of `name="..."` in a Prometheus label set.
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(&labels[start..end])
}

/// `after - before` per key; keys only in `after` count from zero.
pub fn diff_counts<K: Ord + Clone>(
    before: &BTreeMap<K, u64>,
    after: &BTreeMap<K, u64>,
) -> BTreeMap<K, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*before.get(k).unwrap_or(&0))))
        .filter(|(_, v)| *v > 0)
        .collect()
}
