//! The controller as a process: flags, leader election, probes and metrics.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use support::{TestNamespace, wait_for};

const BINARY: &str = env!("CARGO_BIN_EXE_kustomize-controller");

/// Kills the controller when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn http_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(response.clone())?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Runs the binary with `args` and no cluster, returning its exit code and standard error.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(BINARY)
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs the binary with `args`, `env` and no cluster, returning its exit code and
/// standard error.
fn run_without_cluster(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(BINARY)
        .args(args)
        .env("KUBECONFIG", "/nonexistent")
        .env_remove("SPIFFE_ENDPOINT_SOCKET")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

const ARTIFACT_SERVER_FLAG: &str = "--authorized-artifact-server-spiffe-id=spiffe://cluster.test/ns/flux-system/sa/source-controller";

/// A SPIFFE flag starts the X.509 source before anything else; without a Workload API the
/// controller stops with a sentence naming the socket (or the variable to set).
#[test]
fn spiffe_flags_need_the_workload_api() {
    let (code, stderr) = run_without_cluster(&[ARTIFACT_SERVER_FLAG], &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("unable to create the SPIFFE X.509 source")
            && stderr.contains("set SPIFFE_ENDPOINT_SOCKET"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix://{}/agent.sock", dir.path().display());
    let (code, stderr) = run_without_cluster(
        &[
            "--spiffe-broker-endpoint=tcp://127.0.0.1:1",
            "--spiffe-broker-id=spiffe://cluster.test/broker",
        ],
        &[("SPIFFE_ENDPOINT_SOCKET", &socket)],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "no X.509-SVID from the SPIFFE Workload API at {socket}"
        )) && stderr.contains("cannot connect"),
        "{stderr}"
    );
}

/// With a Workload API serving an SVID, the SPIFFE set-up succeeds and the controller goes
/// on to the cluster (which this test does not give it).
#[test]
fn spiffe_flags_with_a_workload_api_get_past_the_set_up() {
    use spiffe::testing::{TestCa, WorkloadApiDouble, x509_svid_response};
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let _api = runtime.block_on(async {
        WorkloadApiDouble::start(
            dir.path(),
            x509_svid_response(
                &ca,
                &ca.issue("spiffe://cluster.test/ns/flux-system/sa/kustomize-controller"),
            ),
        )
    });
    let socket = format!("unix://{}/agent.sock", dir.path().display());
    let (code, stderr) = run_without_cluster(
        &[
            ARTIFACT_SERVER_FLAG,
            "--authorized-event-server-spiffe-id=spiffe://cluster.test/ns/flux-system/sa/notification-controller",
        ],
        &[("SPIFFE_ENDPOINT_SOCKET", &socket)],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("artifact fetcher will use inter-controller mTLS via SPIFFE")
            && stderr.contains("event server will use inter-controller mTLS via SPIFFE"),
        "{stderr}"
    );
    assert!(
        stderr.contains("failed to load the Kubernetes client configuration"),
        "{stderr}"
    );
}

#[test]
fn gates_are_checked_at_flag_validation() {
    // A gate with behaviour gets past flag validation (it then stops here only because
    // there is no cluster to reach).
    let (code, stderr) = refused(&["--feature-gates=CacheSecretsAndConfigMaps=true"]);
    assert_ne!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("not supported"), "{stderr}");
    let (code, stderr) = refused(&["--feature-gates=NoSuchGate=true"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("NoSuchGate is not a feature gate"),
        "{stderr}"
    );
}

/// What a kustomize patch appending to Flux's own arguments gives: every flag repeated, the
/// last value counting. The invalid SPIFFE ID at the end is refused after every other flag
/// was read, which shows the repeated ones were accepted without reaching a cluster.
#[test]
fn repeated_flags_take_their_last_value_as_pflag_gives_them() {
    let (code, stderr) = refused(&[
        "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
        "--watch-all-namespaces=true",
        "--log-level=info",
        "--log-encoding=json",
        "--enable-leader-election",
        "--log-level=debug",
        "--concurrent=20",
        "--concurrent=30",
        "--enable-leader-election=1",
        "--requeue-dependency=0",
        "--feature-gates=ExternalArtifact=true",
        "--feature-gates=CancelHealthCheckOnNewRevision=true",
        "--spiffe-broker-id=broker",
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--spiffe-broker-id"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
}

#[test]
fn an_unparsable_flag_value_is_one_line_naming_the_flag_and_exit_2() {
    for (arg, flag) in [
        ("--requeue-dependency=soon", "--requeue-dependency"),
        ("--enable-leader-election=yes", "--enable-leader-election"),
        ("--concurrent=many", "--concurrent"),
        ("--log-encoding=xml", "--log-encoding"),
        ("--no-such-flag", "--no-such-flag"),
    ] {
        let (code, stderr) = refused(&[arg]);
        assert_eq!(code, Some(2), "{arg}: {stderr}");
        assert!(stderr.contains(flag), "{arg}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{arg}: {stderr}");
    }
}

#[test]
fn crd_subcommand_prints_the_checked_in_crd() {
    let output = Command::new(BINARY).arg("crd").output().expect("run");
    assert!(output.status.success());
    let checked_in =
        std::fs::read(support::repo_root().join(kustomize_controller::api::crd::CRD_FILE))
            .expect("CRD file");
    assert!(
        output.stdout == checked_in,
        "`kustomize-controller crd` differs from the checked-in CRD"
    );
}

#[tokio::test]
async fn leader_election_probes_and_metrics() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "leader").await;
    let (health, metrics) = (free_port(), free_port());
    let _controller = Running(
        Command::new(BINARY)
            .args([
                "--log-encoding=console",
                "--enable-leader-election",
                "--leader-election-retry-period=1s",
                &format!("--health-addr=127.0.0.1:{health}"),
                &format!("--metrics-addr=127.0.0.1:{metrics}"),
                // Watch only the (empty) test namespace: this controller must not compete
                // with other tests' controllers.
                "--watch-all-namespaces=false",
            ])
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("RUNTIME_NAMESPACE", ns.name())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the controller"),
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let lease = wait_for(
        Duration::from_secs(60),
        "the leader election Lease",
        async || match leases.get_opt("kustomize-controller-leader-election").await {
            Ok(Some(lease)) => Ok(lease),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    let spec = lease.spec.expect("lease spec");
    assert!(spec.holder_identity.is_some_and(|h| !h.is_empty()));
    assert_eq!(spec.lease_duration_seconds, Some(35));

    let (status, body) = wait_for(Duration::from_secs(30), "/healthz", async || {
        http_get(health, "/healthz")
    })
    .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, _) = http_get(health, "/readyz").expect("/readyz");
    assert_eq!(status, 200);
    // A reconcile (here of a Kustomization whose source does not exist) is measured.
    let ks: kustomize_controller::api::Kustomization = serde_json::from_value(serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "app", "namespace": ns.name()},
        "spec": {"interval": "10m", "prune": true, "sourceRef": {"kind": "GitRepository", "name": "missing"}}
    }))
    .expect("kustomization");
    Api::namespaced(client.clone(), ns.name())
        .create(&Default::default(), &ks)
        .await
        .expect("create");
    let series = format!(
        "gotk_reconcile_duration_seconds_count{{kind=\"Kustomization\",name=\"app\",namespace=\"{}\"}}",
        ns.name()
    );
    wait_for(
        Duration::from_secs(60),
        "the reconcile duration metric",
        async || match http_get(metrics, "/metrics") {
            Ok((200, body)) if body.contains(&series) => Ok(()),
            other => Err(other),
        },
    )
    .await;
}

#[tokio::test]
async fn client_side_limits_are_off_when_the_server_enforces_priority_and_fairness() {
    // kube-apiserver enables API Priority and Fairness by default, so Flux's controller (and
    // this one) send requests without a client-side limit.
    let client = support::client().await;
    assert!(kustomize_controller::client::priority_and_fairness_enabled(&client).await);

    // The client built as the controller builds it, asked for one request per 1000 s with no
    // burst: were the limit on, the second request would wait 1000 s and the third 2000 s.
    // All three are answered within the guard, a sixteenth of the first wait.
    let path = support::kubeconfig_path();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("the test kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client configuration");
    let requests = kustomize_controller::metrics::RestRequests::default();
    let built = kustomize_controller::client::build(config, 0.001, 1, &requests)
        .await
        .expect("the controller's client");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(built);
    let answered = tokio::time::timeout(Duration::from_secs(60), async {
        for _ in 0..3 {
            namespaces
                .get("default")
                .await
                .expect("the default namespace");
        }
    })
    .await;
    assert!(
        answered.is_ok(),
        "three requests on one group-version were held back: the client-side limit is on"
    );
}

/// A controller competing for leadership in `namespace` (which it alone watches), with short
/// election timings: a 6 s lease renewed every second.
fn elected_controller(namespace: &str) -> Running {
    elected_controller_with(namespace, &[])
}

/// [`elected_controller`] with more arguments after the usual ones.
fn elected_controller_with(namespace: &str, more: &[&str]) -> Running {
    Running(
        Command::new(BINARY)
            .args([
                "--log-encoding=console",
                "--enable-leader-election",
                "--leader-election-lease-duration=6s",
                "--leader-election-renew-deadline=4s",
                "--leader-election-retry-period=1s",
                "--health-addr=127.0.0.1:0",
                "--metrics-addr=127.0.0.1:0",
                "--watch-all-namespaces=false",
            ])
            .args(more)
            .env("KUBECONFIG", support::kubeconfig_path())
            .env("RUNTIME_NAMESPACE", namespace)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the controller"),
    )
}

/// The Lease's holder and transitions.
async fn lease_holder(leases: &Api<Lease>) -> Result<(String, i32), String> {
    let lease = leases
        .get_opt("kustomize-controller-leader-election")
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no lease yet")?;
    let spec = lease.spec.unwrap_or_default();
    Ok((
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    ))
}

#[tokio::test]
async fn leadership_passes_on_at_release_and_at_expiry_but_not_while_renewed() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "handover").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let held_by_other_than = |previous: String| {
        let leases = leases.clone();
        async move || match lease_holder(&leases).await {
            Ok((holder, transitions)) if !holder.is_empty() && holder != previous => {
                Ok((holder, transitions))
            }
            other => Err(format!("{other:?}")),
        }
    };
    let mut first = elected_controller(ns.name());
    let (first_holder, _) = wait_for(
        Duration::from_secs(60),
        "a first leader",
        held_by_other_than(String::new()),
    )
    .await;

    // A second candidate does not take over a lease that is being renewed, even well past
    // the lease's duration.
    let second = elected_controller(ns.name());
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        lease_holder(&leases).await.map(|l| l.0),
        Ok(first_holder.clone())
    );

    // SIGTERM: the leader releases the lease on its way out.
    let pid = first.0.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = first.0.wait().expect("wait for the first controller");
    assert!(exit.success(), "a graceful shutdown exits 0: {exit:?}");
    let (holder, _) = lease_holder(&leases).await.expect("lease");
    assert_ne!(holder, first_holder, "released before exit");
    let (second_holder, transitions) = wait_for(
        Duration::from_secs(30),
        "the second candidate to lead",
        held_by_other_than(first_holder.clone()),
    )
    .await;

    // SIGKILL: nothing is released; a new candidate leads once the lease went unrenewed for
    // its whole duration.
    drop(second);
    let _third = elected_controller(ns.name());
    let (_, later_transitions) = wait_for(
        Duration::from_secs(60),
        "a third candidate to lead after the lease expired",
        held_by_other_than(second_holder),
    )
    .await;
    assert!(
        later_transitions > transitions,
        "{later_transitions} > {transitions}"
    );
}

#[tokio::test]
async fn a_leader_keeps_the_lease_on_shutdown_when_release_on_cancel_is_false() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "keep-lease").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let mut leader =
        elected_controller_with(ns.name(), &["--leader-election-release-on-cancel=false"]);
    let (holder, _) = wait_for(
        Duration::from_secs(60),
        "a leader",
        async || match lease_holder(&leases).await {
            Ok((holder, transitions)) if !holder.is_empty() => Ok((holder, transitions)),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
    let pid = leader.0.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = leader.0.wait().expect("wait for the controller");
    assert!(exit.success(), "a graceful shutdown exits 0: {exit:?}");
    assert_eq!(
        lease_holder(&leases).await.map(|l| l.0),
        Ok(holder),
        "the lease is kept, not released"
    );
}
