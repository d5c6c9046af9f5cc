use super::*;

fn spec(url: &str) -> RepoSpec {
    RepoSpec::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Every combination of host spelling, repository, path and ref parses to the same parts.
#[test]
fn host_spellings_repositories_paths_and_refs_combine() {
    let hosts = [
        ("gitHub.com/", "https://github.com/"),
        ("github.com:", "https://github.com/"),
        ("http://github.com/", "https://github.com/"),
        ("https://github.com/", "https://github.com/"),
        ("hTTps://github.com/", "https://github.com/"),
        (
            "https://git-codecommit.us-east-2.amazonaws.com/",
            "https://git-codecommit.us-east-2.amazonaws.com/",
        ),
        (
            "https://fabrikops2.visualstudio.com/",
            "https://fabrikops2.visualstudio.com/",
        ),
        ("ssh://git.example.com:7999/", "ssh://git.example.com:7999/"),
        ("git::https://gitlab.com/", "https://gitlab.com/"),
        ("git::http://git.example.com/", "http://git.example.com/"),
        ("git::https://git.example.com/", "https://git.example.com/"),
        ("git@github.com:", "git@github.com:"),
        ("git@github.com/", "git@github.com:"),
        ("git::git@github.com:", "git@github.com:"),
        ("org-12345@github.com:", "org-12345@github.com:"),
        ("org-12345@github.com/", "org-12345@github.com:"),
    ];
    let mut checked = 0;
    for (written, host) in hosts {
        for repo in ["someOrg/someRepo", "kubernetes/website"] {
            for path in ["README.md", "foo/krusty.txt", ""] {
                for git_ref in ["group/version", "someBranch", "master", "v0.1.0", ""] {
                    let mut url = format!("{written}{repo}");
                    if !path.is_empty() {
                        url = format!("{url}/{path}");
                    }
                    if !git_ref.is_empty() {
                        url = format!("{url}?ref={git_ref}");
                    }
                    let parsed = spec(&url);
                    assert_eq!(parsed.host, host, "{url}");
                    assert_eq!(parsed.repo_path, repo, "{url}");
                    assert_eq!(parsed.kust_root_path, path, "{url}");
                    assert_eq!(parsed.git_ref, git_ref, "{url}");
                    assert_eq!(parsed.raw, url);
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 16 * 2 * 3 * 5);
}

#[test]
fn names_that_are_not_repository_urls_are_refused_with_kustomizes_reason() {
    let cases = [
        ("/tmp", "uri looks like abs path"),
        ("../../tmp", "failed to parse scheme"),
        ("src/github.com/org/repo/path", "failed to parse scheme"),
        ("iauhsdiuashduas", "failed to parse scheme"),
        ("htxxxtp://github.com/", "failed to parse scheme"),
        ("ssh://git.example.com", "failed to parse repo path segment"),
        ("git::___", "failed to parse scheme"),
        (
            "https://host?ref=group/version/minor_version",
            "failed to parse repo path segment",
        ),
        (
            "https://github.com/org/repo.git//path/../../exits/repo",
            "url path exits repo",
        ),
        ("github.com!org/repo.git//path", "failed to parse scheme"),
        ("gh:org/repo", "failed to parse scheme"),
        (
            "https://github.com/thisisa404.yaml",
            "failed to parse repo path segment",
        ),
        (
            "file:////tmp//path/to/whatever",
            "failed to parse repo path segment",
        ),
        (
            "git@scp://github.com/org/repo.git//path",
            "failed to parse repo path segment",
        ),
        (
            "git@ssh://github.com/org/repo.git//path",
            "failed to parse repo path segment",
        ),
        ("https://", "failed to parse host segment"),
        ("", "failed to parse scheme"),
        ("deploy.yaml", "failed to parse scheme"),
        ("../base", "failed to parse scheme"),
    ];
    for (url, reason) in cases {
        let error = RepoSpec::parse(url).expect_err(url).to_string();
        assert!(error.contains(reason), "{url}: {error}");
    }
}

/// (input, clone URL, host, repository path, path inside, ref)
const PARSED: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo/somedir",
        "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo",
        "https://git-codecommit.us-east-2.amazonaws.com/",
        "someorg/somerepo",
        "somedir",
        "",
    ),
    (
        "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo/somedir?ref=testbranch",
        "https://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo",
        "https://git-codecommit.us-east-2.amazonaws.com/",
        "someorg/somerepo",
        "somedir",
        "testbranch",
    ),
    (
        "https://fabrikops2.visualstudio.com/someorg/somerepo?ref=master",
        "https://fabrikops2.visualstudio.com/someorg/somerepo",
        "https://fabrikops2.visualstudio.com/",
        "someorg/somerepo",
        "",
        "master",
    ),
    (
        "http://github.com/someorg/somerepo/somedir",
        "https://github.com/someorg/somerepo",
        "https://github.com/",
        "someorg/somerepo",
        "somedir",
        "",
    ),
    (
        "git@github.com:someorg/somerepo/somedir",
        "git@github.com:someorg/somerepo",
        "git@github.com:",
        "someorg/somerepo",
        "somedir",
        "",
    ),
    (
        "http://github.com/someorg/somerepo.git/somedir",
        "https://github.com/someorg/somerepo.git",
        "https://github.com/",
        "someorg/somerepo.git",
        "somedir",
        "",
    ),
    (
        "git@github.com:someorg/somerepo.git/somedir",
        "git@github.com:someorg/somerepo.git",
        "git@github.com:",
        "someorg/somerepo.git",
        "somedir",
        "",
    ),
    (
        "git@gitlab2.sqtools.ru:infra/kubernetes/thanos-base.git?ref=v0.1.0",
        "git@gitlab2.sqtools.ru:infra/kubernetes/thanos-base.git",
        "git@gitlab2.sqtools.ru:",
        "infra/kubernetes/thanos-base.git",
        "",
        "v0.1.0",
    ),
    (
        "git@bitbucket.org:company/project.git//path?ref=branch",
        "git@bitbucket.org:company/project.git",
        "git@bitbucket.org:",
        "company/project.git",
        "path",
        "branch",
    ),
    (
        "git@bitbucket.org/company/project.git//path?ref=branch",
        "git@bitbucket.org/company/project.git",
        "git@bitbucket.org/",
        "company/project.git",
        "path",
        "branch",
    ),
    (
        "ssh://git@bitbucket.org/company/project.git//path?ref=branch",
        "ssh://git@bitbucket.org/company/project.git",
        "ssh://git@bitbucket.org/",
        "company/project.git",
        "path",
        "branch",
    ),
    (
        "https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/",
        "collection/project/_git/somerepos",
        "",
        "",
    ),
    (
        "https://itfs.mycompany.com/collection/project/_git/somerepos?version=v1.0.0",
        "https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/",
        "collection/project/_git/somerepos",
        "",
        "v1.0.0",
    ),
    (
        "https://itfs.mycompany.com/collection/project/_git/somerepos/somedir?version=v1.0.0",
        "https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/",
        "collection/project/_git/somerepos",
        "somedir",
        "v1.0.0",
    ),
    (
        "git::https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/collection/project/_git/somerepos",
        "https://itfs.mycompany.com/",
        "collection/project/_git/somerepos",
        "",
        "",
    ),
    (
        "https://bitbucket.example.com/scm/project/repository.git",
        "https://bitbucket.example.com/scm/project/repository.git",
        "https://bitbucket.example.com/",
        "scm/project/repository.git",
        "",
        "",
    ),
    (
        "ssh://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo/somepath",
        "ssh://git-codecommit.us-east-2.amazonaws.com/someorg/somerepo",
        "ssh://git-codecommit.us-east-2.amazonaws.com/",
        "someorg/somerepo",
        "somepath",
        "",
    ),
    (
        "git@github.com/someorg/somerepo/somepath",
        "git@github.com:someorg/somerepo",
        "git@github.com:",
        "someorg/somerepo",
        "somepath",
        "",
    ),
    (
        "https://github.com/kubernetes-sigs/kustomize//examples/multibases/dev/?ref=v1.0.6",
        "https://github.com/kubernetes-sigs/kustomize",
        "https://github.com/",
        "kubernetes-sigs/kustomize",
        "examples/multibases/dev/",
        "v1.0.6",
    ),
    (
        "file://a/b/c/someRepo.git/somepath?ref=someBranch",
        "file://a/b/c/someRepo.git",
        "file://",
        "a/b/c/someRepo.git",
        "somepath",
        "someBranch",
    ),
    (
        "file://a/b/c/someRepo//somepath?ref=someBranch",
        "file://a/b/c/someRepo",
        "file://",
        "a/b/c/someRepo",
        "somepath",
        "someBranch",
    ),
    (
        "file://a/b/c/someRepo?ref=someBranch",
        "file://a/b/c/someRepo",
        "file://",
        "a/b/c/someRepo",
        "",
        "someBranch",
    ),
    (
        "file:///a/b/c/someRepo?ref=someBranch",
        "file:///a/b/c/someRepo",
        "file://",
        "/a/b/c/someRepo",
        "",
        "someBranch",
    ),
    (
        "ssh://git@github.com/kubernetes-sigs/kustomize//examples/multibases/dev?ref=v1.0.6",
        "git@github.com:kubernetes-sigs/kustomize",
        "git@github.com:",
        "kubernetes-sigs/kustomize",
        "examples/multibases/dev",
        "v1.0.6",
    ),
    (
        "file:///a/b/c/someRepo",
        "file:///a/b/c/someRepo",
        "file://",
        "/a/b/c/someRepo",
        "",
        "",
    ),
    ("file:///", "file:///", "file://", "/", "", ""),
    (
        "https://example.org/path/to/repo//examples/multibases/dev",
        "https://example.org/path/to/repo",
        "https://example.org/",
        "path/to/repo",
        "examples/multibases/dev",
        "",
    ),
    (
        "https://example.org/path/to/repo.git/examples/multibases/dev",
        "https://example.org/path/to/repo.git",
        "https://example.org/",
        "path/to/repo.git",
        "examples/multibases/dev",
        "",
    ),
    (
        "ssh://alice@example.com/path/to/repo//examples/multibases/dev",
        "ssh://alice@example.com/path/to/repo",
        "ssh://alice@example.com/",
        "path/to/repo",
        "examples/multibases/dev",
        "",
    ),
    (
        "https://authority/org/repo?ref=group/version",
        "https://authority/org/repo",
        "https://authority/",
        "org/repo",
        "",
        "group/version",
    ),
    (
        "https://authority/org/repo/?ref=includes_git/for_some_reason",
        "https://authority/org/repo",
        "https://authority/",
        "org/repo",
        "",
        "includes_git/for_some_reason",
    ),
    (
        "https://authority/org/repo/?ref=includes.git/for_some_reason",
        "https://authority/org/repo",
        "https://authority/",
        "org/repo",
        "",
        "includes.git/for_some_reason",
    ),
    (
        "https://authority/org/repo/%-invalid-uri-so-not-parsable-by-net/url.Parse",
        "https://authority/org/repo",
        "https://authority/",
        "org/repo",
        "%-invalid-uri-so-not-parsable-by-net/url.Parse",
        "",
    ),
    (
        "ssh://myusername@bitbucket.org/ourteamname/ourrepositoryname.git//path?ref=branch",
        "ssh://myusername@bitbucket.org/ourteamname/ourrepositoryname.git",
        "ssh://myusername@bitbucket.org/",
        "ourteamname/ourrepositoryname.git",
        "path",
        "branch",
    ),
    (
        "file://git@home/path/to/repository.git//path?ref=branch",
        "file://git@home/path/to/repository.git",
        "file://",
        "git@home/path/to/repository.git",
        "path",
        "branch",
    ),
    (
        "http://git@home.com/path/to/repository.git//path?ref=branch",
        "http://git@home.com/path/to/repository.git",
        "http://git@home.com/",
        "path/to/repository.git",
        "path",
        "branch",
    ),
    (
        "https://git@home.com/path/to/repository.git//path?ref=branch",
        "https://git@home.com/path/to/repository.git",
        "https://git@home.com/",
        "path/to/repository.git",
        "path",
        "branch",
    ),
    (
        "ssh://git@ssh.github.com:443/YOUR-USERNAME/YOUR-REPOSITORY.git",
        "ssh://git@ssh.github.com:443/YOUR-USERNAME/YOUR-REPOSITORY.git",
        "ssh://git@ssh.github.com:443/",
        "YOUR-USERNAME/YOUR-REPOSITORY.git",
        "",
        "",
    ),
    (
        "git@gitlab.com/user:name/YOUR-REPOSITORY.git/path",
        "git@gitlab.com/user:name/YOUR-REPOSITORY.git",
        "git@gitlab.com/",
        "user:name/YOUR-REPOSITORY.git",
        "path",
        "",
    ),
    (
        "git@gitlab.com:gitlab-tests/sample-project.git",
        "git@gitlab.com:gitlab-tests/sample-project.git",
        "git@gitlab.com:",
        "gitlab-tests/sample-project.git",
        "",
        "",
    ),
    (
        "git@gitlab.com:gitlab-tests/sample-project",
        "git@gitlab.com:gitlab-tests/sample-project",
        "git@gitlab.com:",
        "gitlab-tests/sample-project",
        "",
        "",
    ),
    (
        "https://username@dev.azure.com/org/project/_git/repo//path/to/kustomization/root",
        "https://username@dev.azure.com/org/project/_git/repo",
        "https://username@dev.azure.com/",
        "org/project/_git/repo",
        "path/to/kustomization/root",
        "",
    ),
    (
        "https://org.visualstudio.com/project/_git/repo/path/to/kustomization/root",
        "https://org.visualstudio.com/project/_git/repo",
        "https://org.visualstudio.com/",
        "project/_git/repo",
        "path/to/kustomization/root",
        "",
    ),
    (
        "ssh://org-12345@github.com/kubernetes-sigs/kustomize",
        "org-12345@github.com:kubernetes-sigs/kustomize",
        "org-12345@github.com:",
        "kubernetes-sigs/kustomize",
        "",
        "",
    ),
    (
        "org-12345@github.com/kubernetes-sigs/kustomize",
        "org-12345@github.com:kubernetes-sigs/kustomize",
        "org-12345@github.com:",
        "kubernetes-sigs/kustomize",
        "",
        "",
    ),
    (
        "git@gist.github.com:bc7947cb727d7f9217e7862d961a1ffd.git",
        "git@gist.github.com:bc7947cb727d7f9217e7862d961a1ffd.git",
        "git@gist.github.com:",
        "bc7947cb727d7f9217e7862d961a1ffd.git",
        "",
        "",
    ),
    (
        "https://gist.github.com/bc7947cb727d7f9217e7862d961a1ffd.git",
        "https://gist.github.com/bc7947cb727d7f9217e7862d961a1ffd.git",
        "https://gist.github.com/",
        "bc7947cb727d7f9217e7862d961a1ffd.git",
        "",
        "",
    ),
    // A `///` root is still inside the repository (one leading slash is dropped, the
    // rest is relative to the clone).
    (
        "https://example.org/org/repo////etc",
        "https://example.org/org/repo",
        "https://example.org/",
        "org/repo",
        "/etc",
        "",
    ),
    // `.git` is found anywhere, `.github` included.
    (
        "https://example.org/org/.github/x",
        "https://example.org/org/.git",
        "https://example.org/",
        "org/.git",
        "hub/x",
        "",
    ),
];

#[test]
fn urls_split_into_clone_url_ref_and_path_as_kustomize_splits_them() {
    for &(url, clone_url, host, repo_path, inside, git_ref) in PARSED {
        let parsed = spec(url);
        assert_eq!(parsed.clone_url(), clone_url, "{url}");
        assert_eq!(parsed.host, host, "{url}");
        assert_eq!(parsed.repo_path, repo_path, "{url}");
        assert_eq!(parsed.kust_root_path, inside, "{url}");
        assert_eq!(parsed.git_ref, git_ref, "{url}");
        assert!(parsed.submodules, "{url}");
        assert_eq!(parsed.timeout, DEFAULT_TIMEOUT, "{url}");
    }
}

#[test]
fn query_parameters_set_ref_timeout_and_submodules_with_go_defaults() {
    let secs = Duration::from_secs;
    // (query, ref, timeout, submodules)
    let cases = [
        ("", "", secs(27), true),
        ("ref=v1.0.0", "v1.0.0", secs(27), true),
        ("ref=kustomize/v4.5.7", "kustomize/v4.5.7", secs(27), true),
        ("ref=kustomize%2Fv4.5.7", "kustomize/v4.5.7", secs(27), true),
        ("version=master", "master", secs(27), true),
        ("version=master&ref=v1.0.0", "v1.0.0", secs(27), true),
        ("ref=&version=master", "master", secs(27), true),
        ("version=master&submodules=", "master", secs(27), true),
        ("version=master&submodules=maybe", "master", secs(27), true),
        ("version=master&submodules=true", "master", secs(27), true),
        ("version=master&submodules=false", "master", secs(27), false),
        ("submodules=0", "", secs(27), false),
        ("submodules=F", "", secs(27), false),
        ("version=master&timeout=", "master", secs(27), true),
        ("version=master&timeout=jiffy", "master", secs(27), true),
        ("version=master&timeout=0", "master", secs(27), true),
        ("version=master&timeout=0s", "master", secs(27), true),
        ("version=master&timeout=-5", "master", secs(27), true),
        ("version=master&timeout=-5s", "master", secs(27), true),
        ("version=master&timeout=61", "master", secs(61), true),
        ("version=master&timeout=1m1s", "master", secs(61), true),
        ("timeout=1.5s", "", Duration::from_millis(1500), true),
        ("timeout=300ms", "", Duration::from_millis(300), true),
        (
            "version=master&submodules=false&timeout=1m1s",
            "master",
            secs(61),
            false,
        ),
        // The first value of a repeated key counts.
        ("ref=a&ref=b", "a", secs(27), true),
        // A query Go cannot parse gives every default, the ref included.
        ("ref=v1;x", "", secs(27), true),
        ("ref=v1&timeout=%zz", "", secs(27), true),
        ("ref=a+b", "a b", secs(27), true),
    ];
    for (query, git_ref, timeout, submodules) in cases {
        let url = format!("https://github.com/org/repo?{query}");
        let parsed = spec(&url);
        assert_eq!(parsed.git_ref, git_ref, "{query}");
        assert_eq!(parsed.timeout, timeout, "{query}");
        assert_eq!(parsed.submodules, submodules, "{query}");
    }
}

#[test]
fn origin_paths_keep_kustomizes_placeholder_for_the_repository_root() {
    for (url, path) in [
        ("https://github.com/org/repo", "notCloned"),
        ("https://github.com/org/repo//", "notCloned"),
        ("https://github.com/org/repo//dev", "dev"),
        (
            "https://github.com/kubernetes-sigs/kustomize//examples/multibases/dev/",
            "examples/multibases/dev",
        ),
        (
            "github.com/kubernetes-sigs/kustomize/examples/multibases/dev/",
            "examples/multibases/dev",
        ),
        ("file:///srv/repo//a/../b", "b"),
        ("http://127.0.0.1:18765/org/repo/v1/pod.yaml", "v1/pod.yaml"),
    ] {
        assert_eq!(spec(url).origin_path(), path, "{url}");
    }
}

#[test]
fn only_http_and_https_urls_are_remote_files() {
    for name in [
        "https://example.com/a.yaml",
        "HTTP://example.com/a.yaml",
        "http://127.0.0.1:8080/x?y=z",
        "https:opaque",
    ] {
        assert!(is_remote_file(name), "{name}");
    }
    for name in [
        "a.yaml",
        "github.com/org/repo",
        "git::https://example.com/org/repo",
        "ssh://git@example.com/org/repo",
        "file:///etc/passwd",
        "git@github.com:org/repo",
        "https://example.com/%zz",
        "https://example.com/a\nb",
    ] {
        assert!(!is_remote_file(name), "{name}");
    }
}

#[test]
fn go_paths_clean_and_join_as_go_does() {
    for (path, cleaned) in [
        ("", "."),
        ("a/b/../c", "a/c"),
        ("../x", "../x"),
        ("a/../..", ".."),
        ("/..", "/"),
        ("//a//b/", "/a/b"),
        ("http://h/x", "http:/h/x"),
    ] {
        assert_eq!(go_clean(path), cleaned, "{path}");
    }
    assert_eq!(go_join("", ""), "");
    assert_eq!(go_join("", "a/./b"), "a/b");
    assert_eq!(go_join("dev", "../base/pod.yaml"), "base/pod.yaml");
    assert_eq!(go_join("notCloned", ""), "notCloned");
}

#[test]
fn passwords_in_urls_are_redacted_for_messages() {
    for (url, shown) in [
        (
            "https://user:token@example.com/org/repo//dir?ref=v1",
            "https://user:xxxxx@example.com/org/repo//dir?ref=v1",
        ),
        (
            "https://u:p@ss@example.com/a.yaml",
            "https://u:xxxxx@example.com/a.yaml",
        ),
        (
            "https://user@example.com/org/repo",
            "https://user@example.com/org/repo",
        ),
        ("git@github.com:org/repo", "git@github.com:org/repo"),
        ("https://example.com/a:b@c", "https://example.com/a:b@c"),
        ("https://é:é@é", "https://é:xxxxx@é"),
        ("base/../x", "base/../x"),
    ] {
        assert_eq!(redact_url(url), shown, "{url}");
    }
}

#[test]
fn errors_read_as_sentences() {
    assert_eq!(
        RemoteError::Http { status: 404 }.to_string(),
        "HTTP Error: status code 404 (Not Found)"
    );
    let timeout = RemoteError::Timeout {
        operation: "git fetch https://github.com/org/repo".into(),
        after: DEFAULT_TIMEOUT,
    };
    assert_eq!(
        timeout.to_string(),
        "git fetch https://github.com/org/repo timed out after 27s"
    );
}

#[test]
fn parsing_never_panics_on_odd_input() {
    for url in [
        "git::",
        "GIT::",
        "ssh://",
        "a@",
        "a@:",
        "a@b",
        "github.com:",
        "g\u{130}thub.com/org/repo",
        "\u{212a}@github.com:x/y",
        "file://",
        "https://h/_git/",
        "https://h/x//",
        "https://h/x.git",
        "?",
        "??ref=%",
        "é@é:é/é",
        "https://h/é/é?timeout=1\u{b5}",
    ] {
        let _ = RepoSpec::parse(url).map(|s| (s.clone_url(), s.origin_path()));
        let _ = is_remote_file(url);
    }
    assert_eq!(
        spec("g\u{130}thub.com/org/repo").host,
        "https://github.com/"
    );
}
