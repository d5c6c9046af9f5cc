//! Hostile inputs shared by the offline and end-to-end tests: each one is small on disk and
//! expands to more than a GiB if nothing bounds it, or recurses without end; and the file
//! helpers that lay them out.

use std::path::Path;

/// Writes `text` to `path`, creating its parent directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Creates a named pipe at `path` (no writer ever opens it: reading it would block).
pub fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A kustomization file (`kind: Kustomization`) with `body` after its header.
pub fn kustomization(body: &str) -> String {
    format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{body}")
}

/// A ConfigMap named `bomb` whose `data.list` is a 1 MiB anchored string aliased 1500 times
/// (1.5 GiB expanded; a few thousand nodes).
pub fn alias_bomb() -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\nanchor: &a \"{}\"\ndata:\n  list: [",
        "x".repeat(1 << 20)
    );
    text.push_str(&vec!["*a"; 1500].join(", "));
    text.push_str("]\n");
    text
}

/// A ConfigMap named `tree` whose data is a 4^12 alias tree over 10 KB leaves (160 GB
/// expanded; a few hundred nodes).
pub fn alias_tree() -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tree\nl0: &l0 \"{}\"\n",
        "y".repeat(10_000)
    );
    for level in 1..=12 {
        let below = level - 1;
        text.push_str(&format!(
            "l{level}: &l{level} [*l{below}, *l{below}, *l{below}, *l{below}]\n"
        ));
    }
    text.push_str("data:\n  tree: *l12\n");
    text
}

/// A ConfigMap named `grow` and a kustomization whose JSON 6902 patch copies `/data` into
/// itself 40 times (2^40 times the data). Returns (kustomization, ConfigMap).
pub fn self_copy_patch() -> (String, String) {
    let ops: String = (0..40)
        .map(|i| format!("    - {{op: copy, from: /data, path: /data/copy{i}}}\n"))
        .collect();
    let kustomization = kustomization(&format!(
        "resources: [cm.yaml]\npatches:\n- target: {{kind: ConfigMap, name: grow}}\n  patch: |\n{ops}"
    ));
    let config_map =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grow\ndata:\n  a: \"0123456789\"\n";
    (kustomization, config_map.to_string())
}

/// The value of the variable `big` that [`substitution_bomb`] references: 512 KiB.
pub fn big_variable() -> String {
    "s".repeat(512 << 10)
}

/// A ConfigMap named `subst` (in `namespace`) that references `${big}` 2000 times (1 GiB
/// with [`big_variable`]).
pub fn substitution_bomb(namespace: &str) -> String {
    let refs: Vec<String> = (0..2000).map(|i| format!("  k{i}: \"${{big}}\"")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: subst\n  namespace: {namespace}\ndata:\n{}\n",
        refs.join("\n")
    )
}

/// A ConfigMap named `deep` whose `data.x` is nested 100 000 flow sequences deep.
pub fn deep_nesting() -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    )
}
