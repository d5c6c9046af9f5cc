//! Test doubles (feature `testing`): a test CA issuing X.509-SVIDs, a SPIFFE Workload API
//! server on a Unix socket, a SPIFFE Broker, and an mTLS HTTPS server. Every key is made
//! at run time; none is written anywhere but memory.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, channel::Channel as BodyChannel};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;

use crate::endpoint::Endpoint;
use crate::proto::{Decoder, Encoder, Value};

/// A CA of one trust domain, issuing X.509-SVIDs.
pub struct TestCa {
    trust_domain: String,
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// An X.509-SVID the test CA issued, with its PKCS#8 key.
#[derive(Clone)]
pub struct IssuedSvid {
    /// The SPIFFE ID.
    pub id: String,
    /// The leaf certificate.
    pub cert: CertificateDer<'static>,
    /// The PKCS#8 private key.
    pub key: Vec<u8>,
}

impl TestCa {
    /// A CA for `trust_domain` (`example.org`).
    pub fn new(trust_domain: &str) -> TestCa {
        let key = KeyPair::generate().expect("generate CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{trust_domain} test CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.subject_alt_names = vec![SanType::URI(
            format!("spiffe://{trust_domain}")
                .try_into()
                .expect("CA URI"),
        )];
        let cert = params.self_signed(&key).expect("self-sign CA");
        TestCa {
            trust_domain: trust_domain.to_owned(),
            cert,
            key,
        }
    }

    /// The CA certificate (the trust bundle).
    pub fn cert(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// An X.509-SVID for `id`, usable by TLS clients and servers.
    pub fn issue(&self, id: &str) -> IssuedSvid {
        let key = KeyPair::generate().expect("generate SVID key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("SVID params");
        params.subject_alt_names = vec![SanType::URI(id.try_into().expect("SVID URI"))];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyAgreement,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign SVID");
        IssuedSvid {
            id: id.to_owned(),
            cert: cert.der().clone(),
            key: key.serialize_der(),
        }
    }

    /// The trust domain.
    pub fn trust_domain(&self) -> &str {
        &self.trust_domain
    }

    /// A TLS server configuration presenting `svid` and requiring a client certificate
    /// this CA issued; `alpn` is offered (`h2`, `http/1.1`).
    pub fn server_config(&self, svid: &IssuedSvid, alpn: &[u8]) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert()).expect("CA root");
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&provider),
        )
        .build()
        .expect("client verifier");
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![svid.cert.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(svid.key.clone())),
            )
            .expect("server certificate");
        config.alpn_protocols = vec![alpn.to_vec()];
        config
    }
}

/// The `X509SVIDResponse` giving `svid` with the bundle of `ca`.
pub fn x509_svid_response(ca: &TestCa, svid: &IssuedSvid) -> Bytes {
    let entry = Encoder::default()
        .bytes(1, svid.id.as_bytes())
        .bytes(2, &svid.cert)
        .bytes(3, &svid.key)
        .bytes(4, &ca.cert())
        .finish();
    Encoder::default().message(1, &entry).finish()
}

fn grpc_frame(message: &[u8]) -> Bytes {
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    Bytes::from(framed)
}

fn trailers(code: u32, message: &str) -> http::HeaderMap {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", code.into());
    if let Ok(value) = http::HeaderValue::from_str(message) {
        trailers.insert("grpc-message", value);
    }
    trailers
}

type GrpcBody = BodyChannel<Bytes, Infallible>;

fn grpc_error(code: u32, message: &str) -> http::Response<GrpcBody> {
    let (mut sender, body) = BodyChannel::new(1);
    let trailers = trailers(code, message);
    let _ = sender.try_send(Frame::trailers(trailers));
    grpc_response(body)
}

fn grpc_response(body: GrpcBody) -> http::Response<GrpcBody> {
    let mut response = http::Response::new(body);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

/// A SPIFFE Workload API server on a Unix socket serving `FetchX509SVID` streams; every
/// open stream gets each new response [`WorkloadApiDouble::rotate`] sets.
pub struct WorkloadApiDouble {
    path: PathBuf,
    current: watch::Sender<Bytes>,
    task: tokio::task::JoinHandle<()>,
}

impl WorkloadApiDouble {
    /// Listens at `dir/agent.sock`, serving `response` (see [`x509_svid_response`]).
    pub fn start(dir: &Path, response: Bytes) -> WorkloadApiDouble {
        let path = dir.join("agent.sock");
        let listener = UnixListener::bind(&path).expect("bind the Workload API socket");
        let (current, _) = watch::channel(response);
        let updates = current.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let updates = updates.subscribe();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let updates = updates.clone();
                        async move { Ok::<_, Infallible>(serve_x509(request, updates)) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        WorkloadApiDouble {
            path,
            current,
            task,
        }
    }

    /// The socket's address (`unix:///…/agent.sock`).
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::Unix(self.path.clone())
    }

    /// Sends `response` to every open stream (an SVID rotation).
    pub fn rotate(&self, response: Bytes) {
        self.current.send_replace(response);
    }
}

impl Drop for WorkloadApiDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn serve_x509(
    request: http::Request<Incoming>,
    mut updates: watch::Receiver<Bytes>,
) -> http::Response<GrpcBody> {
    if request
        .headers()
        .get("workload.spiffe.io")
        .map(|v| v.as_bytes())
        != Some(b"true")
    {
        return grpc_error(3, "security header missing from request");
    }
    if request.uri().path() != "/SpiffeWorkloadAPI/FetchX509SVID" {
        return grpc_error(12, "unimplemented");
    }
    let (mut sender, body) = BodyChannel::new(4);
    tokio::spawn(async move {
        loop {
            let message = grpc_frame(&updates.borrow_and_update().clone());
            if sender.send(Frame::data(message)).await.is_err() {
                return;
            }
            if updates.changed().await.is_err() {
                return;
            }
        }
    });
    grpc_response(body)
}

/// What the broker double answers.
#[derive(Clone)]
pub enum BrokerAnswer {
    /// A JWT-SVID with this token.
    Token(String),
    /// A gRPC error status (code and message).
    Refuse(u32, String),
}

/// A request the broker double received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRequest {
    /// The object reference's type URL.
    pub type_url: String,
    /// `plural`, `group`, `namespace`, `name`, `uid` of the reference.
    pub object: [String; 5],
    /// The audiences.
    pub audiences: Vec<String>,
}

/// A SPIFFE Broker over mTLS on a local TCP port, answering `FetchJWTSVID`.
pub struct BrokerDouble {
    address: std::net::SocketAddr,
    answer: Arc<Mutex<BrokerAnswer>>,
    requests: Arc<Mutex<Vec<BrokerRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl BrokerDouble {
    /// Serves as `svid` (issued by `ca`), answering `answer`.
    pub async fn start(ca: &TestCa, svid: &IssuedSvid, answer: BrokerAnswer) -> BrokerDouble {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind broker");
        let address = listener.local_addr().expect("broker address");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(ca.server_config(svid, b"h2")));
        let answer = Arc::new(Mutex::new(answer));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (served_answer, served_requests) = (Arc::clone(&answer), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let (answer, requests) = (Arc::clone(&served_answer), Arc::clone(&served_requests));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let (answer, requests) = (Arc::clone(&answer), Arc::clone(&requests));
                        async move { Ok::<_, Infallible>(serve_jwt(request, &answer, &requests).await) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        BrokerDouble {
            address,
            answer,
            requests,
            task,
        }
    }

    /// The endpoint (`tcp://127.0.0.1:port`).
    pub fn endpoint(&self) -> String {
        format!("tcp://{}", self.address)
    }

    /// Changes the answer.
    pub fn answer(&self, answer: BrokerAnswer) {
        *self.answer.lock().expect("answer lock") = answer;
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<BrokerRequest> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for BrokerDouble {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_jwt(
    request: http::Request<Incoming>,
    answer: &Mutex<BrokerAnswer>,
    requests: &Mutex<Vec<BrokerRequest>>,
) -> http::Response<GrpcBody> {
    if request
        .headers()
        .get("broker.spiffe.io")
        .map(|v| v.as_bytes())
        != Some(b"true")
    {
        return grpc_error(3, "security header missing from request");
    }
    if request.uri().path() != "/spiffe.broker.API/FetchJWTSVID" {
        return grpc_error(12, "unimplemented");
    }
    let Ok(body) = request.into_body().collect().await else {
        return grpc_error(13, "cannot read the request");
    };
    let body = body.to_bytes();
    let Some(parsed) = body.get(5..).and_then(parse_jwt_request) else {
        return grpc_error(3, "malformed request");
    };
    requests.lock().expect("requests lock").push(parsed);
    let answer = answer.lock().expect("answer lock").clone();
    match answer {
        BrokerAnswer::Refuse(code, message) => grpc_error(code, &message),
        BrokerAnswer::Token(token) => {
            let svid = Encoder::default()
                .bytes(1, b"spiffe://broker.test/object")
                .bytes(2, token.as_bytes())
                .finish();
            let message = Encoder::default().message(1, &svid).finish();
            let (mut sender, body) = BodyChannel::new(2);
            let _ = sender.try_send(Frame::data(grpc_frame(&message)));
            let _ = sender.try_send(Frame::trailers(trailers(0, "")));
            grpc_response(body)
        }
    }
}

fn fields(message: &[u8]) -> Option<Vec<(u32, &[u8])>> {
    let mut decoder = Decoder::new(message);
    let mut out = Vec::new();
    while let Some((field, value)) = decoder.next().ok()? {
        if let Value::Bytes(bytes) = value {
            out.push((field, bytes));
        }
    }
    Some(out)
}

fn field<'a>(fields: &[(u32, &'a [u8])], number: u32) -> &'a [u8] {
    fields
        .iter()
        .find(|(n, _)| *n == number)
        .map(|(_, v)| *v)
        .unwrap_or_default()
}

fn parse_jwt_request(message: &[u8]) -> Option<BrokerRequest> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let request = fields(message)?;
    let workload = fields(field(&request, 1))?;
    let any = fields(field(&workload, 1))?;
    let reference = fields(field(&any, 2))?;
    let kind = fields(field(&reference, 1))?;
    let key = fields(field(&reference, 2))?;
    Some(BrokerRequest {
        type_url: text(field(&any, 1)),
        object: [
            text(field(&kind, 1)),
            text(field(&kind, 2)),
            text(field(&key, 1)),
            text(field(&key, 2)),
            text(field(&reference, 3)),
        ],
        audiences: request
            .iter()
            .filter(|(n, _)| *n == 2)
            .map(|(_, v)| text(v))
            .collect(),
    })
}

/// What the mTLS HTTPS server double answers: status and body for a method and path.
pub type Responder = Arc<dyn Fn(&str, &str, &[u8]) -> (u16, Vec<u8>) + Send + Sync>;

/// A request the mTLS server double served: method, path and body.
pub type ServedRequest = (String, String, Vec<u8>);

/// An HTTP/1.1 server over mTLS on a local TCP port; records each client's SPIFFE ID and
/// each request (method, path, body).
pub struct MtlsHttpServer {
    address: std::net::SocketAddr,
    clients: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<ServedRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl MtlsHttpServer {
    /// Serves as `svid` (issued by `ca`), answering with `responder`.
    pub async fn start(ca: &TestCa, svid: &IssuedSvid, responder: Responder) -> MtlsHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
        let address = listener.local_addr().expect("server address");
        let acceptor =
            tokio_rustls::TlsAcceptor::from(Arc::new(ca.server_config(svid, b"http/1.1")));
        let clients = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (seen_clients, seen_requests) = (Arc::clone(&clients), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let responder = Arc::clone(&responder);
                let (clients, requests) = (Arc::clone(&seen_clients), Arc::clone(&seen_requests));
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let client = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| {
                            webpki::EndEntityCert::try_from(c)
                                .ok()
                                .and_then(|c| c.valid_uri_names().next().map(str::to_owned))
                        })
                        .unwrap_or_default();
                    clients.lock().expect("clients lock").push(client);
                    let service =
                        hyper::service::service_fn(move |request: http::Request<Incoming>| {
                            let (responder, requests) =
                                (Arc::clone(&responder), Arc::clone(&requests));
                            async move {
                                let method = request.method().to_string();
                                let path = request.uri().path().to_owned();
                                let body = request
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes().to_vec())
                                    .unwrap_or_default();
                                let (status, answer) = responder(&method, &path, &body);
                                requests
                                    .lock()
                                    .expect("requests lock")
                                    .push((method, path, body));
                                let mut response =
                                    http::Response::new(Full::new(Bytes::from(answer)));
                                *response.status_mut() =
                                    http::StatusCode::from_u16(status).unwrap_or_default();
                                Ok::<_, Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        MtlsHttpServer {
            address,
            clients,
            requests,
            task,
        }
    }

    /// The server's address.
    pub fn address(&self) -> std::net::SocketAddr {
        self.address
    }

    /// The SPIFFE IDs of the clients that completed a handshake.
    pub fn clients(&self) -> Vec<String> {
        self.clients.lock().expect("clients lock").clone()
    }

    /// The requests served (method, path, body).
    pub fn requests(&self) -> Vec<ServedRequest> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for MtlsHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
