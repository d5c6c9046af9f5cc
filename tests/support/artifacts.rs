//! What the end-to-end and fault tests share to stand in for source-controller: an HTTP
//! server of artifact tarballs, and GitRepositories whose status names them.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::json;
use sha2::{Digest, Sha256};

// The artifact server: serves tarballs registered by the tests, over plain HTTP/1.1.

/// The server and the files it serves, by path.
pub struct ArtifactServer {
    address: String,
    files: Arc<Mutex<HashMap<String, Served>>>,
    /// Requests answered, by path.
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

/// A file and how long the server waits before it answers a request for it.
#[derive(Clone)]
struct Served {
    body: Vec<u8>,
    delay: Duration,
}

/// The server of this test process, started on first use.
pub fn artifact_server() -> &'static ArtifactServer {
    static SERVER: OnceLock<ArtifactServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind artifact server");
        let address = format!("http://{}", listener.local_addr().expect("local address"));
        let files: Arc<Mutex<HashMap<String, Served>>> = Arc::default();
        let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let served = files.clone();
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let files = served.clone();
                let hits = counted.clone();
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).is_err() {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).map(|n| n == 0).unwrap_or(true) || header == "\r\n" {
                            break;
                        }
                    }
                    let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    *hits.lock().expect("hits lock").entry(path.clone()).or_default() += 1;
                    let served = files.lock().expect("files lock").get(&path).cloned();
                    let response = match served {
                        Some(Served { body, delay }) => {
                            std::thread::sleep(delay);
                            let mut head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            )
                            .into_bytes();
                            head.extend(body);
                            head
                        }
                        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    };
                    let _ = stream.write_all(&response);
                });
            }
        });
        ArtifactServer {
            address,
            files,
            hits,
        }
    })
}

/// How many requests the server has answered for `url`, one it returned from [`serve`].
pub fn hits(url: &str) -> usize {
    let server = artifact_server();
    let path = url.strip_prefix(&server.address).unwrap_or(url);
    server
        .hits
        .lock()
        .expect("hits lock")
        .get(path)
        .copied()
        .unwrap_or(0)
}

/// Serves `tarball` and returns its URL and sha256 digest.
pub fn serve(tarball: Vec<u8>) -> (String, String) {
    serve_after(tarball, Duration::ZERO)
}

/// Serves `tarball`, each request answered after `delay`, and returns its URL and sha256
/// digest.
pub fn serve_after(tarball: Vec<u8>, delay: Duration) -> (String, String) {
    let server = artifact_server();
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&tarball)));
    let path = format!("/artifacts/{}.tar.gz", &digest[7..19]);
    let served = Served {
        body: tarball,
        delay,
    };
    server
        .files
        .lock()
        .expect("files lock")
        .insert(path.clone(), served);
    (format!("{}{path}", server.address), digest)
}

/// A tar.gz of the given files (path, content).
pub fn tarball<P: AsRef<str>, C: AsRef<str>>(files: &[(P, C)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        let content = content.as_ref();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path.as_ref(), content.as_bytes())
            .expect("append");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// A tar.gz with one raw entry whose name (and link target) are written as given, so that
/// unsafe archives can be made.
pub fn raw_tarball(entries: &[(&str, tar::EntryType, &str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for (name, kind, link, content) in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append(&header, content.as_bytes())
            .expect("append raw");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

// GitRepositories.

pub fn git_repository_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
    )
}

/// The label of GitRepositories whose artifacts the tests forge (see [`publish_artifact`]):
/// source-controller, which runs on the same control plane, leaves them alone.
pub const FORGED_ARTIFACT_LABEL: &str = "kc-test/forged-artifact";

/// A GitRepository whose `status.artifact` the test writes itself with [`publish_artifact`].
pub async fn create_git_repository(client: &kube::Client, ns: &str, name: &str) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &git_repository_resource());
    let repo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": ns, "labels": {FORGED_ARTIFACT_LABEL: "true"}},
        "spec": {"url": "https://example.invalid/repo.git", "interval": "10m"}
    }))
    .expect("repo");
    api.create(&PostParams::default(), &repo)
        .await
        .expect("create GitRepository");
}

/// Publishes a new artifact on the GitRepository's status, as source-controller would.
pub async fn publish_artifact(
    client: &kube::Client,
    ns: &str,
    name: &str,
    revision: &str,
    url: &str,
    digest: &str,
) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &git_repository_resource());
    let status = json!({"status": {"artifact": {
        "path": format!("gitrepository/{ns}/{name}/{}.tar.gz", &digest[7..]),
        "url": url,
        "revision": revision,
        "digest": digest,
        "lastUpdateTime": "2026-11-21T00:00:00Z",
        "size": 1,
    }}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("publish artifact");
}
