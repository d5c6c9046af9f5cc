//! Flux's sharding, as Flux documents it: several controller instances on one cluster, each
//! started with `--watch-label-selector` — a shard for `sharding.fluxcd.io/key in (shard1)`,
//! one for `sharding.fluxcd.io/key in (shard2)` and the main instance for
//! `!sharding.fluxcd.io/key` — each reconciling exactly the Kustomizations its selector
//! matches, and a Kustomization whose label changes moving, objects and all, to the instance
//! its new label selects.
//!
//! Which instance reconciled what is read from the instances' logs: every line a reconcile
//! logs carries the Kustomization in its span (`object.ref=…/<name>.<namespace>`), and each
//! reconcile that succeeds logs `Reconciliation finished in …` with the Kustomization's name
//! and the revision it applied.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use sha2::{Digest, Sha256};

use super::*;

/// Flux's sharding label.
const SHARD_KEY: &str = "sharding.fluxcd.io/key";

/// Value of [`SHARD_LABEL`] on every Kustomization of this file, and part of every selector
/// of its instances: the instances here and the controllers of the other tests of this
/// binary never see each other's Kustomizations (the binary's shared controller watches
/// `!kc-test/shard`, which would otherwise take the unlabelled ones here as well).
const GROUP: &str = "flux-sharding";

/// The three instances of a sharded installation.
struct Instances {
    shard1: ControllerProcess,
    shard2: ControllerProcess,
    main: ControllerProcess,
}

impl Instances {
    fn all(&self) -> [(&'static str, &ControllerProcess); 3] {
        [
            ("shard1", &self.shard1),
            ("shard2", &self.shard2),
            ("main", &self.main),
        ]
    }

    /// The instance whose selector matches Flux's shard key `key` (none: the main one).
    fn owner(&self, key: Option<&str>) -> &ControllerProcess {
        match key {
            Some("shard1") => &self.shard1,
            Some("shard2") => &self.shard2,
            None => &self.main,
            Some(other) => panic!("no instance for shard {other}"),
        }
    }

    /// The end of every instance's log so far, in the order of [`Instances::all`].
    fn marks(&self) -> [usize; 3] {
        self.all().map(|(_, instance)| mark(instance))
    }

    /// Where `marks` marked the log of the owner of `key`.
    fn mark_of(&self, marks: &[usize; 3], key: Option<&str>) -> usize {
        let owner = self.owner(key);
        let index = self
            .all()
            .iter()
            .position(|(_, instance)| std::ptr::eq(*instance, owner))
            .expect("an instance");
        marks[index]
    }

    /// The last lines of every instance's log, for failure messages.
    fn tails(&self) -> String {
        self.all()
            .iter()
            .map(|(name, instance)| {
                format!(
                    "--- {name} instance log tail ---\n{}",
                    tail(&without_colours(&instance.log()), 15)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The label selector of an instance for `expression`, restricted to this run's
/// Kustomizations of `group`.
fn selector(group: &str, expression: &str) -> String {
    format!(
        "{RUN_LABEL}={},{SHARD_LABEL}={group},{expression}",
        run_id()
    )
}

/// The instances, started with the selectors of Flux's sharding guide (and this run's labels).
fn instances() -> &'static Instances {
    static INSTANCES: OnceLock<Instances> = OnceLock::new();
    INSTANCES.get_or_init(|| {
        let start = |name: &str, expression: &str| {
            start_controller(
                &format!("sharding-{name}"),
                &[&format!(
                    "--watch-label-selector={}",
                    selector(GROUP, expression)
                )],
            )
        };
        Instances {
            shard1: start("shard1", &format!("{SHARD_KEY} in (shard1)")),
            shard2: start("shard2", &format!("{SHARD_KEY} in (shard2)")),
            main: start("main", &format!("!{SHARD_KEY}")),
        }
    })
}

// ---------------------------------------------------------------------------------------
// Reading the instances' logs.

/// Whether `line` (plain) was logged by a reconcile of the Kustomization `ns/name`: in its
/// span, or, outside any reconcile's span, with its name (and namespace, when given) as
/// fields.
fn names(line: &str, ns: &str, name: &str) -> bool {
    let tokens: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == '{' || c == '}')
        .collect();
    let field = |key: &str, value: &str| {
        tokens
            .iter()
            .any(|t| *t == format!("{key}={value}") || *t == format!("{key}=\"{value}\""))
    };
    let has = |key: &str| tokens.iter().any(|t| t.starts_with(&format!("{key}=")));
    if has("object.ref") {
        field(
            "object.ref",
            &format!("Kustomization.v1.kustomize.toolkit.fluxcd.io/{name}.{ns}"),
        )
    } else {
        field("kustomization", name) && (!has("namespace") || field("namespace", ns))
    }
}

/// The lines of `log` logged by reconciles of the Kustomization `ns/name`.
fn lines_naming(log: &str, ns: &str, name: &str) -> Vec<String> {
    without_colours(log)
        .lines()
        .filter(|line| names(line, ns, name))
        .map(str::to_string)
        .collect()
}

/// The revisions of the reconciles of `ns/name` that `log` records as finished, in order.
fn finished_revisions(log: &str, ns: &str, name: &str) -> Vec<String> {
    lines_naming(log, ns, name)
        .iter()
        .filter(|line| line.contains("Reconciliation finished in "))
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|token| token.strip_prefix("revision="))
                .map(|r| r.trim_matches('"').to_string())
        })
        .collect()
}

/// A position in an instance's log: the end of its last complete line.
fn mark(instance: &ControllerProcess) -> usize {
    instance.log().rfind('\n').map_or(0, |i| i + 1)
}

/// What the instance logged from `from` (a [`mark`]) up to `to` (a later one, or the end).
fn logged(instance: &ControllerProcess, from: usize, to: Option<usize>) -> String {
    let log = instance.log();
    log[from..to.unwrap_or(log.len())].to_string()
}

/// Asserts that `instance` logged nothing of a reconcile of `ns/name` from `from` (a [`mark`])
/// on; `why` says what that would mean.
fn assert_not_reconciled(
    instance: &ControllerProcess,
    from: usize,
    ns: &str,
    name: &str,
    why: &str,
) {
    let lines = lines_naming(&logged(instance, from, None), ns, name);
    assert!(lines.is_empty(), "{why}:\n{}", lines.join("\n"));
}

/// Waits until `instance`'s log, from `from` (a [`mark`]) on, records a finished reconcile of
/// `ns/name` at `revision(n)`: then nothing of that reconcile is still to be logged.
async fn wait_logged(
    instances: &Instances,
    instance: &ControllerProcess,
    from: usize,
    ns: &str,
    name: &str,
    n: u32,
) {
    wait_for(
        WAIT,
        &format!("a finished reconcile of {name} at revision {n} in the instance's log"),
        async || {
            let revisions = finished_revisions(&logged(instance, from, None), ns, name);
            if revisions.contains(&revision(n)) {
                Ok(())
            } else {
                Err(format!(
                    "finished since the mark: {revisions:?}\n{}",
                    instances.tails()
                ))
            }
        },
    )
    .await
}

// ---------------------------------------------------------------------------------------
// Objects.

/// The ConfigMap a Kustomization applies: its own, named after it.
fn config_map_of(name: &str) -> String {
    format!("{name}-config")
}

/// Publishes `revision(n)` of the GitRepository `repo`: for each Kustomization of `names`,
/// `./<name>/cm.yaml` with its ConfigMap, whose value is `n`.
async fn publish(client: &kube::Client, ns: &str, names: &[&str], n: u32) {
    let files: Vec<(String, String)> = names
        .iter()
        .map(|name| {
            (
                format!("{name}/cm.yaml"),
                config_map(ns, &config_map_of(name), &n.to_string()),
            )
        })
        .collect();
    let (url, digest) = serve(tarball(&files));
    publish_artifact(client, ns, "repo", &revision(n), &url, &digest).await;
}

/// A GitRepository `repo` and, of it, a Kustomization of `./<name>` for each of
/// `kustomizations` (name, Flux's shard key), at revision 1 and Ready.
///
/// The Kustomizations come first, while the source has no artifact yet: each instance has
/// then seen (and failed) its own before the first revision is published, so that the
/// revision triggers exactly one reconcile of each, and none is left over afterwards.
async fn sources_and_kustomizations_at_revision_1(
    instances: &Instances,
    client: &kube::Client,
    ns: &str,
    kustomizations: &[(&str, Option<&str>)],
) {
    create_git_repository(client, ns, "repo").await;
    for (name, key) in kustomizations {
        let mut labels = json!({SHARD_LABEL: GROUP});
        if let Some(key) = key {
            labels[SHARD_KEY] = json!(key);
        }
        let spec = json!({"path": format!("./{name}")});
        create_labelled_kustomization(client, ns, name, "repo", spec, labels).await;
    }
    for (name, _) in kustomizations {
        wait_for(
            WAIT,
            &format!("{name} waiting for its artifact"),
            async || match ready(client, ns, name).await {
                Some((ConditionStatus::False, reason, _)) if reason == "ArtifactFailed" => Ok(()),
                other => Err(format!("{other:?}\n{}", instances.tails())),
            },
        )
        .await;
    }
    let names: Vec<&str> = kustomizations.iter().map(|(name, _)| *name).collect();
    publish(client, ns, &names, 1).await;
    for (name, key) in kustomizations {
        wait_applied(instances, client, ns, name, 1).await;
        wait_logged(instances, instances.owner(*key), 0, ns, name, 1).await;
    }
}

/// Waits until `ns/name` is Ready with `revision(n)` applied.
async fn wait_applied(instances: &Instances, client: &kube::Client, ns: &str, name: &str, n: u32) {
    wait_for(
        WAIT,
        &format!("{name} Ready at revision {n}"),
        async || match ready(client, ns, name).await {
            Some((ConditionStatus::True, _, message))
                if message == format!("Applied revision: {}", revision(n)) =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}\n{}", instances.tails())),
        },
    )
    .await;
}

/// Sets Flux's shard key of `ns/name` to `key`, or removes it.
async fn relabel(client: &kube::Client, ns: &str, name: &str, key: Option<&str>) {
    Api::<Kustomization>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {SHARD_KEY: key}}})),
        )
        .await
        .expect("relabel the Kustomization");
}

/// After a move and `revision(n)`: `mover` is the same object as `before_move`, not being
/// deleted, its inventory still holds its ConfigMap, and the ConfigMap is the same object as
/// `config_before` (neither pruned nor recreated), at revision `n`'s value, with one field
/// manager, the one every instance applies with.
async fn assert_moved_without_loss(
    client: &kube::Client,
    ns: &str,
    before_move: &Kustomization,
    config_before: &ConfigMap,
    n: u32,
) {
    let ks = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get("mover")
        .await
        .expect("mover");
    assert_eq!(
        ks.metadata.uid, before_move.metadata.uid,
        "mover was recreated"
    );
    assert_eq!(
        ks.metadata.deletion_timestamp, None,
        "mover is being deleted"
    );
    assert_eq!(
        inventory(client, ns, "mover").await,
        [format!("{ns}_mover-config__ConfigMap")]
    );
    let config = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("mover-config")
        .await
        .expect("mover's ConfigMap is still there");
    assert_eq!(
        config.metadata.uid, config_before.metadata.uid,
        "mover's ConfigMap was deleted and recreated by the move"
    );
    assert_eq!(
        config
            .data
            .unwrap_or_default()
            .get("value")
            .map(String::as_str),
        Some(n.to_string().as_str()),
        "mover's ConfigMap is not at revision {n}"
    );
    let managers: Vec<(Option<String>, Option<String>)> = config
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager, m.operation))
        .collect();
    assert_eq!(
        managers,
        [(
            Some("kustomize-controller".to_string()),
            Some("Apply".to_string())
        )],
        "mover's ConfigMap has other field managers than the controller's"
    );
}

// ---------------------------------------------------------------------------------------
// The tests.

/// The Kustomizations of the first test: name and Flux's shard key at first.
const KUSTOMIZATIONS: [(&str, Option<&str>); 3] = [
    ("mover", Some("shard1")),
    ("stays-shard2", Some("shard2")),
    ("stays-main", None),
];

/// Each revision after the first is published to all three Kustomizations (one source): it
/// reaches every instance, each of which must act on its own Kustomizations only.
#[tokio::test]
async fn each_kustomization_is_reconciled_by_the_one_instance_its_shard_label_selects() {
    let instances = instances();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "sharding").await;
    let ns = ns.name();
    let names = KUSTOMIZATIONS.map(|(name, _)| name);

    // 1. Each Kustomization becomes Ready, reconciled by exactly the instance its label
    // selects: only that instance's log names it.
    sources_and_kustomizations_at_revision_1(instances, &client, ns, &KUSTOMIZATIONS).await;
    for (name, key) in KUSTOMIZATIONS {
        let owner = instances.owner(key);
        for (instance, process) in instances.all() {
            let lines = lines_naming(&process.log(), ns, name);
            if std::ptr::eq(process, owner) {
                assert_eq!(
                    finished_revisions(&process.log(), ns, name),
                    [revision(1)],
                    "{name} in the log of {instance}, the instance its label selects"
                );
            } else {
                assert!(
                    lines.is_empty(),
                    "{name} is in the log of {instance}, which its label does not select:\n{}",
                    lines.join("\n")
                );
            }
        }
    }
    let kustomizations = Api::<Kustomization>::namespaced(client.clone(), ns);
    let configs = Api::<ConfigMap>::namespaced(client.clone(), ns);
    let before_move = kustomizations.get("mover").await.expect("mover");
    let config_before = configs
        .get(&config_map_of("mover"))
        .await
        .expect("mover's ConfigMap");

    // 2. Relabelled to shard2, `mover` is shard2's: shard2 reconciles it on arrival, at the
    // revision it has (as Flux's instances do), then at the next. shard1 no longer does.
    // (The next revision is published once shard2 has reconciled the arrival: shard1 saw
    // the relabel on its own watch by then, unless that watch lagged a whole reconcile
    // behind shard2's.)
    let moved_to_shard2 = instances.marks();
    relabel(&client, ns, "mover", Some("shard2")).await;
    wait_logged(
        instances,
        &instances.shard2,
        moved_to_shard2[1],
        ns,
        "mover",
        1,
    )
    .await;
    publish(&client, ns, &names, 2).await;
    for (name, key) in KUSTOMIZATIONS {
        let key = if name == "mover" { Some("shard2") } else { key };
        wait_applied(instances, &client, ns, name, 2).await;
        let from = instances.mark_of(&moved_to_shard2, key);
        wait_logged(instances, instances.owner(key), from, ns, name, 2).await;
    }
    let moved_to_main = instances.marks();
    assert_not_reconciled(
        &instances.shard1,
        moved_to_shard2[0],
        ns,
        "mover",
        "shard1 reconciled mover after it was relabelled to shard2",
    );
    assert_eq!(
        finished_revisions(
            &logged(
                &instances.shard2,
                moved_to_shard2[1],
                Some(moved_to_main[1])
            ),
            ns,
            "mover"
        ),
        [revision(1), revision(2)],
        "shard2 reconciles mover on arrival, then at the new revision"
    );
    assert_not_reconciled(
        &instances.main,
        0,
        ns,
        "mover",
        "the main instance reconciled mover, labelled for a shard",
    );
    assert_moved_without_loss(&client, ns, &before_move, &config_before, 2).await;

    // 3. Without the label, `mover` is the main instance's, the same way.
    relabel(&client, ns, "mover", None).await;
    wait_logged(instances, &instances.main, moved_to_main[2], ns, "mover", 2).await;
    publish(&client, ns, &names, 3).await;
    for (name, key) in KUSTOMIZATIONS {
        let key = if name == "mover" { None } else { key };
        wait_applied(instances, &client, ns, name, 3).await;
        let from = instances.mark_of(&moved_to_main, key);
        wait_logged(instances, instances.owner(key), from, ns, name, 3).await;
    }
    assert_not_reconciled(
        &instances.shard1,
        moved_to_shard2[0],
        ns,
        "mover",
        "shard1 reconciled mover after it was relabelled away",
    );
    assert_not_reconciled(
        &instances.shard2,
        moved_to_main[1],
        ns,
        "mover",
        "shard2 reconciled mover after its label was removed",
    );
    assert_eq!(
        finished_revisions(
            &logged(&instances.main, moved_to_main[2], None),
            ns,
            "mover"
        ),
        [revision(2), revision(3)],
        "the main instance reconciles mover on arrival, then at the new revision"
    );
    assert_moved_without_loss(&client, ns, &before_move, &config_before, 3).await;

    // The two that stayed were reconciled by their own instance only, once per revision.
    for (name, key) in &KUSTOMIZATIONS[1..] {
        let owner = instances.owner(*key);
        for (instance, process) in instances.all() {
            if std::ptr::eq(process, owner) {
                assert_eq!(
                    finished_revisions(&process.log(), ns, name),
                    [revision(1), revision(2), revision(3)],
                    "{name} in the log of {instance}, the instance its label selects"
                );
            } else {
                assert_eq!(
                    lines_naming(&process.log(), ns, name),
                    Vec::<String>::new(),
                    "{name} is in the log of {instance}, which its label does not select"
                );
            }
        }
    }
    assert_eq!(
        config_map_names(&client, ns).await,
        ["mover-config", "stays-main-config", "stays-shard2-config"],
        "nothing was pruned"
    );
}

/// A Kustomization that comes back to an instance it left is reconciled by it on arrival,
/// as on its first arrival there: Flux's instances reconcile every object their label
/// selector newly matches (the informer's Create event), whatever they saw of it before.
#[tokio::test]
async fn a_kustomization_moved_back_is_reconciled_on_arrival_by_the_instance_it_left() {
    let instances = instances();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "sharding-back").await;
    let ns = ns.name();
    sources_and_kustomizations_at_revision_1(
        instances,
        &client,
        ns,
        &[("returner", Some("shard1"))],
    )
    .await;

    let away = instances.marks();
    relabel(&client, ns, "returner", Some("shard2")).await;
    wait_logged(instances, &instances.shard2, away[1], ns, "returner", 1).await;

    let back = instances.marks();
    relabel(&client, ns, "returner", Some("shard1")).await;
    wait_logged(instances, &instances.shard1, back[0], ns, "returner", 1).await;
    assert_not_reconciled(
        &instances.shard2,
        back[1],
        ns,
        "returner",
        "shard2 reconciled returner after it was relabelled back to shard1",
    );
}

/// Flux's sharding guide deploys each shard as a copy of the controller's Deployment, whose
/// arguments include `--enable-leader-election`: every instance then elects a leader among
/// its own replicas, with a Lease of its own. Flux's controller names that Lease after its
/// label selector (`leaderelection.GenerateID`: `kustomize-controller-leader-election-`
/// and the first 8 hex digits of the selector's sha256), so that the instances of different
/// shards never wait for one another.
#[tokio::test]
async fn shard_instances_with_leader_election_each_lead_with_a_lease_of_their_own() {
    const GROUP: &str = "flux-sharding-lease";
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "sharding-lease").await;
    let ns = ns.name();

    // The instances run as in pods of `ns` (RUNTIME_NAMESPACE), where they hold their Leases.
    let wrapper = std::env::temp_dir().join(support::unique_name("in-namespace"));
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nRUNTIME_NAMESPACE='{ns}' exec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_kustomize-controller")
        ),
    )
    .expect("write the wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("make the wrapper executable");
    let selectors =
        ["shard1", "shard2"].map(|shard| selector(GROUP, &format!("{SHARD_KEY} in ({shard})")));
    let instances: Vec<ControllerProcess> = ["shard1", "shard2"]
        .iter()
        .zip(&selectors)
        .map(|(shard, selector)| {
            start_controller_binary(
                &format!("sharding-lease-{shard}"),
                &wrapper,
                &[
                    &format!("--watch-label-selector={selector}"),
                    "--enable-leader-election",
                ],
            )
        })
        .collect();
    let leases = async || {
        let mut names: Vec<String> = Api::<Lease>::namespaced(client.clone(), ns)
            .list(&Default::default())
            .await
            .expect("list Leases")
            .items
            .into_iter()
            .filter_map(|lease| lease.metadata.name)
            .collect();
        names.sort();
        names
    };

    create_git_repository(&client, ns, "repo").await;
    publish(&client, ns, &["one", "two"], 1).await;
    for (name, shard) in [("one", "shard1"), ("two", "shard2")] {
        let labels = json!({SHARD_LABEL: GROUP, SHARD_KEY: shard});
        let spec = json!({"path": format!("./{name}")});
        create_labelled_kustomization(&client, ns, name, "repo", spec, labels).await;
    }
    for name in ["one", "two"] {
        wait_for(
            WAIT,
            &format!("{name} Ready at revision 1"),
            async || match ready(&client, ns, name).await {
                Some((ConditionStatus::True, _, message))
                    if message == format!("Applied revision: {}", revision(1)) =>
                {
                    Ok(())
                }
                other => Err(format!(
                    "{other:?}\nLeases in {ns}: {:?}\n{}",
                    leases().await,
                    instances
                        .iter()
                        .map(|instance| tail(&without_colours(&instance.log()), 5))
                        .collect::<Vec<_>>()
                        .join("\n---\n")
                )),
            },
        )
        .await;
    }
    let mut expected: Vec<String> = selectors
        .iter()
        .map(|selector| {
            format!(
                "kustomize-controller-leader-election-{}",
                &hex::encode(Sha256::digest(selector.as_bytes()))[..8]
            )
        })
        .collect();
    expected.sort();
    assert_eq!(
        leases().await,
        expected,
        "the Leases, as Flux's instances name them"
    );
    let _ = std::fs::remove_file(&wrapper);
}
