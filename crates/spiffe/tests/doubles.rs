//! The crate against its doubles: a Workload API on a Unix socket, an mTLS server, a broker.

use std::sync::Arc;
use std::time::Duration;

use spiffe::testing::{
    BrokerAnswer, BrokerDouble, MtlsHttpServer, TestCa, WorkloadApiDouble, x509_svid_response,
};
use spiffe::{Broker, Endpoint, KubernetesObject, SourceError, SpiffeId, X509Source};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONTROLLER: &str = "spiffe://cluster.test/ns/flux-system/sa/kustomize-controller";
const SOURCE_CONTROLLER: &str = "spiffe://cluster.test/ns/flux-system/sa/source-controller";
const STARTUP: Duration = Duration::from_secs(10);

async fn source(ca: &TestCa, dir: &std::path::Path) -> (WorkloadApiDouble, Arc<X509Source>) {
    let api = WorkloadApiDouble::start(dir, x509_svid_response(ca, &ca.issue(CONTROLLER)));
    let source = X509Source::connect(api.endpoint(), STARTUP)
        .await
        .expect("an SVID from the Workload API");
    (api, Arc::new(source))
}

fn ids(ids: &[&str]) -> Vec<SpiffeId> {
    ids.iter()
        .map(|id| SpiffeId::parse(id).expect("valid ID"))
        .collect()
}

/// A GET of `/` over the SPIFFE mTLS configuration: the response's first line, or the
/// handshake's error.
async fn get(
    source: &Arc<X509Source>,
    server: &MtlsHttpServer,
    authorized: &[&str],
) -> Result<String, String> {
    let config = spiffe::client_config(Arc::clone(source), ids(authorized), "artifact server")
        .expect("client config");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server.address())
        .await
        .expect("connect");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await.map_err(|e| {
        e.get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
            .map(|e| match e {
                rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)) => {
                    other.0.to_string()
                }
                other => other.to_string(),
            })
            .unwrap_or_else(|| e.to_string())
    })?;
    tls.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut response = String::new();
    tls.read_to_string(&mut response).await.expect("read");
    Ok(response.lines().next().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn the_source_holds_the_latest_svid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let (api, source) = source(&ca, dir.path()).await;
    assert_eq!(source.current().svid().id().as_str(), CONTROLLER);
    assert!(source.current().bundle("cluster.test").is_some());

    let rotated = "spiffe://cluster.test/ns/flux-system/sa/rotated";
    let changed = source.changed();
    api.rotate(x509_svid_response(&ca, &ca.issue(rotated)));
    changed.await;
    assert_eq!(source.current().svid().id().as_str(), rotated);
}

#[tokio::test]
async fn an_unreachable_socket_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("missing.sock");
    let error = X509Source::connect(Endpoint::Unix(socket.clone()), Duration::from_millis(300))
        .await
        .err()
        .expect("no Workload API");
    assert!(matches!(error, SourceError::Unreachable { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&socket.display().to_string()), "{message}");
    assert!(message.contains("cannot connect"), "{message}");
}

#[tokio::test]
async fn mtls_accepts_only_an_authorized_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let (_api, source) = source(&ca, dir.path()).await;
    let server = MtlsHttpServer::start(
        &ca,
        &ca.issue(SOURCE_CONTROLLER),
        Arc::new(|_, _, _| (200, b"ok".to_vec())),
    )
    .await;

    let line = get(&source, &server, &[SOURCE_CONTROLLER])
        .await
        .expect("authorized");
    assert!(line.ends_with("200 OK"), "{line}");
    assert_eq!(server.clients(), [CONTROLLER]);

    let other = "spiffe://cluster.test/ns/flux-system/sa/other";
    let error = get(&source, &server, &[other])
        .await
        .expect_err("unauthorized");
    assert_eq!(
        error,
        format!(
            "the artifact server presented SPIFFE ID '{SOURCE_CONTROLLER}', which is not authorized (authorized: {other})"
        )
    );
    assert_eq!(
        server.requests().len(),
        1,
        "nothing sent to a refused server"
    );
}

#[tokio::test]
async fn a_server_of_another_trust_domain_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let (_api, source) = source(&ca, dir.path()).await;
    let foreign = TestCa::new("cluster.test");
    let server = MtlsHttpServer::start(
        &foreign,
        &foreign.issue(SOURCE_CONTROLLER),
        Arc::new(|_, _, _| (200, Vec::new())),
    )
    .await;
    let error = get(&source, &server, &[SOURCE_CONTROLLER])
        .await
        .expect_err("signed by another CA");
    assert!(
        error.contains("the trust bundle does not verify"),
        "{error}"
    );
    assert!(error.contains(SOURCE_CONTROLLER), "{error}");
}

fn kustomization() -> KubernetesObject {
    KubernetesObject {
        group: "kustomize.toolkit.fluxcd.io".into(),
        plural: "kustomizations".into(),
        namespace: "apps".into(),
        name: "podinfo".into(),
        uid: "6f1c2b4e-0000-4000-8000-000000000001".into(),
    }
}

#[tokio::test]
async fn the_broker_issues_jwt_svids_for_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let (_api, source) = source(&ca, dir.path()).await;
    let broker_id = "spiffe://cluster.test/spire/broker";
    let double = BrokerDouble::start(
        &ca,
        &ca.issue(broker_id),
        BrokerAnswer::Token("header.payload.signature".into()),
    )
    .await;
    let broker = Broker::new(&double.endpoint(), ids(&[broker_id]), Arc::clone(&source))
        .expect("broker client");
    let audiences = vec!["sts.amazonaws.com".to_owned()];
    let token = broker
        .fetch_jwt_svid(&kustomization(), &audiences)
        .await
        .expect("a JWT-SVID");
    assert_eq!(token.as_str(), "header.payload.signature");
    let token = broker
        .fetch_jwt_svid(&kustomization(), &audiences)
        .await
        .expect("a second JWT-SVID on the same connection");
    assert_eq!(token.as_str(), "header.payload.signature");
    let requests = double.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].type_url,
        "type.googleapis.com/spiffe.broker.KubernetesObjectReference"
    );
    assert_eq!(
        requests[0].object,
        [
            "kustomizations",
            "kustomize.toolkit.fluxcd.io",
            "apps",
            "podinfo",
            "6f1c2b4e-0000-4000-8000-000000000001"
        ]
        .map(String::from)
    );
    assert_eq!(requests[0].audiences, audiences);

    double.answer(BrokerAnswer::Refuse(
        7,
        "caller is not an authorized broker".into(),
    ));
    let error = broker
        .fetch_jwt_svid(&kustomization(), &audiences)
        .await
        .expect_err("refused");
    assert_eq!(
        error.to_string(),
        format!(
            "the SPIFFE Broker at {} did not issue a JWT-SVID: caller is not an authorized broker (PermissionDenied)",
            double.endpoint()
        )
    );
}

#[tokio::test]
async fn a_broker_with_another_id_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("cluster.test");
    let (_api, source) = source(&ca, dir.path()).await;
    let impostor = "spiffe://cluster.test/ns/default/sa/impostor";
    let double = BrokerDouble::start(
        &ca,
        &ca.issue(impostor),
        BrokerAnswer::Token("never.sent.token".into()),
    )
    .await;
    let expected = "spiffe://cluster.test/spire/broker";
    let broker = Broker::new(&double.endpoint(), ids(&[expected]), source).expect("client");
    let error = broker
        .fetch_jwt_svid(&kustomization(), &[])
        .await
        .expect_err("impostor");
    let message = error.to_string();
    assert!(
        message.contains(impostor) && message.contains(expected),
        "{message}"
    );
    assert!(!message.contains("never.sent.token"), "{message}");
    assert!(
        double.requests().is_empty(),
        "no request reaches an impostor"
    );
}
