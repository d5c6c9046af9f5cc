//! A stand-in for notification-controller's event receiver, over HTTP or HTTPS: it decodes
//! every POST with the schema of fluxcd/pkg `apis/event` v0.32.0 v1's `Event` (the type
//! notification-controller v1.10 decodes into), refusing unknown fields and missing required
//! ones, and answers as scripted (a status, a `Retry-After`, or no answer in time).
//!
//! Include with `#[path = "support/event_receiver.rs"] mod event_receiver;` (or from
//! `support`). HTTPS uses a throw-away CA made with the `openssl` CLI.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

// ---------------------------------------------------------------------------------------------
// The schema

/// apis/event v1 `Event`, field for field. Required fields (no `omitempty`, `+required`) are
/// plain; optional ones are `Option`. Anything else in the body fails decoding.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FluxEvent {
    /// The object the event is about.
    pub involved_object: ObjectReference,
    /// An optional secondary object.
    #[serde(default)]
    pub related_object: Option<ObjectReference>,
    /// `trace`, `info` or `error`.
    pub severity: EventSeverity,
    /// `metav1.Time`: RFC 3339.
    pub timestamp: String,
    /// At most 39 000 characters.
    pub message: String,
    /// Why.
    pub reason: String,
    /// What was done.
    pub action: String,
    /// Free-form string metadata.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// The emitting controller.
    pub reporting_controller: String,
    /// The emitting instance.
    #[serde(default)]
    pub reporting_instance: Option<String>,
}

/// core/v1 `ObjectReference`: every field optional.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub resource_version: Option<String>,
    #[serde(default)]
    pub field_path: Option<String>,
}

/// The enum of `severity`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EventSeverity {
    Trace,
    Info,
    Error,
}

/// The longest message the schema allows.
pub const MAX_MESSAGE_CHARS: usize = 39_000;

impl FluxEvent {
    /// Decodes `body` strictly and checks what the schema says beyond field presence: the
    /// message length, an RFC 3339 timestamp, non-empty required strings, and an involved
    /// object with kind, name and namespace (Flux's recorder refuses to send one without).
    pub fn decode(body: &[u8]) -> Result<FluxEvent, String> {
        let event: FluxEvent = serde_json::from_slice(body).map_err(|e| {
            format!(
                "not an apis/event v1 Event: {e}: {}",
                String::from_utf8_lossy(body)
            )
        })?;
        let mut problems = Vec::new();
        if event.message.chars().count() > MAX_MESSAGE_CHARS {
            problems.push(format!(
                "message longer than {MAX_MESSAGE_CHARS} characters"
            ));
        }
        if event
            .timestamp
            .parse::<k8s_openapi::jiff::Timestamp>()
            .is_err()
        {
            problems.push(format!("timestamp {:?} is not RFC 3339", event.timestamp));
        }
        for (field, value) in [
            ("reason", &event.reason),
            ("action", &event.action),
            ("reportingController", &event.reporting_controller),
        ] {
            if value.is_empty() {
                problems.push(format!("{field} is empty"));
            }
        }
        let involved = &event.involved_object;
        for (field, value) in [
            ("kind", &involved.kind),
            ("name", &involved.name),
            ("namespace", &involved.namespace),
        ] {
            if value.as_deref().is_none_or(str::is_empty) {
                problems.push(format!("involvedObject.{field} is missing"));
            }
        }
        if problems.is_empty() {
            Ok(event)
        } else {
            Err(format!("{}: {event:?}", problems.join(", ")))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The CA

/// A CA and a certificate it signed for `localhost` and `127.0.0.1`.
pub struct TestCa {
    _dir: tempfile::TempDir,
    /// The CA certificate (PEM), for `SSL_CERT_FILE` or a root store.
    pub ca_pem: PathBuf,
    cert_pem: PathBuf,
    key_pem: PathBuf,
}

impl TestCa {
    /// Makes a CA and a server certificate with `openssl`.
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().expect("a temporary directory for the test CA");
        let path = |name: &str| dir.path().join(name);
        let ext = path("server.ext");
        std::fs::write(
            &ext,
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write the extension file");
        let p = |p: &Path| p.to_string_lossy().into_owned();
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=kc-test events CA",
            "-keyout",
            &p(&path("ca.key")),
            "-out",
            &p(&path("ca.pem")),
        ]);
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &p(&path("server.key")),
            "-out",
            &p(&path("server.csr")),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &p(&path("server.csr")),
            "-CA",
            &p(&path("ca.pem")),
            "-CAkey",
            &p(&path("ca.key")),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &p(&ext),
            "-out",
            &p(&path("server.pem")),
        ]);
        TestCa {
            ca_pem: path("ca.pem"),
            cert_pem: path("server.pem"),
            key_pem: path("server.key"),
            _dir: dir,
        }
    }

    /// A client configuration that trusts this CA only.
    pub fn client_config(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&self.ca_pem).expect("read the CA") {
            roots
                .add(cert.expect("a CA certificate"))
                .expect("add the CA");
        }
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
    }

    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert_pem)
            .expect("read the server certificate")
            .map(|cert| cert.expect("a server certificate"))
            .collect();
        let key = PrivateKeyDer::from_pem_file(&self.key_pem).expect("read the server key");
        Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the server certificate and key"),
        )
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

fn openssl(args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .expect("the openssl CLI makes the test CA; it is a prerequisite of the tests");
    assert!(
        output.status.success(),
        "openssl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// The receiver

/// How the receiver answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// This status, no body.
    Status(u16),
    /// This status with `Retry-After: <seconds>`.
    RetryAfter(u16, u64),
    /// Nothing for this long, then 202.
    Stall(Duration),
}

/// One request the receiver read.
#[derive(Clone, Debug)]
pub struct Received {
    /// When its body was read.
    pub at: Instant,
    /// Method and path.
    pub request_line: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The body decoded with the strict schema, or why it could not be.
    pub event: Result<FluxEvent, String>,
}

/// A receiver on 127.0.0.1, serving until the process ends.
pub struct Receiver {
    port: u16,
    tls: bool,
    script: Arc<Mutex<VecDeque<Answer>>>,
    received: Arc<Mutex<Vec<Received>>>,
    /// Connections accepted so far (a TLS handshake that fails still counts).
    connections: Arc<AtomicUsize>,
}

impl Receiver {
    /// A plain HTTP receiver.
    pub fn http() -> Receiver {
        Receiver::start(None)
    }

    /// An HTTPS receiver with a certificate `ca` signed.
    pub fn https(ca: &TestCa) -> Receiver {
        Receiver::start(Some(ca.server_config()))
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the event receiver");
        let port = listener.local_addr().expect("its address").port();
        let receiver = Receiver {
            port,
            tls: tls.is_some(),
            script: Arc::default(),
            received: Arc::default(),
            connections: Arc::default(),
        };
        let (script, received) = (receiver.script.clone(), receiver.received.clone());
        let connections = receiver.connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                connections.fetch_add(1, Ordering::SeqCst);
                let (script, received, tls) = (script.clone(), received.clone(), tls.clone());
                std::thread::spawn(move || serve(stream, tls, &script, &received));
            }
        });
        receiver
    }

    /// The URL to give as `--events-addr`, with `host` (`127.0.0.1` or `localhost`).
    pub fn url(&self, host: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{host}:{}/", self.port)
    }

    /// Queues answers for the next requests; after them, every request gets 202.
    pub fn answer(&self, answers: &[Answer]) {
        self.script.lock().expect("script").extend(answers);
    }

    /// How many connections were accepted so far: a client's attempts, whether or not one
    /// got as far as a request.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("received").clone()
    }

    /// Every event received so far; panics naming the first body that broke the schema.
    pub fn events(&self) -> Vec<FluxEvent> {
        self.received()
            .into_iter()
            .map(|r| r.event.unwrap_or_else(|e| panic!("the receiver got {e}")))
            .collect()
    }
}

fn serve(
    stream: TcpStream,
    tls: Option<Arc<rustls::ServerConfig>>,
    script: &Mutex<VecDeque<Answer>>,
    received: &Mutex<Vec<Received>>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    match tls {
        None => exchange(stream, script, received),
        Some(config) => {
            let Ok(connection) = rustls::ServerConnection::new(config) else {
                return;
            };
            exchange(
                rustls::StreamOwned::new(connection, stream),
                script,
                received,
            )
        }
    }
}

/// Reads requests off one connection and answers each, until the client closes it.
fn exchange<S: Read + Write>(
    stream: S,
    script: &Mutex<VecDeque<Answer>>,
    received: &Mutex<Vec<Received>>,
) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        received.lock().expect("received").push(Received {
            at: Instant::now(),
            request_line: request_line.trim_end().to_string(),
            headers,
            event: FluxEvent::decode(&body),
        });
        let answer = script.lock().expect("script").pop_front();
        let (status, extra) = match answer {
            None => (202, String::new()),
            Some(Answer::Status(status)) => (status, String::new()),
            Some(Answer::RetryAfter(status, seconds)) => {
                (status, format!("Retry-After: {seconds}\r\n"))
            }
            Some(Answer::Stall(pause)) => {
                std::thread::sleep(pause);
                (202, String::new())
            }
        };
        let response = format!("HTTP/1.1 {status} Scripted\r\n{extra}Content-Length: 0\r\n\r\n");
        let stream = reader.get_mut();
        if stream.write_all(response.as_bytes()).is_err() || stream.flush().is_err() {
            return;
        }
    }
}
