//! An in-process HTTP/1.1 server for source artifacts (tar.gz), plus the manifests they hold.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::args::ObjectKinds;

/// Serves registered tarballs at `/artifacts/<digest>.tar.gz`, one thread per connection.
pub struct ArtifactServer {
    address: String,
    files: Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>,
    /// Artifacts served (200 answers), all paths together.
    downloads: Arc<AtomicU64>,
}

/// Where a published artifact can be fetched, and its digest (`sha256:<hex>`).
pub struct Artifact {
    pub url: String,
    pub digest: String,
    pub size: usize,
}

impl ArtifactServer {
    /// Binds a loopback port and starts serving in a background thread.
    pub fn start() -> ArtifactServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the artifact server");
        let address = format!(
            "http://{}",
            listener.local_addr().expect("artifact server address")
        );
        let files: Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>> = Arc::default();
        let served = files.clone();
        let downloads = Arc::new(AtomicU64::new(0));
        let counted = downloads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let files = served.clone();
                let counted = counted.clone();
                std::thread::spawn(move || handle(stream, &files, &counted));
            }
        });
        ArtifactServer {
            address,
            files,
            downloads,
        }
    }

    /// Artifacts served so far.
    pub fn downloads(&self) -> u64 {
        self.downloads.load(Ordering::Relaxed)
    }

    /// Registers `tarball` and returns its URL and digest.
    pub fn publish(&self, tarball: Vec<u8>) -> Artifact {
        let hex = hex::encode(Sha256::digest(&tarball));
        let path = format!("/artifacts/{hex}.tar.gz");
        let size = tarball.len();
        self.files
            .lock()
            .expect("artifact map lock")
            .insert(path.clone(), Arc::new(tarball));
        Artifact {
            url: format!("{}{path}", self.address),
            digest: format!("sha256:{hex}"),
            size,
        }
    }
}

/// Answers one request: the file at the request path, or 404.
fn handle(stream: TcpStream, files: &Mutex<HashMap<String, Arc<Vec<u8>>>>, downloads: &AtomicU64) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let body = files.lock().expect("artifact map lock").get(path).cloned();
    let mut stream = stream;
    if body.is_some() {
        downloads.fetch_add(1, Ordering::Relaxed);
    }
    let _ = match body {
        Some(body) => stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .and_then(|()| stream.write_all(&body)),
        None => stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

/// A tar.gz holding the given (path, content) files.
pub fn tarball(files: &[(String, String)]) -> Vec<u8> {
    let files: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(path, content)| (path.clone(), content.clone().into_bytes()))
        .collect();
    binary_tarball(&files)
}

/// The kind of the object at `position` in an artifact.
pub fn kind(kinds: ObjectKinds, position: u64) -> &'static str {
    const MIXED: [&str; 3] = ["ConfigMap", "Service", "Deployment"];
    match kinds {
        ObjectKinds::Mixed => MIXED[(position % MIXED.len() as u64) as usize],
        ObjectKinds::MostlyConfigMaps => match position % 100 {
            50 => "Service",
            99 => "Deployment",
            _ => "ConfigMap",
        },
        ObjectKinds::ConfigMaps => "ConfigMap",
        ObjectKinds::NetworkPolicies if position == 0 => "ConfigMap",
        ObjectKinds::NetworkPolicies => "NetworkPolicy",
    }
}

/// The value of `data.value` of the ConfigMap at `position` at `revision`, as
/// [`manifests`] writes it.
pub fn config_map_value(position: u64, revision: u32) -> String {
    let value = if position == 0 { revision } else { 1 };
    value.to_string()
}

/// The files of one Kustomization's artifact at `revision` (1 or 2): `objects` objects under
/// `deploy/` of the given kinds, named `<ks>-<i>`, in namespace `ns`, labelled
/// `kc-bench/run: <run>`. Revision 2 changes object 0 (a ConfigMap with every choice of
/// kinds) and drops the last object.
pub fn manifests(
    ns: &str,
    ks: &str,
    run: &str,
    objects: u64,
    kinds: ObjectKinds,
    revision: u32,
) -> Vec<(String, String)> {
    let count = if revision >= 2 { objects - 1 } else { objects };
    (0..count)
        .map(|i| {
            let name = format!("{ks}-{i}");
            let value = config_map_value(i, revision);
            (
                format!("deploy/{name}.yaml"),
                manifest(kind(kinds, i), ns, &name, run, &value, BASE_PORT),
            )
        })
        .collect()
}

/// The port of a NetworkPolicy at revision 1.
pub const BASE_PORT: u32 = 8080;

/// The files of one Kustomization's artifact at `revision` where every object changes from
/// one revision to the next and none is dropped (the `big` scenario): every ConfigMap's
/// `data.value` is the revision, every NetworkPolicy's port is [`BASE_PORT`] + revision - 1.
/// Revision 1 is the same as [`manifests`]'.
pub fn manifests_every_changed(
    ns: &str,
    ks: &str,
    run: &str,
    objects: u64,
    kinds: ObjectKinds,
    revision: u32,
) -> Vec<(String, String)> {
    (0..objects)
        .map(|i| {
            let name = format!("{ks}-{i}");
            let port = BASE_PORT + revision.saturating_sub(1);
            (
                format!("deploy/{name}.yaml"),
                manifest(kind(kinds, i), ns, &name, run, &revision.to_string(), port),
            )
        })
        .collect()
}

/// The files of a monorepo artifact at `revision`: for each Kustomization (namespace, name),
/// its [`manifests`] under `<name>/` and `padding` bytes of incompressible other files
/// (`<name>/assets.bin`), the same at every revision.
pub fn monorepo(
    kustomizations: &[(String, String)],
    run: &str,
    objects: u64,
    kinds: ObjectKinds,
    revision: u32,
    padding: usize,
) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for (i, (ns, name)) in kustomizations.iter().enumerate() {
        for (path, text) in manifests(ns, name, run, objects, kinds, revision) {
            files.push((format!("{name}/{path}"), text.into_bytes()));
        }
        if padding > 0 {
            files.push((format!("{name}/assets.bin"), noise(i as u64, padding)));
        }
    }
    files
}

/// `len` bytes that gzip cannot compress, the same for the same `seed`.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    // xorshift64*: cheap, deterministic, and random enough for gzip.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        bytes.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// A tar.gz holding the given (path, bytes) files.
pub fn binary_tarball(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, content.as_slice())
            .expect("append a file to the tarball");
    }
    builder
        .into_inner()
        .expect("finish the tar stream")
        .finish()
        .expect("finish the gzip stream")
}

/// One object's YAML: a ConfigMap holds `value`, a NetworkPolicy admits `port`. Services are
/// headless: the test control plane's service CIDR is a /24.
fn manifest(kind: &str, ns: &str, name: &str, run: &str, value: &str, port: u32) -> String {
    let metadata = format!(
        "metadata:\n  name: {name}\n  namespace: {ns}\n  labels:\n    kc-bench/run: {run}\n    app: {name}\n"
    );
    match kind {
        "ConfigMap" => format!(
            "apiVersion: v1\nkind: ConfigMap\n{metadata}data:\n  value: \"{value}\"\n  text: |\n    some configuration for {name}\n"
        ),
        "NetworkPolicy" => format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n{metadata}spec:\n  podSelector:\n    matchLabels:\n      app: {name}\n  policyTypes:\n  - Ingress\n  ingress:\n  - from:\n    - podSelector:\n        matchLabels:\n          role: frontend\n    ports:\n    - protocol: TCP\n      port: {port}\n"
        ),
        "Service" => format!(
            "apiVersion: v1\nkind: Service\n{metadata}spec:\n  clusterIP: None\n  selector:\n    app: {name}\n  ports:\n  - name: http\n    port: 80\n    targetPort: 8080\n"
        ),
        _ => format!(
            "apiVersion: apps/v1\nkind: Deployment\n{metadata}spec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: app\n        image: ghcr.io/stefanprodan/podinfo:6.7.0\n        ports:\n        - containerPort: 8080\n        resources:\n          requests:\n            cpu: 10m\n            memory: 16Mi\n"
        ),
    }
}
