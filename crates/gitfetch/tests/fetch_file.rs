//! `fetch_file` against a local HTTP server.

mod support;

use std::time::Duration;

use gitfetch::{FetchError, fetch_file};
use support::server::{Response, Server, hanging_server};

const YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n";

fn server() -> Server {
    Server::start(|request| match request.path.as_str() {
        "/cm.yaml" => Response::new(200, "OK", YAML),
        "/big" => Response::new(200, "OK", vec![b'x'; 100_000]),
        "/big-no_length" => {
            let mut r = Response::new(200, "OK", vec![b'x'; 100_000]);
            r.no_length = true;
            r
        }
        "/moved" => {
            let mut r = Response::new(302, "Found", "");
            r.headers
                .push(("Location".to_string(), "/cm.yaml".to_string()));
            r
        }
        "/loop" => {
            let mut r = Response::new(302, "Found", "");
            r.headers
                .push(("Location".to_string(), "/loop".to_string()));
            r
        }
        "/to-metadata" => {
            let mut r = Response::new(302, "Found", "");
            r.headers.push((
                "Location".to_string(),
                "http://169.254.169.254/latest/meta-data/iam/".to_string(),
            ));
            r
        }
        "/broken" => Response::new(500, "Internal Server Error", "oops"),
        _ => Response::new(404, "Not Found", "no such file"),
    })
}

const LIMIT: u64 = 1 << 20;

#[test]
fn a_file_is_fetched() {
    let server = server();
    let body = fetch_file(&server.url("/cm.yaml"), Duration::from_secs(30), LIMIT).expect("200");
    assert_eq!(body, YAML.as_bytes());
}

#[test]
fn redirects_are_followed_up_to_a_bound() {
    let server = server();
    let body = fetch_file(&server.url("/moved"), Duration::from_secs(30), LIMIT).expect("302");
    assert_eq!(body, YAML.as_bytes());
    let err = fetch_file(&server.url("/loop"), Duration::from_secs(30), LIMIT).expect_err("loop");
    assert!(matches!(err, FetchError::Request { .. }), "{err}");
}

#[test]
fn metadata_addresses_are_refused_before_any_request() {
    for url in [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://[fe80::1]:8080/x",
    ] {
        // No time at all to fetch in: any request would end as a timeout, so a refusal
        // shows that the address was refused before a request was made.
        let err = fetch_file(url, Duration::ZERO, LIMIT).expect_err(url);
        assert!(matches!(err, FetchError::Refused { .. }), "{url}: {err}");
        assert!(
            err.to_string()
                .starts_with(&format!("refusing to fetch {url}: ")),
            "{err}"
        );
    }
}

#[test]
fn a_redirect_to_a_metadata_address_is_refused() {
    let server = server();
    let url = server.url("/to-metadata");
    let err = fetch_file(&url, Duration::from_secs(30), LIMIT).expect_err("refused");
    assert!(matches!(err, FetchError::Refused { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to fetch {url}: 169.254.169.254 is a link-local or cloud metadata \
             address, which remote loads never reach"
        )
    );
}

#[test]
fn a_status_outside_2xx_is_an_error_naming_it() {
    let server = server();
    let url = server.url("/missing.yaml");
    let err = fetch_file(&url, Duration::from_secs(30), LIMIT).expect_err("404");
    assert!(matches!(err, FetchError::Status { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("fetching {url} failed: the server answered 404 Not Found")
    );
    let err = fetch_file(&server.url("/broken"), Duration::from_secs(30), LIMIT).expect_err("500");
    assert!(
        err.to_string().ends_with("500 Internal Server Error"),
        "{err}"
    );
}

#[test]
fn the_size_limit_is_enforced_with_and_without_a_content_length() {
    let server = server();
    for path in ["/big", "/big-no_length"] {
        let url = server.url(path);
        let body = fetch_file(&url, Duration::from_secs(30), 100_000).expect("at the limit");
        assert_eq!(body.len(), 100_000, "{path}");
        let err = fetch_file(&url, Duration::from_secs(30), 99_999).expect_err("over");
        assert!(
            matches!(err, FetchError::TooLarge { limit: 99_999, .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!("fetching {url} failed: the response exceeds the limit of 99999 bytes")
        );
    }
}

#[test]
fn a_server_that_never_answers_is_cut_at_the_timeout() {
    let server = hanging_server(Duration::from_secs(120));
    let url = format!("http://{}/cm.yaml", server.addr);
    let err = fetch_file(&url, Duration::from_secs(2), LIMIT).expect_err("hangs");
    // The fetch gave up while the server was still silent: its own deadline cut it.
    assert!(
        server.still_silent(),
        "the fetch waited for the server: {err}"
    );
    assert!(matches!(err, FetchError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("fetching {url} timed out after 2s")
    );
}

#[test]
fn only_http_urls_are_fetched_and_credentials_stay_hidden() {
    let err = fetch_file("file:///etc/passwd", Duration::from_secs(5), LIMIT).expect_err("file");
    assert!(matches!(err, FetchError::InvalidUrl { .. }), "{err}");
    let err = fetch_file("not a url", Duration::from_secs(5), LIMIT).expect_err("garbage");
    assert!(matches!(err, FetchError::InvalidUrl { .. }), "{err}");

    let server = server();
    let url = server
        .url("/gone")
        .replace("http://", "http://user:pa55w0rd@");
    let err = fetch_file(&url, Duration::from_secs(30), LIMIT).expect_err("404");
    let text = err.to_string();
    assert!(
        !text.contains("pa55w0rd") && !text.contains("user"),
        "{text}"
    );
    assert!(text.contains(&server.url("/gone")), "{text}");
}
