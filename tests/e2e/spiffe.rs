//! SPIFFE mTLS end to end: the `spiffe` shard's controller takes its X.509-SVID from a
//! Workload API double on a Unix socket (`SPIFFE_ENDPOINT_SOCKET`), fetches artifacts from
//! an mTLS artifact server double authorized by `--authorized-artifact-server-spiffe-id`,
//! and forwards events to an mTLS event receiver double authorized by
//! `--authorized-event-server-spiffe-id`. An artifact server presenting another SPIFFE ID
//! is refused: the condition names the ID it presented and the authorized one, and nothing
//! is applied. A remote cluster whose ServiceAccount asks for the `spiffe` credential
//! provider gets the Kustomization's JWT-SVID from a SPIFFE Broker double
//! (`--spiffe-broker-endpoint`, `--spiffe-broker-id`); a broker that refuses fails the
//! reconcile naming the broker and the object, and nothing is applied. A decryption
//! ServiceAccount of the `spiffe` provider with an IAM role opens a KMS key (moto) with the
//! role session its JWT-SVID is exchanged for.

use std::sync::Arc;

use ::spiffe::testing::{
    BrokerAnswer, BrokerDouble, MtlsHttpServer, TestCa, WorkloadApiDouble, x509_svid_response,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::core::v1::ServiceAccount;
use sha2::{Digest, Sha256};

use super::*;

const SHARD: &str = "spiffe";
const TRUST_DOMAIN: &str = "cluster.test";
const CONTROLLER_ID: &str = "spiffe://cluster.test/ns/flux-system/sa/kustomize-controller";
const SOURCE_CONTROLLER_ID: &str = "spiffe://cluster.test/ns/flux-system/sa/source-controller";
const NOTIFICATION_ID: &str = "spiffe://cluster.test/ns/flux-system/sa/notification-controller";
const IMPOSTOR_ID: &str = "spiffe://cluster.test/ns/default/sa/impostor";
const BROKER_ID: &str = "spiffe://cluster.test/spire/broker";

/// An mTLS server as `id` serving `tarball` at `/artifact.tar.gz`; its URL and digest.
async fn artifact_server(
    ca: &TestCa,
    id: &str,
    tarball: Vec<u8>,
) -> (MtlsHttpServer, String, String) {
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&tarball)));
    let server = MtlsHttpServer::start(
        ca,
        &ca.issue(id),
        Arc::new(move |_, path, _| match path {
            "/artifact.tar.gz" => (200, tarball.clone()),
            _ => (404, Vec::new()),
        }),
    )
    .await;
    let url = format!(
        "https://127.0.0.1:{}/artifact.tar.gz",
        server.address().port()
    );
    (server, url, digest)
}

/// A controller of `shard` whose X.509-SVID comes from the Workload API on `socket_dir`,
/// which trusts the artifact server of `SOURCE_CONTROLLER_ID` and asks `broker` for
/// JWT-SVIDs; `args` and `env` besides.
fn spiffe_controller(
    shard: &str,
    socket_dir: &std::path::Path,
    broker: &BrokerDouble,
    args: &[&str],
    env: &[(&str, String)],
) -> ControllerProcess {
    let mut all_args = vec![
        format!(
            "--watch-label-selector={RUN_LABEL}={},{SHARD_LABEL}={shard}",
            run_id()
        ),
        format!("--authorized-artifact-server-spiffe-id={SOURCE_CONTROLLER_ID}"),
        format!("--spiffe-broker-endpoint={}", broker.endpoint()),
        format!("--spiffe-broker-id={BROKER_ID}"),
    ];
    all_args.extend(args.iter().map(|a| a.to_string()));
    let all_args: Vec<&str> = all_args.iter().map(String::as_str).collect();
    let mut all_env = vec![(
        "SPIFFE_ENDPOINT_SOCKET",
        format!("unix://{}/agent.sock", socket_dir.display()),
    )];
    all_env.extend(env.iter().cloned());
    start_controller_binary_with_env(
        shard,
        std::path::Path::new(env!("CARGO_BIN_EXE_kustomize-controller")),
        &all_args,
        &all_env,
    )
}

/// ServiceAccount `name` in `ns` of the `spiffe` credential provider, with `annotations`
/// besides.
async fn spiffe_service_account(client: &kube::Client, ns: &str, name: &str, annotations: Value) {
    let mut all = json!({"credential.auth.fluxcd.io/provider": "spiffe"});
    if let (Some(all), Value::Object(annotations)) = (all.as_object_mut(), annotations) {
        all.extend(annotations);
    }
    let account: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": all},
    }))
    .expect("ServiceAccount");
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount");
}

/// Asserts `broker` was asked for a JWT-SVID of Kustomization `ns/name` for `audience`.
async fn assert_broker_asked_for(
    client: &kube::Client,
    broker: &BrokerDouble,
    ns: &str,
    name: &str,
    audience: &str,
) {
    let uid = Api::<Kustomization>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .expect("read Kustomization")
        .metadata
        .uid
        .expect("uid");
    let asked = broker.requests();
    assert!(
        asked.iter().any(|r| r.object
            == [
                "kustomizations".to_owned(),
                "kustomize.toolkit.fluxcd.io".to_owned(),
                ns.to_owned(),
                name.to_owned(),
                uid.clone(),
            ]
            && r.audiences == [audience]),
        "{asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn artifacts_events_and_broker_go_over_spiffe_mtls_to_authorized_servers_only() {
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "spiffe").await;
    let ca = TestCa::new(TRUST_DOMAIN);
    let socket_dir = tempfile::tempdir().expect("socket dir");
    let _workload_api = WorkloadApiDouble::start(
        socket_dir.path(),
        x509_svid_response(&ca, &ca.issue(CONTROLLER_ID)),
    );
    let events = MtlsHttpServer::start(
        &ca,
        &ca.issue(NOTIFICATION_ID),
        Arc::new(|_, _, _| (202, Vec::new())),
    )
    .await;
    let broker = BrokerDouble::start(
        &ca,
        &ca.issue(BROKER_ID),
        BrokerAnswer::Refuse(7, "the object is not entitled to an identity".into()),
    )
    .await;
    let events_addr = format!(
        "--events-addr=https://127.0.0.1:{}/",
        events.address().port()
    );
    let process = spiffe_controller(
        SHARD,
        socket_dir.path(),
        &broker,
        &[
            &format!("--authorized-event-server-spiffe-id={NOTIFICATION_ID}"),
            &events_addr,
        ],
        &[],
    );
    let labels = json!({SHARD_LABEL: SHARD});

    // From the authorized artifact server: applied, and the events reach the receiver.
    let (source_controller, url, digest) = artifact_server(
        &ca,
        SOURCE_CONTROLLER_ID,
        tarball(&[("deploy/cm.yaml", config_map(ns.name(), "over-mtls", "1"))]),
    )
    .await;
    create_git_repository(&client, ns.name(), "trusted").await;
    publish_artifact(&client, ns.name(), "trusted", &revision(1), &url, &digest).await;
    create_labelled_kustomization(
        &client,
        ns.name(),
        "trusted",
        "trusted",
        json!({}),
        labels.clone(),
    )
    .await;
    let ready = wait_for(
        WAIT,
        "the trusted Kustomization ready",
        async || match super::ready(&client, ns.name(), "trusted").await {
            Some((ConditionStatus::True, reason, message)) => Ok((reason, message)),
            other => Err(format!("{other:?}\n{}", tail(&process.log(), 20))),
        },
    )
    .await;
    assert_eq!(ready.0, "ReconciliationSucceeded", "{}", ready.1);
    let applied = Api::<ConfigMap>::namespaced(client.clone(), ns.name())
        .get_opt("over-mtls")
        .await
        .expect("read ConfigMap");
    assert!(
        applied.is_some(),
        "the ConfigMap of the artifact is applied"
    );
    assert_eq!(source_controller.clients(), [CONTROLLER_ID]);
    wait_for(WAIT, "an event posted over mTLS", async || {
        let posted = events.requests();
        match posted.iter().find(|(method, _, body)| {
            method == "POST" && String::from_utf8_lossy(body).contains("\"name\":\"trusted\"")
        }) {
            Some(_) => Ok(()),
            None => Err(format!("{} posts", posted.len())),
        }
    })
    .await;
    assert!(events.clients().iter().all(|id| id == CONTROLLER_ID));

    // From a server presenting another SPIFFE ID: refused, naming both IDs; nothing applied.
    let (impostor, url, digest) = artifact_server(
        &ca,
        IMPOSTOR_ID,
        tarball(&[(
            "deploy/cm.yaml",
            config_map(ns.name(), "from-impostor", "1"),
        )]),
    )
    .await;
    create_git_repository(&client, ns.name(), "impostor").await;
    publish_artifact(&client, ns.name(), "impostor", &revision(1), &url, &digest).await;
    create_labelled_kustomization(
        &client,
        ns.name(),
        "impostor",
        "impostor",
        json!({}),
        labels,
    )
    .await;
    let (reason, message) =
        wait_for(
            WAIT,
            "the impostor Kustomization failing",
            async || match super::ready(&client, ns.name(), "impostor").await {
                Some((ConditionStatus::False, reason, message)) => Ok((reason, message)),
                other => Err(format!("{other:?}\n{}", tail(&process.log(), 20))),
            },
        )
        .await;
    assert_eq!(reason, "ArtifactFailed", "{message}");
    assert!(
        message.contains(&format!(
            "the artifact server presented SPIFFE ID '{IMPOSTOR_ID}', which is not authorized (authorized: {SOURCE_CONTROLLER_ID})"
        )),
        "{message}"
    );
    assert!(
        impostor.requests().is_empty(),
        "no request reaches a refused server"
    );
    let applied = Api::<ConfigMap>::namespaced(client.clone(), ns.name())
        .get_opt("from-impostor")
        .await
        .expect("read ConfigMap");
    assert!(
        applied.is_none(),
        "nothing from a refused server is applied"
    );

    // A remote cluster reached with the Kustomization's JWT-SVID: the broker refuses.
    let (_server, url, digest) = artifact_server(
        &ca,
        SOURCE_CONTROLLER_ID,
        tarball(&[("deploy/cm.yaml", config_map(ns.name(), "via-broker", "1"))]),
    )
    .await;
    create_git_repository(&client, ns.name(), "remote").await;
    publish_artifact(&client, ns.name(), "remote", &revision(1), &url, &digest).await;
    spiffe_service_account(&client, ns.name(), "spiffe-sa", json!({})).await;
    let cluster: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "remote-cluster"},
        "data": {
            "provider": "generic",
            "address": "https://remote.cluster.test:6443",
            "audiences": "remote-cluster",
            "serviceAccountName": "spiffe-sa",
        },
    }))
    .expect("ConfigMap");
    Api::<ConfigMap>::namespaced(client.clone(), ns.name())
        .create(&PostParams::default(), &cluster)
        .await
        .expect("create ConfigMap");
    create_labelled_kustomization(
        &client,
        ns.name(),
        "remote",
        "remote",
        json!({"kubeConfig": {"configMapRef": {"name": "remote-cluster"}}}),
        json!({SHARD_LABEL: SHARD}),
    )
    .await;
    let (_, message) =
        wait_for(
            WAIT,
            "the remote Kustomization failing",
            async || match super::ready(&client, ns.name(), "remote").await {
                Some((ConditionStatus::False, reason, message)) => Ok((reason, message)),
                other => Err(format!("{other:?}\n{}", tail(&process.log(), 20))),
            },
        )
        .await;
    assert!(
        message.contains(&format!(
            "failed to fetch SPIFFE JWT-SVID for object 'kustomize.toolkit.fluxcd.io/Kustomization {}/remote'",
            ns.name()
        )) && message.contains(&format!(
            "the SPIFFE Broker at {} did not issue a JWT-SVID: the object is not entitled to an identity (PermissionDenied)",
            broker.endpoint()
        )),
        "{message}"
    );
    assert_broker_asked_for(&client, &broker, ns.name(), "remote", "remote-cluster").await;
    let applied = Api::<ConfigMap>::namespaced(client.clone(), ns.name())
        .get_opt("via-broker")
        .await
        .expect("read ConfigMap");
    assert!(applied.is_none(), "nothing is applied without a credential");
    drop(process);
}

/// A JWT-SVID the broker double issues: a JWT whose claims name the Kustomization's SPIFFE
/// ID, good for an hour (moto's STS takes any web identity token; the signature is not
/// checked there).
fn jwt_svid(subject: &str) -> String {
    use base64::Engine;
    let encode = |json: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json.to_string())
    };
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    format!(
        "{}.{}.c2lnbmF0dXJl",
        encode(json!({"alg": "ES256", "typ": "JWT"})),
        encode(
            json!({"sub": subject, "aud": ["sts.amazonaws.com"], "iat": now, "exp": now + 3600})
        )
    )
}

/// A decryption ServiceAccount of the `spiffe` credential provider with an IAM role: the
/// Kustomization's JWT-SVID from the broker is exchanged at STS (moto) for the role's
/// session, which opens the KMS key; the broker is asked for the Kustomization itself, for
/// STS's audience.
#[tokio::test(flavor = "multi_thread")]
async fn a_spiffe_decryption_account_opens_kms_keys_with_the_brokers_jwt_svid() {
    const KMS_SHARD: &str = "spiffe-kms";
    let servers = super::support::keyservers::key_servers();
    let client = support::client().await;
    let ns = TestNamespace::new(&client, "spiffe-kms").await;
    let ca = TestCa::new(TRUST_DOMAIN);
    let socket_dir = tempfile::tempdir().expect("socket dir");
    let _workload_api = WorkloadApiDouble::start(
        socket_dir.path(),
        x509_svid_response(&ca, &ca.issue(CONTROLLER_ID)),
    );
    let svid = jwt_svid(&format!("spiffe://{TRUST_DOMAIN}/ns/{}/ks/app", ns.name()));
    let broker =
        BrokerDouble::start(&ca, &ca.issue(BROKER_ID), BrokerAnswer::Token(svid.clone())).await;
    let process = spiffe_controller(
        KMS_SHARD,
        socket_dir.path(),
        &broker,
        &[],
        &[
            ("AWS_ENDPOINT_URL", servers.moto.clone()),
            ("AWS_ACCESS_KEY_ID", String::new()),
            ("AWS_SECRET_ACCESS_KEY", String::new()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ],
    );

    let secret = super::keyservices::encrypted(
        servers,
        &super::keyservices::secret_manifest(ns.name(), "from-kms", "kms-via-svid"),
        &["--kms", &servers.kms_arn],
    );
    let (_source_controller, url, digest) = artifact_server(
        &ca,
        SOURCE_CONTROLLER_ID,
        tarball(&[("deploy/secret.yaml", secret)]),
    )
    .await;
    create_git_repository(&client, ns.name(), "repo").await;
    publish_artifact(&client, ns.name(), "repo", &revision(1), &url, &digest).await;
    spiffe_service_account(
        &client,
        ns.name(),
        "decryptor",
        json!({"eks.amazonaws.com/role-arn": super::support::keyservers::ROLE}),
    )
    .await;
    create_labelled_kustomization(
        &client,
        ns.name(),
        "app",
        "repo",
        json!({"decryption": {"provider": "sops", "serviceAccountName": "decryptor"}}),
        json!({SHARD_LABEL: KMS_SHARD}),
    )
    .await;
    let (reason, message) = wait_for(
        WAIT,
        "the Kustomization ready",
        async || match super::ready(&client, ns.name(), "app").await {
            Some((ConditionStatus::True, reason, message)) => Ok((reason, message)),
            other => Err(format!("{other:?}\n{}", tail(&process.log(), 20))),
        },
    )
    .await;
    assert_eq!(reason, "ReconciliationSucceeded", "{message}");
    let decrypted =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns.name())
            .get("from-kms")
            .await
            .expect("read the decrypted Secret");
    assert_eq!(
        decrypted
            .data
            .unwrap_or_default()
            .get("password")
            .map(|v| v.0.as_slice()),
        Some(b"kms-via-svid".as_slice())
    );
    assert_broker_asked_for(&client, &broker, ns.name(), "app", "sts.amazonaws.com").await;
    assert!(
        !process.log().contains(&svid),
        "the JWT-SVID is never logged"
    );
    drop(process);
}
