//! Checkouts of repositories on this machine (`file://` URLs and paths), compared with what
//! `git archive` writes for the same commit.

mod support;

use std::path::PathBuf;

use gitfetch::{GitError, checkout};
use support::{Node, Repos, assert_checkouts, dest, options, options_with_submodules, snapshot};

#[test]
fn head_branch_tags_and_commits_match_git_archive() {
    let repos = Repos::new();
    let url = repos.file_url("repo");
    let mut cases = repos.common_ref_cases();
    cases.extend([
        ("HEAD", repos.main.clone(), Some("HEAD")),
        (
            "refs/heads/feature",
            repos.feature.clone(),
            Some("refs/heads/feature"),
        ),
        (
            "heads/feature",
            repos.feature.clone(),
            Some("refs/heads/feature"),
        ),
        // A commit that is at no branch head, abbreviated.
        (&repos.first[..7], repos.first.clone(), None),
        (&repos.first[..4], repos.first.clone(), None),
    ]);
    assert_checkouts(&repos, &url, &cases);
}

#[test]
fn a_plain_path_works_like_a_file_url() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    let path = repos.path("repo");
    let done = checkout(path.to_str().expect("utf-8"), "v1", &dest, &options()).expect("checkout");
    assert_eq!(done.commit, repos.first);
    assert_eq!(snapshot(&dest), repos.archive("repo", "v1"));
}

#[test]
fn executable_bits_and_symlinks_are_kept() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    checkout(&repos.file_url("repo"), "main", &dest, &options()).expect("checkout");
    let tree = snapshot(&dest);
    assert!(matches!(
        tree.get("run.sh"),
        Some(Node::File {
            executable: true,
            ..
        })
    ));
    assert!(matches!(
        tree.get("README.md"),
        Some(Node::File {
            executable: false,
            ..
        })
    ));
    assert_eq!(
        tree.get("link"),
        Some(&Node::Link(PathBuf::from("dir/a.txt")))
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("link")).expect("read through link"),
        "a\n"
    );
}

#[test]
fn the_byte_limit_is_enforced_and_named() {
    let repos = Repos::new();
    let url = repos.file_url("repo");
    let (_tmp, first) = dest();
    let total = checkout(&url, "main", &first, &options())
        .expect("checkout")
        .bytes;
    assert!(total > 0);

    let (_tmp, exact) = dest();
    let mut opts = options();
    opts.max_bytes = total;
    assert_eq!(
        checkout(&url, "main", &exact, &opts)
            .expect("at the limit")
            .bytes,
        total
    );

    let (_tmp, over) = dest();
    opts.max_bytes = total - 1;
    let err = checkout(&url, "main", &over, &opts).expect_err("over the limit");
    assert!(
        matches!(err, GitError::TooLarge { limit, .. } if limit == total - 1),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("limit of {} bytes", total - 1)),
        "{text}"
    );
    assert!(text.contains(&url) && text.contains("\"main\""), "{text}");
}

#[test]
fn a_missing_ref_is_named() {
    let repos = Repos::new();
    let url = repos.file_url("repo");
    for git_ref in [
        "nope",
        "deadbeef",
        "0123456789abcdef0123456789abcdef01234567",
    ] {
        let (_tmp, dest) = dest();
        let err = checkout(&url, git_ref, &dest, &options()).expect_err("missing ref");
        assert!(matches!(err, GitError::RefNotFound { .. }), "{err}");
        let text = err.to_string();
        assert_eq!(text, format!("{git_ref:?} was not found in {url}"));
    }
}

#[test]
fn a_ref_git_would_refuse_is_refused() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    let err = checkout(&repos.file_url("repo"), "a..b", &dest, &options()).expect_err("bad ref");
    assert!(matches!(err, GitError::InvalidRef { .. }), "{err}");
}

#[test]
fn a_tree_id_is_not_a_commit() {
    let repos = Repos::new();
    let tree = support::git(&repos.path("repo"), &["rev-parse", "main^{tree}"]);
    let (_tmp, dest) = dest();
    let err = checkout(&repos.file_url("repo"), &tree, &dest, &options()).expect_err("a tree");
    assert!(matches!(err, GitError::NotACommit { .. }), "{err}");
}

#[test]
fn a_missing_repository_is_an_error_naming_it() {
    let repos = Repos::new();
    let url = repos.file_url("absent");
    let (_tmp, dest) = dest();
    let err = checkout(&url, "", &dest, &options()).expect_err("no repository");
    assert!(matches!(err, GitError::Repository { .. }), "{err}");
    assert!(err.to_string().contains(&url), "{err}");
}

#[test]
fn a_destination_with_files_is_refused() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    std::fs::create_dir_all(&dest).expect("mkdir");
    std::fs::write(dest.join("x"), "x").expect("write");
    let err = checkout(&repos.file_url("repo"), "", &dest, &options()).expect_err("not empty");
    assert!(matches!(err, GitError::DestinationNotEmpty { .. }), "{err}");
}

#[test]
fn an_existing_empty_destination_is_used() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    std::fs::create_dir_all(&dest).expect("mkdir");
    checkout(&repos.file_url("repo"), "", &dest, &options()).expect("checkout");
    assert_eq!(snapshot(&dest), repos.archive("repo", "main"));
}

#[test]
fn submodules_are_checked_out_recursively_when_asked() {
    let repos = Repos::new();
    let url = repos.file_url("nested");
    let mut opts = options();
    opts.submodules = true;
    let (_tmp, dest) = dest();
    let done = checkout(&url, "", &dest, &opts).expect("checkout");
    assert_eq!(
        std::fs::read_to_string(dest.join("inner/modules/sub/sub.txt")).expect("nested file"),
        "in the submodule\n"
    );
    assert_eq!(
        std::fs::read_to_string(dest.join("inner/top.txt")).expect("top"),
        "top\n"
    );
    let paths: Vec<_> = done.submodules.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["inner", "inner/modules/sub"]);
    let sub_commit = support::git(&repos.path("sub"), &["rev-parse", "HEAD"]);
    assert_eq!(done.submodules[1].commit, sub_commit);
    assert_eq!(done.submodules[1].url, repos.file_url("sub"));
    assert!(!dest.join("inner/.git").exists());
    // The bytes of the submodules count.
    let (_tmp2, small) = support::dest();
    opts.max_bytes = done.bytes - 1;
    let err = checkout(&url, "", &small, &opts).expect_err("over the limit");
    assert!(
        err.to_string()
            .contains(&format!("limit of {} bytes", done.bytes - 1)),
        "{err}"
    );
}

#[test]
fn without_submodules_their_directories_are_left_empty() {
    let repos = Repos::new();
    let (_tmp, dest) = dest();
    let done = checkout(&repos.file_url("super"), "", &dest, &options()).expect("checkout");
    assert!(done.submodules.is_empty());
    let tree = snapshot(&dest);
    assert_eq!(tree.get("modules/sub"), Some(&Node::Dir));
    assert!(!tree.keys().any(|k| k.starts_with("modules/sub/")));
    assert_eq!(tree, repos.archive("super", "HEAD"));
}

#[test]
fn a_submodule_without_a_url_is_an_error() {
    let repos = Repos::new();
    repos.change_gitmodules(&["--unset", "submodule.modules/sub.url"], "no url");
    let (_tmp, dest) = dest();
    let err = checkout(
        &repos.file_url("super"),
        "",
        &dest,
        &options_with_submodules(),
    )
    .expect_err("no url");
    assert!(matches!(err, GitError::SubmoduleConfig { .. }), "{err}");
    assert!(err.to_string().contains("\"modules/sub\""), "{err}");
}

#[test]
fn a_submodule_with_update_none_is_left_empty() {
    let repos = Repos::new();
    repos.change_gitmodules(&["submodule.modules/sub.update", "none"], "update none");
    let (_tmp, dest) = dest();
    let done = checkout(
        &repos.file_url("super"),
        "",
        &dest,
        &options_with_submodules(),
    )
    .expect("checkout");
    assert!(done.submodules.is_empty());
    assert_eq!(snapshot(&dest).get("modules/sub"), Some(&Node::Dir));
    assert!(!dest.join("modules/sub/sub.txt").exists());
}

#[test]
fn submodules_nest_at_most_max_submodule_depth_levels() {
    let root = tempfile::tempdir().expect("temp dir");
    let levels = gitfetch::MAX_SUBMODULE_DEPTH + 1;
    for i in 0..=levels {
        let repo = root.path().join(format!("r{i}"));
        std::fs::create_dir(&repo).expect("mkdir");
        support::git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("level.txt"), format!("{i}\n")).expect("write");
        if i > 0 {
            let out = support::git_command(&repo)
                .args(["-c", "protocol.file.allow=always", "submodule", "add", "-q"])
                .arg(format!("../r{}", i - 1))
                .arg("next")
                .output()
                .expect("git submodule add");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        support::git(&repo, &["add", "-A"]);
        support::git(&repo, &["commit", "-q", "-m", "level"]);
    }
    let mut opts = options();
    opts.submodules = true;
    // MAX_SUBMODULE_DEPTH levels of submodules below the top are followed ...
    let (_tmp, dest) = dest();
    let top = root.path().join(format!("r{}", levels - 1));
    let done = checkout(top.to_str().expect("utf-8"), "", &dest, &opts).expect("checkout");
    assert_eq!(done.submodules.len(), gitfetch::MAX_SUBMODULE_DEPTH);
    let deepest = "next/".repeat(gitfetch::MAX_SUBMODULE_DEPTH) + "level.txt";
    assert_eq!(
        std::fs::read_to_string(dest.join(deepest)).expect("deepest"),
        "0\n"
    );
    // ... and one more is refused.
    let (_tmp, dest) = support::dest();
    let top = root.path().join(format!("r{levels}"));
    let err = checkout(top.to_str().expect("utf-8"), "", &dest, &opts).expect_err("too deep");
    let mut inner = &err;
    while let GitError::Submodule { inner: next, .. } = inner {
        inner = next;
    }
    assert!(matches!(inner, GitError::SubmoduleDepth { .. }), "{err}");
}
