//! Test infrastructure: repositories made with the `git` program, snapshots of directory
//! trees, and small HTTP servers. None of it is used by the crate itself.

#![allow(dead_code)]

pub mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Options with a generous timeout and limit, submodules off.
pub fn options() -> gitfetch::FetchOptions {
    gitfetch::FetchOptions {
        timeout: Duration::from_secs(60),
        max_bytes: 64 << 20,
        submodules: false,
    }
}

/// [`options`] with submodules on.
pub fn options_with_submodules() -> gitfetch::FetchOptions {
    gitfetch::FetchOptions {
        submodules: true,
        ..options()
    }
}

/// A ref to check out, the commit it must give and the reference the checkout must report.
pub type RefCase<'a> = (&'a str, String, Option<&'static str>);

/// Checks out each case from `url` (a copy of `repo`) into a fresh directory: the commit, the
/// reference and the files (those `git archive` writes) must be the case's, and no `.git` is
/// left. A failure names the ref.
pub fn assert_checkouts(repos: &Repos, url: &str, cases: &[RefCase]) {
    for (git_ref, commit, reference) in cases {
        let (_tmp, dest) = dest();
        let done = gitfetch::checkout(url, git_ref, &dest, &options())
            .unwrap_or_else(|e| panic!("checkout of {git_ref:?}: {e}"));
        assert_eq!(&done.commit, commit, "commit of {git_ref:?}");
        assert_eq!(done.reference.as_deref(), *reference, "ref of {git_ref:?}");
        assert_eq!(
            snapshot(&dest),
            repos.archive("repo", commit),
            "files of {git_ref:?}"
        );
        assert!(!dest.join(".git").exists(), ".git left by {git_ref:?}");
    }
}

/// A `git` command isolated from the machine's configuration, with fixed identities and
/// dates so that commit ids are the same on every run.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .env("GIT_AUTHOR_DATE", "2024-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2024-01-01T00:00:00Z");
    cmd
}

/// Runs `git args` in `dir` and returns its trimmed standard output; panics on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create dir");
    }
    std::fs::write(path, text).expect("write file");
}

/// Repositories made for the tests, under one temporary directory.
pub struct Repos {
    pub root: tempfile::TempDir,
    /// The commit of `main` at its first commit: not the head of any branch, tagged `v1`
    /// (annotated) and `light` (lightweight).
    pub first: String,
    /// The head of `main`.
    pub main: String,
    /// The head of `feature`, branched from `first`.
    pub feature: String,
}

impl Repos {
    /// `repo`: a work tree with `main` (two commits), `feature`, tags `v1` and `light`,
    /// a branch and a tag both named `both` (the branch at `main`, the tag at `feature`),
    /// an executable file and a symlink. `sub`: a small repository. `super`: a repository
    /// holding `sub` as the submodule `modules/sub` through the relative URL `../sub`, and
    /// `nested` holding `super` as a submodule in turn (`../super`).
    pub fn new() -> Repos {
        let root = tempfile::tempdir().expect("temp dir");
        let repo = root.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir repo");
        git(&repo, &["init", "-q", "-b", "main"]);
        write(&repo.join("README.md"), "first\n");
        write(&repo.join("dir/a.txt"), "a\n");
        write(&repo.join("dir/deeper/b.txt"), "b\n");
        write(&repo.join("run.sh"), "#!/bin/sh\necho hi\n");
        set_executable(&repo.join("run.sh"));
        std::os::unix::fs::symlink("dir/a.txt", repo.join("link")).expect("symlink");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "first"]);
        let first = git(&repo, &["rev-parse", "HEAD"]);
        git(&repo, &["tag", "-a", "v1", "-m", "version 1"]);
        git(&repo, &["tag", "light"]);
        git(&repo, &["checkout", "-q", "-b", "feature"]);
        write(&repo.join("feature.txt"), "feature\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "feature"]);
        let feature = git(&repo, &["rev-parse", "HEAD"]);
        git(&repo, &["tag", "both"]);
        git(&repo, &["checkout", "-q", "main"]);
        write(&repo.join("README.md"), "second\n");
        write(&repo.join("c.txt"), "c\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "second"]);
        let main = git(&repo, &["rev-parse", "HEAD"]);
        git(&repo, &["branch", "both"]);

        let sub = root.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir sub");
        git(&sub, &["init", "-q", "-b", "main"]);
        write(&sub.join("sub.txt"), "in the submodule\n");
        git(&sub, &["add", "-A"]);
        git(&sub, &["commit", "-q", "-m", "sub"]);

        let sup = root.path().join("super");
        std::fs::create_dir(&sup).expect("mkdir super");
        git(&sup, &["init", "-q", "-b", "main"]);
        write(&sup.join("top.txt"), "top\n");
        add_submodule(&sup, "../sub", "modules/sub");
        git(&sup, &["add", "-A"]);
        git(&sup, &["commit", "-q", "-m", "super"]);

        let nested = root.path().join("nested");
        std::fs::create_dir(&nested).expect("mkdir nested");
        git(&nested, &["init", "-q", "-b", "main"]);
        write(&nested.join("outer.txt"), "outer\n");
        add_submodule(&nested, "../super", "inner");
        git(&nested, &["add", "-A"]);
        git(&nested, &["commit", "-q", "-m", "nested"]);

        Repos {
            root,
            first,
            main,
            feature,
        }
    }

    /// The refs of `repo` every transport resolves alike: HEAD, branches, both kinds of tag, a
    /// tag and a branch of one name, a commit that is at no branch head.
    pub fn common_ref_cases(&self) -> Vec<RefCase<'_>> {
        vec![
            ("", self.main.clone(), Some("HEAD")),
            ("main", self.main.clone(), Some("refs/heads/main")),
            ("feature", self.feature.clone(), Some("refs/heads/feature")),
            ("v1", self.first.clone(), Some("refs/tags/v1")),
            ("light", self.first.clone(), Some("refs/tags/light")),
            // A tag wins over a branch of the same name, as with `git fetch`.
            ("both", self.feature.clone(), Some("refs/tags/both")),
            (
                "refs/heads/both",
                self.main.clone(),
                Some("refs/heads/both"),
            ),
            (self.first.as_str(), self.first.clone(), None),
        ]
    }

    /// `super` with `git config -f .gitmodules <config>` committed (as `message`).
    pub fn change_gitmodules(&self, config: &[&str], message: &str) {
        let sup = self.path("super");
        let mut args = vec!["config", "-f", ".gitmodules"];
        args.extend_from_slice(config);
        git(&sup, &args);
        git(&sup, &["commit", "-q", "-am", message]);
    }

    /// The path of the repository `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// The `file://` URL of the repository `name`.
    pub fn file_url(&self, name: &str) -> String {
        format!("file://{}", self.path(name).display())
    }

    /// The files of `rev` of the repository `name`, as `git archive` writes them.
    pub fn archive(&self, name: &str, rev: &str) -> Tree {
        let out = tempfile::tempdir().expect("temp dir");
        let archive = git_command(&self.path(name))
            .args(["archive", "--format=tar", rev])
            .output()
            .expect("git archive");
        assert!(archive.status.success(), "git archive {rev}");
        let mut tar = Command::new("tar")
            .args(["-x", "-C"])
            .arg(out.path())
            .stdin(Stdio::piped())
            .spawn()
            .expect("tar");
        {
            use std::io::Write;
            let mut stdin = tar.stdin.take().expect("tar stdin");
            stdin.write_all(&archive.stdout).expect("feed tar");
        }
        assert!(tar.wait().expect("tar").success());
        snapshot(out.path())
    }
}

fn add_submodule(repo: &Path, url: &str, path: &str) {
    let out = git_command(repo)
        .args([
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            url,
            path,
        ])
        .output()
        .expect("git submodule add");
    assert!(
        out.status.success(),
        "git submodule add: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).expect("stat").permissions();
    perms.set_mode(0o755);
    std::fs::set_permissions(path, perms).expect("chmod");
}

/// One path of a directory tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { executable: bool, content: Vec<u8> },
    Link(PathBuf),
}

/// A directory tree: relative paths to what is there.
pub type Tree = BTreeMap<String, Node>;

/// Everything under `dir`, symlinks not followed.
pub fn snapshot(dir: &Path) -> Tree {
    use std::os::unix::fs::PermissionsExt;
    let mut tree = Tree::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("read dir") {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .expect("under dir")
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&path).expect("readlink"))
            } else if meta.is_dir() {
                pending.push(path.clone());
                Node::Dir
            } else {
                Node::File {
                    executable: meta.permissions().mode() & 0o111 != 0,
                    content: std::fs::read(&path).expect("read"),
                }
            };
            tree.insert(rel, node);
        }
    }
    tree
}

/// A fresh, missing destination directory under a new temporary directory.
pub fn dest() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let dest = dir.path().join("checkout");
    (dir, dest)
}
