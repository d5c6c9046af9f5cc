use super::*;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fs;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use flate2::Compression;
use flate2::write::GzEncoder;
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::Response;
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sha2::Digest as _;
use std::io::Write;

#[derive(Clone)]
pub(crate) enum Route {
    /// 200 with this body.
    Ok(Bytes),
    /// Always this status.
    Status(u16),
    /// `failures` times `status` (with optional Retry-After), then 200.
    FailThenOk {
        failures: usize,
        status: u16,
        retry_after: Option<&'static str>,
        body: Bytes,
    },
    /// 302 to this location.
    Redirect(&'static str),
    /// Waits, then 200.
    Slow(Duration, Bytes),
    /// 200 with a chunked body (no Content-Length).
    Chunked(Bytes),
}

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    hits: Arc<HashMap<&'static str, AtomicUsize>>,
}

impl Server {
    pub(crate) async fn start(routes: Vec<(&'static str, Route)>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits: Arc<HashMap<&'static str, AtomicUsize>> = Arc::new(
            routes
                .iter()
                .map(|(p, _)| (*p, AtomicUsize::new(0)))
                .collect(),
        );
        let routes: Arc<HashMap<&'static str, Route>> = Arc::new(routes.into_iter().collect());
        let server_hits = Arc::clone(&hits);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let routes = Arc::clone(&routes);
                let hits = Arc::clone(&server_hits);
                let service = service_fn(move |req: Request<Incoming>| {
                    let routes = Arc::clone(&routes);
                    let hits = Arc::clone(&hits);
                    async move { Ok::<_, Infallible>(respond(&routes, &hits, req).await) }
                });
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Server { addr, hits }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub(crate) fn hits(&self, path: &str) -> usize {
        self.hits[path].load(Ordering::SeqCst)
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(b: Bytes) -> Body {
    Full::new(b).boxed()
}

fn status(code: u16) -> Response<Body> {
    let mut r = Response::new(full(Bytes::from_static(b"nope")));
    *r.status_mut() = StatusCode::from_u16(code).unwrap();
    r
}

async fn respond(
    routes: &HashMap<&'static str, Route>,
    hits: &HashMap<&'static str, AtomicUsize>,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let Some((key, route)) = routes.get_key_value(path.as_str()) else {
        return status(404);
    };
    let n = hits[key].fetch_add(1, Ordering::SeqCst);
    match route.clone() {
        Route::Ok(body) => Response::new(full(body)),
        Route::Status(code) => status(code),
        Route::FailThenOk {
            failures,
            status: code,
            retry_after,
            body,
        } => {
            if n < failures {
                let mut r = status(code);
                if let Some(v) = retry_after {
                    r.headers_mut()
                        .insert(header::RETRY_AFTER, v.parse().unwrap());
                }
                r
            } else {
                Response::new(full(body))
            }
        }
        Route::Redirect(location) => {
            let mut r = status(302);
            r.headers_mut()
                .insert(header::LOCATION, location.parse().unwrap());
            r
        }
        Route::Slow(delay, body) => {
            tokio::time::sleep(delay).await;
            Response::new(full(body))
        }
        Route::Chunked(body) => {
            let chunks: Vec<Result<Frame<Bytes>, Infallible>> = body
                .chunks(1024)
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
            Response::new(http_body_util::StreamBody::new(futures::stream::iter(chunks)).boxed())
        }
    }
}

pub(crate) fn tarball(files: &[(&str, &[u8])]) -> Bytes {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, *data).unwrap();
    }
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&b.into_inner().unwrap()).unwrap();
    Bytes::from(enc.finish().unwrap())
}

fn evil_tarball() -> Bytes {
    let mut h = tar::Header::new_gnu();
    let name = b"../evil";
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_size(5);
    h.set_mode(0o644);
    h.set_cksum();
    let mut b = tar::Builder::new(Vec::new());
    b.append(&h, &b"pwned"[..]).unwrap();
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(&b.into_inner().unwrap()).unwrap();
    Bytes::from(enc.finish().unwrap())
}

pub(crate) fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(data)))
}

pub(crate) fn test_config() -> FetchConfig {
    FetchConfig {
        retries: 3,
        max_size: 1 << 20,
        timeout: Duration::from_secs(10),
        min_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        extract_limits: ExtractLimits::default(),
    }
}

/// A connector as the controller builds one, trusting no root: the tests serve plain HTTP.
pub(crate) fn connector() -> Connector {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

pub(crate) fn fetcher(config: FetchConfig) -> ArtifactFetcher {
    ArtifactFetcher::new(config, None, connector())
}

fn sample() -> Bytes {
    tarball(&[
        ("kustomization.yaml", b"resources:\n- cm.yaml\n"),
        ("cm.yaml", b"kind: ConfigMap\n"),
    ])
}

/// A destination root inside a sandbox, to check nothing lands next to it.
fn dest() -> (tempfile::TempDir, PathBuf) {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("artifact");
    (outer, root)
}

fn outer_entries(outer: &tempfile::TempDir) -> Vec<String> {
    fs::read_dir(outer.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[tokio::test]
async fn fetches_verifies_and_extracts() {
    let body = sample();
    let server = Server::start(vec![("/a.tar.gz", Route::Ok(body.clone()))]).await;
    let (_outer, root) = dest();
    fetcher(test_config())
        .fetch(&server.url("/a.tar.gz"), &sha256(&body), &root)
        .await
        .unwrap();
    assert_eq!(
        fs::read_to_string(root.join("cm.yaml")).unwrap(),
        "kind: ConfigMap\n"
    );
    assert_eq!(server.hits("/a.tar.gz"), 1);
}

#[tokio::test]
async fn supports_sha512_digests() {
    let body = sample();
    let server = Server::start(vec![("/a.tar.gz", Route::Ok(body.clone()))]).await;
    let (_outer, root) = dest();
    let digest = format!("sha512:{}", hex::encode(sha2::Sha512::digest(&body)));
    fetcher(test_config())
        .fetch(&server.url("/a.tar.gz"), &digest, &root)
        .await
        .unwrap();
    assert!(root.join("kustomization.yaml").is_file());
}

#[tokio::test]
async fn not_found_is_not_retried() {
    let server = Server::start(vec![("/gone.tar.gz", Route::Status(404))]).await;
    let (_outer, root) = dest();
    let url = server.url("/gone.tar.gz");
    let err = fetcher(test_config())
        .fetch(&url, &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::NotFound { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("failed to download artifact from {url}: 404 Not Found (artifact not found)")
    );
    assert_eq!(server.hits("/gone.tar.gz"), 1);
    assert!(!root.exists());
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = Server::start(vec![("/forbidden", Route::Status(403))]).await;
    let (_outer, root) = dest();
    let url = server.url("/forbidden");
    let err = fetcher(test_config())
        .fetch(&url, &sha256(b""), &root)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("failed to download artifact from {url}: 403 Forbidden")
    );
    assert_eq!(server.hits("/forbidden"), 1);
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let body = sample();
    let server = Server::start(vec![(
        "/flaky.tar.gz",
        Route::FailThenOk {
            failures: 2,
            status: 500,
            retry_after: None,
            body: body.clone(),
        },
    )])
    .await;
    let (_outer, root) = dest();
    fetcher(test_config())
        .fetch(&server.url("/flaky.tar.gz"), &sha256(&body), &root)
        .await
        .unwrap();
    assert!(root.join("kustomization.yaml").is_file());
    assert_eq!(server.hits("/flaky.tar.gz"), 3);
}

/// On a paused clock (advanced only to the next timer when everything waits), the time a
/// fetch takes is exactly the delays it slept: the server's `Retry-After`, not the backoff
/// (20 s or more here), capped at the longest backoff.
#[tokio::test(start_paused = true)]
async fn too_many_requests_honours_retry_after() {
    let body = sample();
    let config = FetchConfig {
        min_backoff: Duration::from_secs(20),
        max_backoff: Duration::from_secs(30),
        timeout: Duration::from_secs(3600),
        ..test_config()
    };
    for (path, retry_after, waits) in [
        ("/busy.tar.gz", "7", Duration::from_secs(7)),
        ("/busier.tar.gz", "3600", Duration::from_secs(30)),
    ] {
        let server = Server::start(vec![(
            path,
            Route::FailThenOk {
                failures: 1,
                status: 429,
                retry_after: Some(retry_after),
                body: body.clone(),
            },
        )])
        .await;
        let (_outer, root) = dest();
        let started = tokio::time::Instant::now();
        fetcher(config.clone())
            .fetch(&server.url(path), &sha256(&body), &root)
            .await
            .unwrap();
        let waited = started.elapsed();
        assert_eq!(server.hits(path), 2);
        // Timers fire at millisecond granularity: the sleep may end up to 1 ms late.
        assert!(
            waited >= waits && waited < waits + Duration::from_millis(100),
            "Retry-After: {retry_after}: waited {waited:?}, not {waits:?}"
        );
    }
}

#[tokio::test]
async fn gives_up_after_configured_retries() {
    let server = Server::start(vec![("/down", Route::Status(503))]).await;
    let (_outer, root) = dest();
    let url = server.url("/down");
    let err = fetcher(test_config())
        .fetch(&url, &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Status { status, attempts: 4, .. } if status == StatusCode::SERVICE_UNAVAILABLE),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "failed to download artifact from {url}: 503 Service Unavailable (after 4 attempts)"
        )
    );
    assert_eq!(server.hits("/down"), 4);
}

#[tokio::test]
async fn not_implemented_is_not_retried() {
    let server = Server::start(vec![("/501", Route::Status(501))]).await;
    let (_outer, root) = dest();
    let err = fetcher(test_config())
        .fetch(&server.url("/501"), &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Status { attempts: 1, .. }),
        "{err}"
    );
    assert_eq!(server.hits("/501"), 1);
}

#[tokio::test]
async fn digest_mismatch_is_not_retried_and_nothing_is_extracted() {
    let body = sample();
    let server = Server::start(vec![("/a.tar.gz", Route::Ok(body))]).await;
    let (outer, root) = dest();
    let url = server.url("/a.tar.gz");
    let wrong = sha256(b"something else");
    let err = fetcher(test_config())
        .fetch(&url, &wrong, &root)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "failed to verify artifact from {url}: artifact digest mismatch: expected {wrong}, got sha256:"
        )),
        "{msg}"
    );
    assert!(matches!(
        err,
        FetchError::Verify {
            source: DigestError::Mismatch { .. },
            ..
        }
    ));
    assert_eq!(server.hits("/a.tar.gz"), 1);
    assert!(!root.exists());
    assert!(outer_entries(&outer).is_empty());
}

#[tokio::test]
async fn unsupported_digest_fails_before_downloading() {
    let server = Server::start(vec![("/a.tar.gz", Route::Ok(sample()))]).await;
    let (_outer, root) = dest();
    let err = fetcher(test_config())
        .fetch(
            &server.url("/a.tar.gz"),
            "blake3:af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
            &root,
        )
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "unsupported digest algorithm \"blake3\"");
    assert!(matches!(
        err,
        FetchError::InvalidDigest(DigestError::UnsupportedAlgorithm { .. })
    ));
    assert_eq!(server.hits("/a.tar.gz"), 0);
}

#[tokio::test]
async fn oversize_artifact_is_refused() {
    let body = Bytes::from(vec![7u8; 4096]);
    let server = Server::start(vec![
        ("/big", Route::Ok(body.clone())),
        ("/big-chunked", Route::Chunked(body.clone())),
    ])
    .await;
    let config = FetchConfig {
        max_size: 2000,
        ..test_config()
    };
    let f = fetcher(config);
    for path in ["/big", "/big-chunked"] {
        let (_outer, root) = dest();
        let url = server.url(path);
        let err = f.fetch(&url, &sha256(&body), &root).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("artifact from {url} exceeds the maximum download size of 2000 bytes")
        );
        assert_eq!(server.hits(path), 1, "{path}");
        assert!(!root.exists());
    }
}

#[tokio::test]
async fn chunked_artifact_within_limit_is_accepted() {
    let body = sample();
    let server = Server::start(vec![("/c.tar.gz", Route::Chunked(body.clone()))]).await;
    let (_outer, root) = dest();
    fetcher(test_config())
        .fetch(&server.url("/c.tar.gz"), &sha256(&body), &root)
        .await
        .unwrap();
    assert!(root.join("cm.yaml").is_file());
}

#[tokio::test]
async fn malicious_artifact_is_refused_without_writing_outside() {
    let body = evil_tarball();
    let server = Server::start(vec![("/evil.tar.gz", Route::Ok(body.clone()))]).await;
    let (outer, root) = dest();
    let url = server.url("/evil.tar.gz");
    let err = fetcher(test_config())
        .fetch(&url, &sha256(&body), &root)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "failed to extract artifact from {url}: unsafe entry \"../evil\" in artifact: path escapes the root"
        )
    );
    assert!(matches!(
        err,
        FetchError::Extract {
            source: ExtractError::UnsafeEntry { .. },
            ..
        }
    ));
    assert_eq!(outer_entries(&outer), vec!["artifact".to_string()]);
    assert_eq!(server.hits("/evil.tar.gz"), 1);
}

#[tokio::test]
async fn follows_redirects() {
    let body = sample();
    let server = Server::start(vec![
        ("/old.tar.gz", Route::Redirect("/new.tar.gz")),
        ("/new.tar.gz", Route::Ok(body.clone())),
    ])
    .await;
    let (_outer, root) = dest();
    fetcher(test_config())
        .fetch(&server.url("/old.tar.gz"), &sha256(&body), &root)
        .await
        .unwrap();
    assert!(root.join("cm.yaml").is_file());
    assert_eq!(server.hits("/new.tar.gz"), 1);
}

#[tokio::test]
async fn redirect_loop_is_an_error() {
    let server = Server::start(vec![("/loop", Route::Redirect("loop"))]).await;
    let (_outer, root) = dest();
    let err = fetcher(test_config())
        .fetch(&server.url("/loop"), &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            FetchError::Redirect {
                source: RedirectError::TooMany { limit: 10 },
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(server.hits("/loop"), 11);
}

#[tokio::test]
async fn source_controller_localhost_rewrites_the_host() {
    let body = sample();
    let server = Server::start(vec![(
        "/gitrepository/flux-system/podinfo/abc.tar.gz",
        Route::Ok(body.clone()),
    )])
    .await;
    let (_outer, root) = dest();
    let f = ArtifactFetcher::new(test_config(), Some(server.addr.to_string()), connector());
    assert_eq!(f.localhost(), Some(server.addr.to_string().as_str()));
    f.fetch(
        "http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/podinfo/abc.tar.gz",
        &sha256(&body),
        &root,
    )
    .await
    .unwrap();
    assert!(root.join("cm.yaml").is_file());
}

#[tokio::test]
async fn slow_attempts_time_out_and_are_retried() {
    let server = Server::start(vec![(
        "/slow",
        Route::Slow(Duration::from_secs(30), sample()),
    )])
    .await;
    let (_outer, root) = dest();
    let config = FetchConfig {
        retries: 1,
        timeout: Duration::from_millis(200),
        ..test_config()
    };
    let url = server.url("/slow");
    let err = fetcher(config)
        .fetch(&url, &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Timeout { attempts: 2, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("failed to download artifact from {url}: timed out after 200ms (after 2 attempts)")
    );
    assert_eq!(server.hits("/slow"), 2);
}

#[tokio::test]
async fn connection_errors_are_retried() {
    // Reserve a port, then close it so connections are refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (_outer, root) = dest();
    let url = format!("http://{addr}/a.tar.gz");
    let config = FetchConfig {
        retries: 2,
        ..test_config()
    };
    let err = fetcher(config)
        .fetch(&url, &sha256(b""), &root)
        .await
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Request { attempts: 3, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("failed to download artifact from {url}: ")),
        "{msg}"
    );
    assert!(msg.ends_with("(after 3 attempts)"), "{msg}");
}

#[tokio::test]
async fn invalid_urls_are_refused() {
    let (_outer, root) = dest();
    let f = fetcher(test_config());
    for url in ["not a url", "ftp://host/a.tar.gz", "/relative/path"] {
        let err = f.fetch(url, &sha256(b""), &root).await.unwrap_err();
        assert!(matches!(err, FetchError::InvalidUrl { .. }), "{url}: {err}");
        assert!(err.to_string().contains(url), "{err}");
    }
}

#[test]
fn rewrite_url_replaces_host_and_port_only() {
    let url = "http://source-controller.flux-system.svc.cluster.local./gitrepository/ns/name/sha.tar.gz?x=1";
    assert_eq!(rewrite_url(url, None).unwrap(), url);
    assert_eq!(rewrite_url(url, Some("")).unwrap(), url);
    assert_eq!(
        rewrite_url(url, Some("localhost:8080")).unwrap(),
        "http://localhost:8080/gitrepository/ns/name/sha.tar.gz?x=1"
    );
    assert_eq!(
        rewrite_url("https://example.com:9443/a.tar.gz", Some("127.0.0.1")).unwrap(),
        "https://127.0.0.1/a.tar.gz"
    );
    assert_eq!(
        rewrite_url("http://example.com", Some("127.0.0.1:1")).unwrap(),
        "http://127.0.0.1:1/"
    );
    let err = rewrite_url(url, Some("bad host/x")).unwrap_err();
    assert!(matches!(err, FetchError::InvalidUrl { .. }), "{err}");
    assert!(
        err.to_string().contains("SOURCE_CONTROLLER_LOCALHOST"),
        "{err}"
    );
    assert!(rewrite_url("/no/scheme", Some("localhost:1")).is_err());
}

#[test]
fn backoff_doubles_up_to_the_cap_with_jitter() {
    let min = Duration::from_secs(5);
    let max = Duration::from_secs(30);
    for _ in 0..50 {
        let first = backoff(1, min, max);
        assert!(
            first >= Duration::from_millis(2500) && first <= min,
            "{first:?}"
        );
        let second = backoff(2, min, max);
        assert!(
            second >= min && second <= Duration::from_secs(10),
            "{second:?}"
        );
        let late = backoff(40, min, max);
        assert!(late >= Duration::from_secs(15) && late <= max, "{late:?}");
    }
    assert_eq!(backoff(3, Duration::ZERO, max), Duration::ZERO);
}

#[test]
fn resolves_redirect_locations() {
    let base: Uri = "http://h:1/a/b/c.tar.gz?q".parse().unwrap();
    assert_eq!(
        resolve_location(&base, "/x").unwrap().to_string(),
        "http://h:1/x"
    );
    assert_eq!(
        resolve_location(&base, "d.tar.gz").unwrap().to_string(),
        "http://h:1/a/b/d.tar.gz"
    );
    assert_eq!(
        resolve_location(&base, "//other/y").unwrap().to_string(),
        "http://other/y"
    );
    assert_eq!(
        resolve_location(&base, "https://s/z").unwrap().to_string(),
        "https://s/z"
    );
    assert!(matches!(
        resolve_location(&base, "file:///etc/passwd"),
        Err(RedirectError::InvalidLocation { .. })
    ));
    assert!(matches!(
        resolve_location(&base, "ftp://h/x"),
        Err(RedirectError::InvalidLocation {
            problem: LocationProblem::NotHttp,
            ..
        })
    ));
}

#[test]
fn defaults_match_flux() {
    let c = FetchConfig::default();
    assert_eq!(c.retries, 9);
    assert_eq!(c.max_size, 100 * 1024 * 1024);
    assert_eq!(c.min_backoff, Duration::from_secs(5));
    assert_eq!(c.max_backoff, Duration::from_secs(30));
}

#[test]
fn a_custom_verifiers_refusal_is_its_sentence_not_a_debug_dump() {
    #[derive(Debug, thiserror::Error)]
    #[error("the artifact server presented SPIFFE ID 'spiffe://x/y', which is not authorized")]
    struct Refused;
    let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
        rustls::OtherError(std::sync::Arc::new(Refused)),
    ));
    let wrapped = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, tls));
    let text = super::error_chain(&wrapped);
    assert_eq!(
        text,
        "invalid peer certificate: the artifact server presented SPIFFE ID 'spiffe://x/y', which is not authorized"
    );
}
