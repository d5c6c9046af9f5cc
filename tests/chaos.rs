//! Faults: 100 Kustomizations reconciled while the controller is SIGKILLed at random points
//! (at least 30 times, prunes always under way because every source keeps changing), while
//! kube-apiserver restarts three times and etcd stops answering for 30 s. At the end every
//! Kustomization is Ready at its source's last revision, the live objects are exactly the
//! union of the last builds, and deleting every Kustomization, with the controller killed
//! again while it finalizes them, leaves no finalizer stuck and no object behind.
//!
//! Needs a control plane that `tests/controlplane/up.sh` started (it restarts its processes);
//! `make test` runs it on its own, after the other test binaries of its package. The counts
//! are printed (`--nocapture`). `KC_CHAOS_KUSTOMIZATIONS` and `KC_CHAOS_KILLS` change the
//! scale.

#[allow(dead_code)]
#[path = "support/artifacts.rs"]
mod artifacts;
#[path = "support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kustomize_controller::api::Kustomization;
use serde_json::json;
use support::{TestNamespace, wait_for};

const BINARY: &str = env!("CARGO_BIN_EXE_kustomize-controller");
/// Sources: each serves the directories of a tenth of the Kustomizations.
const SOURCES: usize = 10;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The control plane's state directory (up.sh keeps the kubeconfig in it).
fn state_dir() -> PathBuf {
    let kubeconfig = support::kubeconfig_path();
    let dir = kubeconfig.parent().expect("kubeconfig dir").to_path_buf();
    assert!(
        dir.join("etcd.pid").is_file() && dir.join("kube-apiserver.pid").is_file(),
        "{} was not started by tests/controlplane/up.sh: the fault test restarts its processes",
        dir.display()
    );
    dir
}

/// The controller process; SIGKILLed when dropped.
struct Controller {
    child: Child,
}

impl Controller {
    fn start(selector: &str, log: &Path) -> Controller {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("controller log");
        let child = Command::new(BINARY)
            .args([
                "--log-encoding=console",
                "--metrics-addr=127.0.0.1:0",
                "--health-addr=127.0.0.1:0",
                "--interval-jitter-percentage=0",
                &format!("--watch-label-selector={selector}"),
            ])
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the controller");
        Controller { child }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The files of source `source` at revision `revision`: for each of its Kustomizations, a
/// ConfigMap kept throughout, one present on even revisions only and one renamed on every
/// revision, so that each new revision prunes.
fn source_files(
    ns: &str,
    source: usize,
    kustomizations: usize,
    revision: u32,
) -> Vec<(String, String)> {
    let mut files = Vec::new();
    for ks in (source..kustomizations).step_by(SOURCES) {
        for name in expected_names(ks, revision) {
            files.push((
                format!("ks-{ks}/{name}.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  revision: \"{revision}\"\n"
                ),
            ));
        }
    }
    files
}

/// The ConfigMaps Kustomization `ks` builds at `revision`.
fn expected_names(ks: usize, revision: u32) -> Vec<String> {
    let mut names = vec![format!("ks-{ks}-kept"), format!("ks-{ks}-r{revision}")];
    if revision.is_multiple_of(2) {
        names.push(format!("ks-{ks}-even"));
    }
    names
}

fn revision(n: u32) -> String {
    format!("main@sha1:{n:040x}")
}

async fn publish(client: &kube::Client, ns: &str, source: usize, kustomizations: usize, n: u32) {
    let files = source_files(ns, source, kustomizations, n);
    let (url, digest) = artifacts::serve(artifacts::tarball(&files));
    artifacts::publish_artifact(
        client,
        ns,
        &format!("src-{source}"),
        &revision(n),
        &url,
        &digest,
    )
    .await;
}

#[tokio::test]
async fn nothing_is_lost_when_the_controller_and_the_api_server_die_mid_reconcile() {
    let kustomizations = setting("KC_CHAOS_KUSTOMIZATIONS", 100);
    let kills = setting("KC_CHAOS_KILLS", 30);
    let state = state_dir();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "chaos").await;
    let ns = ns.name().to_string();
    let run = support::unique_name("chaos");
    let log = std::env::temp_dir().join(format!("{run}-controller.log"));
    eprintln!("chaos: controller log {}", log.display());

    let mut revisions = [1u32; SOURCES];
    for source in 0..SOURCES {
        artifacts::create_git_repository(&client, &ns, &format!("src-{source}")).await;
        publish(&client, &ns, source, kustomizations, 1).await;
    }
    let api: Api<Kustomization> = Api::namespaced(client.clone(), &ns);
    for ks in 0..kustomizations {
        let object: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": format!("ks-{ks}"), "namespace": ns, "labels": {"kc-test/run": run}},
            "spec": {
                "interval": "10m", "retryInterval": "2s", "prune": true, "timeout": "30s",
                "path": format!("./ks-{ks}"),
                "sourceRef": {"kind": "GitRepository", "name": format!("src-{}", ks % SOURCES)},
            },
        }))
        .expect("kustomization");
        api.create(&PostParams::default(), &object)
            .await
            .expect("create Kustomization");
    }

    let selector = format!("kc-test/run={run}");
    let started = Instant::now();
    let mut controller = Controller::start(&selector, &log);
    let (mut published, mut apiserver_restarts, mut etcd_pauses) = (0, 0, 0);
    for kill in 1..=kills {
        // A random point of whatever the controller is doing.
        tokio::time::sleep(Duration::from_millis(300 + rand::random::<u64>() % 2700)).await;
        drop(controller);
        // New revisions keep every source changing, so prunes are always under way.
        let source = rand::random::<u64>() as usize % SOURCES;
        revisions[source] += 1;
        let next = revisions[source];
        publish(&client, &ns, source, kustomizations, next).await;
        published += 1;
        controller = Controller::start(&selector, &log);
        if kill % 10 == 5 {
            let status = Command::new("bash")
                .arg(support::repo_root().join("tests/controlplane/restart.sh"))
                .arg(&state)
                .arg("kube-apiserver")
                .status()
                .expect("restart kube-apiserver");
            assert!(status.success(), "restarting kube-apiserver failed");
            apiserver_restarts += 1;
        }
        if kill == kills / 2 {
            let etcd = std::fs::read_to_string(state.join("etcd.pid")).expect("etcd pid");
            let signal = |name: &str| {
                let status = Command::new("kill")
                    .args([name, etcd.trim()])
                    .status()
                    .expect("signal etcd");
                assert!(status.success(), "kill {name} etcd failed");
            };
            signal("-STOP");
            tokio::time::sleep(Duration::from_secs(30)).await;
            signal("-CONT");
            etcd_pauses += 1;
        }
    }
    while apiserver_restarts < 3 {
        let status = Command::new("bash")
            .arg(support::repo_root().join("tests/controlplane/restart.sh"))
            .arg(&state)
            .arg("kube-apiserver")
            .status()
            .expect("restart kube-apiserver");
        assert!(status.success(), "restarting kube-apiserver failed");
        apiserver_restarts += 1;
    }
    let faults_done = started.elapsed();

    // Every Kustomization converges to its source's last revision.
    let converged = Instant::now();
    wait_for(
        Duration::from_secs(300),
        "every Kustomization Ready at its last revision",
        async || {
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            let behind: Vec<String> = list
                .items
                .iter()
                .filter(|ks| {
                    let source: usize = ks.spec.source_ref.name[4..].parse().unwrap_or(0);
                    let status = ks.status.clone().unwrap_or_default();
                    let ready = status.conditions.unwrap_or_default().iter().any(|c| {
                        c.type_ == "Ready"
                            && c.status == kustomize_controller::api::ConditionStatus::True
                    });
                    !(ready
                        && status.last_applied_revision.as_deref()
                            == Some(revision(revisions[source]).as_str()))
                })
                .map(|ks| ks.metadata.name.clone().unwrap_or_default())
                .collect();
            if behind.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{} behind, e.g. {:?}",
                    behind.len(),
                    &behind[..behind.len().min(5)]
                ))
            }
        },
    )
    .await;
    let converge_time = converged.elapsed();

    // Exactly the union of the last builds: nothing missing, nothing left over.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let live: BTreeMap<String, String> = config_maps
        .list(&ListParams::default().labels("kustomize.toolkit.fluxcd.io/name"))
        .await
        .expect("list ConfigMaps")
        .items
        .into_iter()
        .filter_map(|cm| {
            let revision = cm.data.as_ref()?.get("revision")?.clone();
            Some((cm.metadata.name?, revision))
        })
        .collect();
    let names: BTreeSet<String> = live.keys().cloned().collect();
    let expected: BTreeSet<String> = (0..kustomizations)
        .flat_map(|ks| expected_names(ks, revisions[ks % SOURCES]))
        .collect();
    let missing: Vec<&String> = expected.difference(&names).collect();
    let extra: Vec<&String> = names.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, left over {extra:?}"
    );
    for ks in 0..kustomizations {
        let want = revisions[ks % SOURCES].to_string();
        assert_eq!(live.get(&format!("ks-{ks}-kept")), Some(&want), "ks-{ks}");
    }

    // Deletion, with the controller killed while it finalizes: no finalizer stays, no object
    // is left. All are marked for deletion while no controller runs, so that each restart
    // below finds finalization under way.
    drop(controller);
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete the Kustomizations");
    let finalization_kills = setting("KC_CHAOS_FINALIZATION_KILLS", 5);
    let mut finalizing_at_kills = Vec::with_capacity(finalization_kills);
    for _ in 0..finalization_kills {
        let running = Controller::start(&selector, &log);
        tokio::time::sleep(Duration::from_millis(100 + rand::random::<u64>() % 400)).await;
        let left = api
            .list(&ListParams::default())
            .await
            .map_or(0, |list| list.items.len());
        finalizing_at_kills.push(left);
        drop(running);
    }
    assert!(
        finalizing_at_kills.first() > Some(&0),
        "finalization was over before the first kill: {finalizing_at_kills:?}"
    );
    let controller = Controller::start(&selector, &log);
    wait_for(
        Duration::from_secs(120),
        "every Kustomization gone",
        async || {
            let left = api
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if left == 0 {
                Ok(())
            } else {
                Err(format!("{left} left"))
            }
        },
    )
    .await;
    wait_for(Duration::from_secs(60), "every object pruned", async || {
        let left = config_maps
            .list(&ListParams::default().labels("kustomize.toolkit.fluxcd.io/name"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} left"))
        }
    })
    .await;
    drop(controller);
    eprintln!(
        "chaos: {kustomizations} Kustomizations, {kills} controller SIGKILLs, {published} revisions published, \
         {apiserver_restarts} kube-apiserver restarts, {etcd_pauses} etcd pause of 30 s, faults over in {:.0?}; \
         converged {:.1?} later; {} objects exactly as built; all deleted with no finalizer left, \
         through {finalization_kills} SIGKILLs during finalization (Kustomizations left at each: \
         {finalizing_at_kills:?})",
        faults_done,
        converge_time,
        expected.len()
    );
}
