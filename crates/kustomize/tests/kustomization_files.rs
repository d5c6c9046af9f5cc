//! How kustomization files are read and followed, as `kustomize build` does: empty files and
//! entries naming an ancestor directory are refused.

use std::path::Path;

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

fn build_error(root: &Path, dir: &str) -> String {
    match kustomize::build(root, &root.join(dir), &kustomize::BuildOptions::default()) {
        Ok(objects) => panic!("{dir} built {} objects", objects.len()),
        Err(e) => e.to_string(),
    }
}

fn tempdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";

#[test]
fn a_kustomization_of_only_api_version_and_kind_is_empty() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[
            (
                "kind/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
            ),
            ("top/kustomization.yaml", "resources: [base]\n"),
            ("top/base/kustomization.yml", "kind: Kustomization\n"),
        ],
    );
    let err = build_error(&root, "kind");
    assert!(
        err.starts_with("kind/kustomization.yaml: kustomization is empty"),
        "{err}"
    );
    let err = build_error(&root, "top");
    assert!(
        err.contains("top/base/kustomization.yml: kustomization is empty"),
        "{err}"
    );
}

#[test]
fn only_the_first_document_of_a_kustomization_file_is_read() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[
            (
                "app/kustomization.yaml",
                "resources: [cm.yaml]\n---\nnot: [a, kustomization\n",
            ),
            ("app/cm.yaml", CONFIG_MAP),
        ],
    );
    let built = kustomize::build(
        &root,
        &root.join("app"),
        &kustomize::BuildOptions::default(),
    )
    .unwrap();
    assert_eq!(built.len(), 1);
}

#[test]
fn an_entry_naming_an_ancestor_is_a_cycle_named_at_the_innermost_kustomization() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[
            ("a/kustomization.yaml", "resources: [cm.yaml, sub]\n"),
            ("a/cm.yaml", CONFIG_MAP),
            ("a/sub/kustomization.yaml", "resources: [..]\n"),
            ("b/kustomization.yaml", "resources: [x]\n"),
            ("b/x/kustomization.yaml", "resources: [../..]\n"),
            ("d/kustomization.yaml", "resources: [overlay]\n"),
            ("d/overlay/kustomization.yaml", "resources: [../base]\n"),
            ("d/base/kustomization.yaml", "components: [..]\n"),
        ],
    );
    for (dir, message) in [
        (
            "a/sub",
            "cycle detected: a/sub -> a (candidate root 'a' contains visited root 'a/sub')",
        ),
        (
            "a",
            "cycle detected: a -> a/sub -> a (candidate root 'a' contains visited root 'a/sub')",
        ),
        (
            "b",
            "cycle detected: b -> b/x -> . (candidate root '.' contains visited root 'b/x')",
        ),
        (
            "d",
            "cycle detected: d -> d/overlay -> d/base -> d (candidate root 'd' contains \
             visited root 'd/base')",
        ),
    ] {
        let err = build_error(&root, dir);
        assert!(err.contains(message), "{dir}: {err}");
    }
}

fn build_yaml(root: &Path, dir: &str) -> String {
    match kustomize::build(root, &root.join(dir), &kustomize::BuildOptions::default()) {
        Ok(objects) => goyaml::mappings_to_yaml_stream(objects.iter()),
        Err(e) => panic!("{dir}: {e}"),
    }
}

#[test]
fn inline_plugin_configurations_run_before_those_read_from_files() {
    let (_keep, root) = tempdir();
    let prefix = |name: &str, prefix: &str| {
        format!(
            "apiVersion: builtin\nkind: PrefixSuffixTransformer\nmetadata:\n  name: {name}\n\
             prefix: {prefix}\nfieldSpecs: [{{path: metadata/name}}]\n"
        )
    };
    let kustomization = format!(
        "resources: [cm.yaml]\ntransformers:\n- file.yaml\n- |-\n{}",
        prefix("inline", "inline-")
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    );
    write(
        &root,
        &[
            ("app/kustomization.yaml", &kustomization),
            ("app/file.yaml", &prefix("file", "file-")),
            ("app/cm.yaml", CONFIG_MAP),
        ],
    );
    // kustomize v5.8 runs the inline entry first, whatever the order of the list.
    assert_eq!(
        build_yaml(&root, "app"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: file-inline-a\n"
    );
}

#[cfg(unix)]
#[test]
fn origins_name_directories_as_the_entries_do_not_as_symlinks_resolve() {
    let (_keep, root) = tempdir();
    write(
        &root,
        &[
            (
                "app/kustomization.yaml",
                "resources: [linked, ./other/../other/]\nbuildMetadata: [originAnnotations]\n",
            ),
            (
                "app/real/kustomization.yaml",
                "resources: [cm.yaml]\nnamePrefix: p-\n",
            ),
            ("app/real/cm.yaml", CONFIG_MAP),
            ("app/other/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("app/other/cm.yaml", CONFIG_MAP),
        ],
    );
    std::os::unix::fs::symlink("real", root.join("app/linked")).expect("symlink");
    let yaml = build_yaml(&root, "app");
    let origins: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("path: "))
        .collect();
    assert_eq!(origins, ["linked/cm.yaml", "other/cm.yaml"], "{yaml}");
}
