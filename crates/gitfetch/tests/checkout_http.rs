//! Checkouts over smart HTTP from `git http-backend` run by a test server, and the cut of a
//! server that never answers.

mod support;

use std::time::Duration;

use gitfetch::{GitError, checkout};
use support::server::{git_server, hanging_server};
use support::{Repos, assert_checkouts, dest, options, snapshot};

#[test]
fn refs_and_commits_over_http_protocol_v2() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), true);
    let url = server.url("/repo");
    let mut cases = repos.common_ref_cases();
    cases.push((&repos.first[..8], repos.first.clone(), None));
    assert_checkouts(&repos, &url, &cases);
}

#[test]
fn refs_and_commits_over_http_protocol_v0() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), false);
    let url = server.url("/repo");
    for git_ref in ["", "main", "v1", repos.first.as_str(), &repos.first[..6]] {
        let (_tmp, dest) = dest();
        let done = checkout(&url, git_ref, &dest, &options())
            .unwrap_or_else(|e| panic!("checkout of {git_ref:?}: {e}"));
        let want = if matches!(git_ref, "" | "main") {
            &repos.main
        } else {
            &repos.first
        };
        assert_eq!(&done.commit, want, "commit of {git_ref:?}");
        assert_eq!(
            snapshot(&dest),
            repos.archive("repo", want),
            "files of {git_ref:?}"
        );
    }
}

/// The bodies of the `fetch` requests (v2) in the log, as text.
fn fetches(server: &support::server::Server) -> Vec<String> {
    server
        .take_log()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .filter(|body| body.contains("command=fetch"))
        .collect()
}

#[test]
fn branches_tags_and_commit_ids_are_fetched_at_depth_one() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), true);
    let url = server.url("/repo");
    for (git_ref, want) in [
        ("main", repos.main.as_str()),
        ("", repos.main.as_str()),
        (repos.first.as_str(), repos.first.as_str()),
    ] {
        let (_tmp, dest) = dest();
        checkout(&url, git_ref, &dest, &options()).expect("checkout");
        let fetches = fetches(&server);
        assert_eq!(fetches.len(), 1, "{git_ref:?}: {fetches:?}");
        assert!(
            fetches[0].contains("deepen 1"),
            "{git_ref:?}: {}",
            fetches[0]
        );
        assert!(
            fetches[0].contains(&format!("want {want}")),
            "{git_ref:?}: {}",
            fetches[0]
        );
    }
}

#[test]
fn a_commit_id_the_server_refuses_to_send_directly_is_found_in_the_history() {
    // Some servers only send what a ref points at. Then the branches and tags are fetched
    // with their history and the commit is looked for there.
    let repos = Repos::new();
    let root = repos.root.path().to_path_buf();
    let first = repos.first.clone();
    let server = support::server::Server::start(move |request| {
        let body = String::from_utf8_lossy(&request.body);
        if body.contains(&format!("want {first}")) && body.contains("deepen 1") {
            support::server::git_error(&format!("upload-pack: not our ref {first}"))
        } else {
            support::server::git_backend(&root, true, request)
        }
    });
    let (_tmp, dest) = dest();
    let done = checkout(&server.url("/repo"), &repos.first, &dest, &options()).expect("checkout");
    assert_eq!(done.commit, repos.first);
    assert_eq!(snapshot(&dest), repos.archive("repo", &repos.first));
    let fetches = fetches(&server);
    assert_eq!(fetches.len(), 2, "{fetches:?}");
    assert!(!fetches[1].contains("deepen"), "{}", fetches[1]);
}

#[test]
fn a_missing_ref_over_http_is_named() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), true);
    let url = server.url("/repo");
    for git_ref in [
        "nope",
        "0123456789abcdef0123456789abcdef01234567",
        "abcdef0",
    ] {
        let (_tmp, dest) = dest();
        let err = checkout(&url, git_ref, &dest, &options()).expect_err("missing ref");
        assert!(
            matches!(err, GitError::RefNotFound { .. }),
            "{git_ref}: {err}"
        );
        assert_eq!(
            err.to_string(),
            format!("{git_ref:?} was not found in {url}")
        );
    }
}

#[test]
fn a_missing_repository_over_http_is_a_fetch_error() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), true);
    let url = server.url("/absent");
    let (_tmp, dest) = dest();
    let err = checkout(&url, "main", &dest, &options()).expect_err("no repository");
    assert!(matches!(err, GitError::Fetch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("fetching \"main\" from {url} failed: ")),
        "{text}"
    );
}

#[test]
fn submodules_over_http_follow_relative_urls() {
    let repos = Repos::new();
    let server = git_server(repos.root.path(), true);
    let mut opts = options();
    opts.submodules = true;
    let (_tmp, dest) = dest();
    let done = checkout(&server.url("/nested"), "main", &dest, &opts).expect("checkout");
    assert_eq!(
        std::fs::read_to_string(dest.join("inner/modules/sub/sub.txt")).expect("nested file"),
        "in the submodule\n"
    );
    let urls: Vec<_> = done.submodules.iter().map(|s| s.url.clone()).collect();
    assert_eq!(urls, [server.url("/super"), server.url("/sub")]);
}

#[test]
fn a_remote_submodule_may_not_point_to_a_local_path() {
    let repos = Repos::new();
    let sup = repos.path("super");
    let local = repos.path("sub");
    let key = "submodule.modules/sub.url";
    support::git(
        &sup,
        &[
            "config",
            "-f",
            ".gitmodules",
            key,
            local.to_str().expect("utf-8"),
        ],
    );
    support::git(&sup, &["commit", "-q", "-am", "absolute url"]);
    let server = git_server(repos.root.path(), true);
    let mut opts = options();
    opts.submodules = true;
    let (_tmp, dest) = dest();
    let err = checkout(&server.url("/super"), "", &dest, &opts).expect_err("local submodule");
    assert!(matches!(err, GitError::Submodule { .. }), "{err}");
    assert!(
        err.to_string().contains("may not point to a local path"),
        "{err}"
    );
}

#[test]
fn a_server_that_never_answers_is_cut_at_the_timeout() {
    let server = hanging_server(Duration::from_secs(120));
    let addr = server.addr;
    let url = format!("http://{addr}/repo.git");
    let mut opts = options();
    opts.timeout = Duration::from_secs(2);
    let (_tmp, dest) = dest();
    let err = checkout(&url, "main", &dest, &opts).expect_err("hangs");
    // The checkout gave up while the server was still silent: its own deadline cut it.
    assert!(
        server.still_silent(),
        "the checkout waited for the server: {err}"
    );
    assert!(matches!(err, GitError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("checking out \"main\" of {url} timed out after 2s")
    );
}

#[test]
fn credentials_never_reach_a_message() {
    let addr = hanging_server(Duration::from_secs(20)).addr;
    let url = format!("http://alice:s3cret@{addr}/repo.git");
    let mut opts = options();
    opts.timeout = Duration::from_millis(500);
    let (_tmp, dest) = dest();
    let err = checkout(&url, "main", &dest, &opts).expect_err("hangs");
    let text = err.to_string();
    assert!(
        !text.contains("s3cret") && !text.contains("alice"),
        "{text}"
    );
    assert!(text.contains(&format!("http://{addr}/repo.git")), "{text}");

    // A refused connection: the transport's own message is scrubbed too.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let url = format!("https://bob:hunter22@127.0.0.1:{port}/repo.git");
    let (_tmp, dest) = support::dest();
    let err = checkout(&url, "", &dest, &options()).expect_err("refused");
    assert!(matches!(err, GitError::Fetch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        !text.contains("hunter22") && !text.contains("bob"),
        "{text}"
    );
}

#[test]
fn a_pack_larger_than_the_limit_stops_the_fetch() {
    let repos = Repos::new();
    let big = repos.path("big");
    std::fs::create_dir(&big).expect("mkdir");
    support::git(&big, &["init", "-q", "-b", "main"]);
    std::fs::write(big.join("a.txt"), "small\n").expect("write");
    // Incompressible, so that the pack is as large as the file.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(big.join("noise.bin"), noise).expect("write");
    support::git(&big, &["add", "-A"]);
    support::git(&big, &["commit", "-q", "-m", "big"]);
    let server = git_server(repos.root.path(), true);
    let url = server.url("/big");
    let mut opts = options();
    opts.max_bytes = 1 << 20;
    let (_tmp, dest) = dest();
    let err = checkout(&url, "main", &dest, &opts).expect_err("too large");
    assert!(
        matches!(err, GitError::TooLarge { limit, .. } if limit == 1 << 20),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("checking out \"main\" of {url} exceeds the limit of 1048576 bytes")
    );
    // The fetch stopped before anything was written: the small file is not there either.
    assert!(!dest.join("a.txt").exists());

    // With room for it, the same checkout succeeds.
    opts.max_bytes = 4 << 20;
    let (_tmp, dest) = support::dest();
    checkout(&url, "main", &dest, &opts).expect("checkout");
    assert_eq!(snapshot(&dest), repos.archive("big", "main"));
}

#[test]
fn a_repository_on_a_metadata_address_is_refused_before_any_request() {
    for url in [
        "http://169.254.169.254/repo.git",
        "https://metadata.google.internal/repo.git",
        "ssh://git@[fe80::1]/repo.git",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = checkout(url, "main", &dir.path().join("out"), &options()).expect_err(url);
        assert!(matches!(err, GitError::Refused { .. }), "{url}: {err}");
        assert!(
            err.to_string().contains("which remote loads never reach"),
            "{err}"
        );
    }
}
