use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::kustfile::Kustomization;
use crate::loader::LoadRestrictions;
use crate::resource::ResMap;

/// A temporary tree of files and a loader rooted at it.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    loader: Loader,
}

fn tree(files: &[(&str, &[u8])]) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (path, content) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let loader = Loader::new(&root, LoadRestrictions::RootOnly).unwrap();
    Tree {
        _dir: dir,
        root,
        loader,
    }
}

/// Runs the configMapGenerator and secretGenerator entries of `kustomization` (in `dir`)
/// into `resmap`, as one kustomization level does.
fn run(tree: &Tree, dir: &str, kustomization: &str, resmap: &mut ResMap) {
    let k = Kustomization::parse(kustomization, "kustomization.yaml").unwrap();
    let dir = tree.root.join(dir);
    let defaults = k.generator_options.as_ref();
    for args in &k.config_map_generator {
        let res = generate_config_map(args, defaults, &tree.loader, &dir).unwrap();
        add_generated(resmap, res).unwrap();
    }
    for args in &k.secret_generator {
        let res = generate_secret(args, defaults, &tree.loader, &dir).unwrap();
        add_generated(resmap, res).unwrap();
    }
}

fn names(resmap: &ResMap) -> Vec<String> {
    resmap.iter().map(|r| r.name().to_string()).collect()
}

/// The names once the hash suffixes are applied.
fn hashed_names(resmap: &mut ResMap) -> Vec<String> {
    apply_hash_suffixes(resmap).unwrap();
    names(resmap)
}

fn obj(value: serde_json::Value) -> Object {
    match value {
        Value::Object(map) => map,
        _ => panic!("not a map"),
    }
}

fn gen_args(yaml: &str) -> GeneratorArgs {
    let value = goyaml::parse_documents(yaml).unwrap().remove(0);
    serde_json::from_value(value).unwrap()
}

#[test]
fn secret_generator_reads_envs_literals_and_files() {
    // TestSecretGenerator.
    let t = tree(&[
        ("foo.env", b"\nMOUNTAIN=everest\nOCEAN=pacific\n"),
        ("phrase.dat", b"dat phrase"),
    ]);
    let mut resmap = ResMap::new();
    run(
        &t,
        ".",
        "secretGenerator:\n- name: bob\n  literals: [FRUIT=apple, VEGETABLE=carrot]\n  \
         files: [foo.env, passphrase=phrase.dat]\n  envs: [foo.env]\n",
        &mut resmap,
    );
    let secret = &resmap.as_slice()[0];
    assert_eq!(
        secret.obj,
        obj(json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bob"}, "type": "Opaque",
            "data": {
                "FRUIT": "YXBwbGU=", "MOUNTAIN": "ZXZlcmVzdA==", "OCEAN": "cGFjaWZpYw==",
                "VEGETABLE": "Y2Fycm90",
                "foo.env": "Ck1PVU5UQUlOPWV2ZXJlc3QKT0NFQU49cGFjaWZpYwo=",
                "passphrase": "ZGF0IHBocmFzZQ=="
            }
        }))
    );
    assert!(secret.needs_hash_suffix);
    assert_eq!(secret.behavior, Behavior::Create);
    assert_eq!(hashed_names(&mut resmap), ["bob-bh645k7tmg"]);
}

#[test]
fn long_values_break_into_lines_and_hash_like_kustomize() {
    // TestGeneratorWithAnnoOrigin (names before the `blah-` prefix).
    let t = tree(&[
        ("bar.env", b"\nBIRD=falcon\n"),
        ("foo.env", b"\nMOUNTAIN=everest\nOCEAN=pacific\n"),
        (
            "forces.txt",
            b"\ngravitational\nelectromagnetic\nstrong nuclear\nweak nuclear\n",
        ),
        (
            "phrase.dat",
            b"\nLife is short.\nBut the years are long.\nNot while the evil days come not.\n",
        ),
    ]);
    let kustomization = r#"
configMapGenerator:
- name: bob
  literals:
  - fruit=apple
  - vegetable=broccoli
  envs:
  - foo.env
  env: bar.env
  files:
  - passphrase=phrase.dat
  - forces.txt
- name: json
  literals:
  - 'v2=[{"path": "var/druid/segment-cache"}]'
  - >-
    druid_segmentCache_locations=[{"path":
    "var/druid/segment-cache",
    "maxSize": 32000000000,
    "freeSpacePercent": 1.0}]
secretGenerator:
- name: bob
  literals:
  - fruit=apple
  - vegetable=broccoli
  envs:
  - foo.env
  files:
  - passphrase=phrase.dat
  - forces.txt
  env: bar.env
"#;
    let mut resmap = ResMap::new();
    run(&t, ".", kustomization, &mut resmap);
    let secret = &resmap.as_slice()[2];
    assert_eq!(
        secret.obj["data"]["forces.txt"],
        "CmdyYXZpdGF0aW9uYWwKZWxlY3Ryb21hZ25ldGljCnN0cm9uZyBudWNsZWFyCndlYWsgbn\nVjbGVhcgo=\n"
    );
    assert_eq!(secret.obj["data"]["BIRD"], "ZmFsY29u");
    assert_eq!(
        hashed_names(&mut resmap),
        ["bob-g9df72cd5b", "json-m8529t979f", "bob-58g62h555c"]
    );
}

#[test]
fn base64_lines() {
    assert_eq!(encode_base64(b""), "");
    assert_eq!(encode_base64(b"f"), "Zg==");
    assert_eq!(encode_base64(b"fo"), "Zm8=");
    assert_eq!(encode_base64(b"foo"), "Zm9v");
    assert_eq!(encode_base64(&[0xff, 0xfe, 0x00]), "//4A");
    // 51 bytes encode to 68 characters: one line, no newline.
    assert!(!encode_base64_lines(&[b'a'; 51]).contains('\n'));
    // 52 bytes encode to 72 characters: a 70-character line and a 2-character one.
    let seventy = encode_base64_lines(&[b'a'; 52]);
    assert_eq!(seventy.lines().count(), 2);
    assert!(seventy.ends_with("==\n"), "{seventy}");
    let lines: Vec<&str> = seventy.split('\n').collect();
    assert_eq!(lines[0].len(), 70);
}

#[test]
fn namespaced_generators() {
    // TestNamespacedGenerator.
    let kustomization = r#"
configMapGenerator:
- name: the-non-default-namespace-map
  namespace: non-default
  literals:
  - altGreeting=Good Morning from non-default namespace!
  - enableRisky="false"
- name: the-map
  literals:
  - altGreeting=Good Morning from default namespace!
  - enableRisky="false"
secretGenerator:
- name: the-non-default-namespace-secret
  namespace: non-default
  literals:
  - password.txt=verySecret
- name: the-secret
  literals:
  - password.txt=anotherSecret
"#;
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    run(&t, ".", kustomization, &mut resmap);
    assert_eq!(resmap.as_slice()[0].namespace(), "non-default");
    assert_eq!(resmap.as_slice()[0].obj["data"]["enableRisky"], "false");
    assert_eq!(
        hashed_names(&mut resmap),
        [
            "the-non-default-namespace-map-64b2md8tth",
            "the-map-tg7t5hk8bk",
            "the-non-default-namespace-secret-8tc9gdd76t",
            "the-secret-6557m7fcg8"
        ]
    );
}

#[test]
fn last_repeated_field_wins_and_files_keep_leading_newlines() {
    // TestGeneratorRepeatsInKustomization.
    let t = tree(&[
        ("forces.txt", b"\ngravitational\n"),
        (
            "nobility.txt",
            b"\nhelium\nneon\nargon\nkrypton\nxenon\nradon\n",
        ),
    ]);
    let mut resmap = ResMap::new();
    run(
        &t,
        ".",
        "configMapGenerator:\n- name: bob\n  behavior: create\n  literals:\n  - fruit=apple\n  \
         - vegetable=broccoli\n  files:\n  - nobles=nobility.txt\n",
        &mut resmap,
    );
    assert_eq!(hashed_names(&mut resmap), ["bob-db529cg5bk"]);
}

#[test]
fn builtin_plugin_configs() {
    let t = tree(&[]);
    // TestConfigMapGeneratorLiteralNewline.
    let config = obj(json!({
        "apiVersion": "builtin", "kind": "ConfigMapGenerator", "metadata": {"name": "testing"},
        "literals": ["initial.txt=greetings\neveryone\n", "final.txt=different\nbehavior\n"]
    }));
    let res = generate_builtin("ConfigMapGenerator", &config, &t.loader, &t.root).unwrap();
    assert_eq!(res.obj["data"]["initial.txt"], "greetings\neveryone\n");
    assert_eq!(hash_suffix(&res.obj).unwrap(), "tt4769fb52");
    // TestInlineGenerator.
    let config = obj(json!({
        "apiVersion": "builtin", "kind": "ConfigMapGenerator", "metadata": {"name": "mymap"},
        "literals": ["FRUIT=apple", "VEGETABLE=carrot"], "somethingUnknown": 1
    }));
    let res = generate_builtin("ConfigMapGenerator", &config, &t.loader, &t.root).unwrap();
    assert_eq!(res.name(), "mymap");
    assert_eq!(hash_suffix(&res.obj).unwrap(), "kfd8tf729k");
    // Secret plugins honour `type`, options and the top-level name over metadata's.
    let config = obj(json!({
        "apiVersion": "builtin", "kind": "SecretGenerator",
        "metadata": {"name": "meta", "namespace": "ns"}, "name": "top", "type": "kubernetes.io/tls",
        "literals": ["tls.crt=c", "tls.key=k"],
        "options": {"disableNameSuffixHash": true, "labels": {"a": "b"}}
    }));
    let res = generate_builtin("SecretGenerator", &config, &t.loader, &t.root).unwrap();
    assert_eq!(res.name(), "top");
    assert_eq!(res.namespace(), "ns");
    assert_eq!(res.obj["type"], "kubernetes.io/tls");
    assert_eq!(res.obj["metadata"]["labels"]["a"], "b");
    assert!(!res.needs_hash_suffix);
    let err = generate_builtin("Bogus", &config, &t.loader, &t.root).unwrap_err();
    assert!(err.to_string().contains("Bogus"));
    let bad = obj(json!({"metadata": {"name": "x"}, "literals": "notalist"}));
    let err = generate_builtin("ConfigMapGenerator", &bad, &t.loader, &t.root).unwrap_err();
    assert!(err.to_string().contains("ConfigMapGenerator"), "{err}");
}

#[test]
fn builtin_dispatches_iam_policy_generator() {
    // TestGkeGeneratorWithNamespace.
    let t = tree(&[]);
    let config = obj(json!({
        "apiVersion": "builtin", "kind": "IAMPolicyGenerator", "metadata": {"name": "gen"},
        "cloud": "gke", "kubernetesService": {"namespace": "team", "name": "runner"},
        "serviceAccount": {"name": "gsa", "projectId": "p"}
    }));
    let res = generate_builtin("IAMPolicyGenerator", &config, &t.loader, &t.root).unwrap();
    assert_eq!(res.obj["kind"], "ServiceAccount");
    assert_eq!(res.name(), "runner");
    assert_eq!(res.namespace(), "team");
    assert_eq!(
        res.obj["metadata"]["annotations"]["iam.gke.io/gcp-service-account"],
        "gsa@p.iam.gserviceaccount.com"
    );
    let mut resmap = ResMap::new();
    add_generated(&mut resmap, res).unwrap();
    assert_eq!(names(&resmap), ["runner"]);
}

#[test]
fn options_merge_labels_and_switches() {
    // TestGeneratorOptionsWithBases: base disables the hash, the overlay does not.
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    run(
        &t,
        ".",
        "generatorOptions:\n  disableNameSuffixHash: true\n  labels: {foo: bar}\n\
         configMapGenerator:\n- name: shouldNotHaveHash\n  literals: [foo=bar]\n",
        &mut resmap,
    );
    run(
        &t,
        ".",
        "generatorOptions:\n  disableNameSuffixHash: false\n  labels: {fruit: apple}\n\
         configMapGenerator:\n- name: shouldHaveHash\n  literals: [fruit=apple]\n",
        &mut resmap,
    );
    assert_eq!(
        hashed_names(&mut resmap),
        ["shouldNotHaveHash", "shouldHaveHash-c9867f8446"]
    );
    assert_eq!(
        resmap.as_slice()[1].labels(),
        [("fruit".into(), "apple".into())]
    );

    let defaults = GeneratorOptions {
        labels: [
            ("a".into(), "default".into()),
            ("b".into(), "default".into()),
        ]
        .into(),
        immutable: Some(true),
        ..Default::default()
    };
    let args = gen_args(
        "{name: x, literals: [k=v], options: {labels: {a: entry}, annotations: {n: m}, \
         disableNameSuffixHash: true, immutable: false}}",
    );
    let res = generate_config_map(&args, Some(&defaults), &t.loader, &t.root).unwrap();
    assert_eq!(
        res.obj,
        obj(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "entry", "b": "default"},
                         "annotations": {"n": "m"}},
            "data": {"k": "v"}, "immutable": true
        }))
    );
    assert!(!res.needs_hash_suffix);
}

#[test]
fn non_utf8_config_map_values_go_to_binary_data() {
    let t = tree(&[
        ("blob.bin", &[0xff, 0x00, 0x61]),
        ("text.txt", "あ\n".as_bytes()),
    ]);
    let args = gen_args("{name: b, files: [blob.bin, text.txt]}");
    let res = generate_config_map(&args, None, &t.loader, &t.root).unwrap();
    assert_eq!(res.obj["binaryData"], json!({"blob.bin": "/wBh"}));
    assert_eq!(res.obj["data"], json!({"text.txt": "あ\n"}));
    // binaryData enters the hash.
    let mut without = res.obj.clone();
    without.shift_remove("binaryData");
    assert_ne!(
        hash_suffix(&res.obj).unwrap(),
        hash_suffix(&without).unwrap()
    );
}

#[test]
fn empty_generators() {
    let t = tree(&[]);
    let cm = generate_config_map(&gen_args("{name: e}"), None, &t.loader, &t.root).unwrap();
    assert!(!cm.obj.contains_key("data"));
    let secret = generate_secret(&gen_args("{name: e}"), None, &t.loader, &t.root).unwrap();
    assert_eq!(secret.obj["data"], json!({}));
}

#[test]
fn errors_name_what_is_wrong() {
    let t = tree(&[("a.env", b"K=1\n")]);
    let err = |yaml: &str| {
        generate_secret(&gen_args(yaml), None, &t.loader, &t.root)
            .unwrap_err()
            .to_string()
    };
    let dup = err("{name: s, envs: [a.env], literals: [K=2]}");
    assert!(
        dup.contains("`K`") && dup.contains("secretGenerator s"),
        "{dup}"
    );
    assert!(err("{literals: [a=b]}").contains("must have a name"));
    let missing = err("{name: s, files: [missing.txt]}");
    assert!(missing.contains("missing.txt"), "{missing}");
    let bad = err("{name: s, literals: [s3cr3t]}");
    assert!(bad.contains("#1") && !bad.contains("s3cr3t"), "{bad}");
    let outside = err("{name: s, files: [../x]}");
    assert!(outside.contains("secretGenerator s"), "{outside}");
}

fn generated(dir: &Path, t: &Tree, kind: Kind, yaml: &str) -> Resource {
    let args = gen_args(yaml);
    match kind {
        Kind::ConfigMap => generate_config_map(&args, None, &t.loader, dir).unwrap(),
        Kind::Secret => generate_secret(&args, None, &t.loader, dir).unwrap(),
    }
}

#[test]
fn merge_keeps_values_as_strings() {
    // TestGeneratorIntVsStringWithMerge.
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    let base = generated(
        &t.root,
        &t,
        Kind::ConfigMap,
        "{name: bob, literals: [fruit=Indian Gooseberry, year=2020, crisis=true]}",
    );
    add_generated(&mut resmap, base).unwrap();
    let overlay = generated(
        &t.root,
        &t,
        Kind::ConfigMap,
        "{name: bob, behavior: merge, literals: [month=12]}",
    );
    add_generated(&mut resmap, overlay).unwrap();
    assert_eq!(
        resmap.as_slice()[0].obj["data"],
        json!({"crisis": "true", "fruit": "Indian Gooseberry", "month": "12", "year": "2020"})
    );
    assert_eq!(hashed_names(&mut resmap), ["bob-bk46gm59c6"]);
}

#[test]
fn merge_from_env_files_in_different_directories() {
    // TestGeneratorFromProperties.
    let t = tree(&[
        ("base/properties", b"\nVAR1=100\n"),
        ("overlay/properties", b"\nVAR2=200\n"),
    ]);
    let mut resmap = ResMap::new();
    let yaml =
        "configMapGenerator:\n- name: test-configmap\n  behavior: BEHAVIOR\n  envs: [properties]\n";
    run(&t, "base", &yaml.replace("BEHAVIOR", "create"), &mut resmap);
    run(
        &t,
        "overlay",
        &yaml.replace("BEHAVIOR", "merge"),
        &mut resmap,
    );
    assert_eq!(hashed_names(&mut resmap), ["test-configmap-hdghb5ddkg"]);
}

/// The base of TestMergeAndReplaceGenerators after its own transformers: a prefix, labels
/// and an annotation on generated objects that still await their hash.
fn transformed_base(t: &Tree) -> ResMap {
    let mut resmap = ResMap::new();
    let deployment = Resource::new(obj(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx"}})));
    resmap.append(deployment).unwrap();
    run(
        t,
        ".",
        "configMapGenerator:\n- name: configmap-in-base\n  literals: [foo=bar]\n\
         secretGenerator:\n- name: secret-in-base\n  literals: [username=admin, password=somepw]\n",
        &mut resmap,
    );
    for res in resmap.iter_mut() {
        let name = format!("team-foo-{}", res.name());
        res.set_name(&name);
        res.set_metadata_entry("labels", "team", "foo");
        res.set_metadata_entry("labels", "org", "example.com");
        res.set_metadata_entry("annotations", "note", "This is a test annotation");
    }
    resmap
}

#[test]
fn merge_and_replace_keep_position_name_and_metadata() {
    // TestMergeAndReplaceGenerators.
    let t = tree(&[]);
    let mut resmap = transformed_base(&t);
    run(
        &t,
        ".",
        "configMapGenerator:\n- name: configmap-in-overlay\n  literals: [hello=world]\n\
         - name: configmap-in-base\n  behavior: replace\n  literals: [foo=override-bar]\n\
         secretGenerator:\n- name: secret-in-base\n  behavior: merge\n  literals: [proxy=haproxy]\n",
        &mut resmap,
    );
    let kinds: Vec<&str> = resmap.iter().map(Resource::kind).collect();
    assert_eq!(kinds, ["Deployment", "ConfigMap", "Secret", "ConfigMap"]);
    let replaced = &resmap.as_slice()[1];
    assert_eq!(replaced.name(), "team-foo-configmap-in-base");
    assert_eq!(replaced.obj["data"], json!({"foo": "override-bar"}));
    assert_eq!(replaced.obj["metadata"]["labels"]["team"], "foo");
    assert_eq!(replaced.org_id().name, "configmap-in-base");
    let merged = &resmap.as_slice()[2];
    assert_eq!(
        merged.obj["data"],
        json!({"password": "c29tZXB3", "proxy": "aGFwcm94eQ==", "username": "YWRtaW4="})
    );
    assert_eq!(
        merged.obj["metadata"]["annotations"]["note"],
        "This is a test annotation"
    );
    assert_eq!(
        hashed_names(&mut resmap),
        [
            "team-foo-nginx",
            "team-foo-configmap-in-base-hc6g9dk6g9",
            "team-foo-secret-in-base-k2k4692t9g",
            "configmap-in-overlay-dc6fm46dhm"
        ]
    );
}

#[test]
fn merge_without_hash_in_either_side_drops_the_hash() {
    // TestMergeAndReplaceDisableNameSuffixHashGenerators / TestGeneratorOptionsOverlay...
    let t = tree(&[]);
    let mut resmap = transformed_base(&t);
    run(
        &t,
        ".",
        "generatorOptions: {disableNameSuffixHash: true, labels: {fruit: apple}}\n\
         secretGenerator:\n- name: secret-in-base\n  behavior: merge\n  literals: [proxy=haproxy]\n",
        &mut resmap,
    );
    let merged = &resmap.as_slice()[2];
    assert!(!merged.needs_hash_suffix);
    assert_eq!(
        merged.labels(),
        [
            ("fruit".to_string(), "apple".to_string()),
            ("org".to_string(), "example.com".to_string()),
            ("team".to_string(), "foo".to_string())
        ]
    );
    // A plain (not generated) resource never gets a hash through a merge.
    let mut plain = ResMap::new();
    plain
        .append(Resource::new(obj(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": 1}}),
        )))
        .unwrap();
    let overlay = generated(
        &t.root,
        &t,
        Kind::ConfigMap,
        "{name: cm, behavior: merge, literals: [b=2]}",
    );
    add_generated(&mut plain, overlay).unwrap();
    let res = &plain.as_slice()[0];
    assert!(!res.needs_hash_suffix);
    assert_eq!(res.namespace(), "default");
    assert_eq!(res.obj["data"], json!({"a": "1", "b": "2"}));
}

#[test]
fn behavior_errors() {
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    let merge = generated(&t.root, &t, Kind::ConfigMap, "{name: a, behavior: merge}");
    let err = add_generated(&mut resmap, merge).unwrap_err().to_string();
    assert!(err.contains("ConfigMap") && err.contains("/a"), "{err}");
    let create = generated(&t.root, &t, Kind::ConfigMap, "{name: a}");
    add_generated(&mut resmap, create.clone()).unwrap();
    let err = add_generated(&mut resmap, create).unwrap_err().to_string();
    assert!(err.contains("exists"), "{err}");
    // Unknown behaviors act as create, as in kustomize.
    let odd = generated(&t.root, &t, Kind::ConfigMap, "{name: b, behavior: bogus}");
    assert_eq!(odd.behavior, Behavior::Create);
    // Another namespace is another id.
    let elsewhere = generated(
        &t.root,
        &t,
        Kind::ConfigMap,
        "{name: a, namespace: other, behavior: replace}",
    );
    assert!(add_generated(&mut resmap, elsewhere).is_err());
}

#[test]
fn merges_follow_renamed_bases() {
    // TestGeneratorOverlays: base1 (namePrefix p1-) <- o1 merge <- overlay merge.
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    run(
        &t,
        ".",
        "configMapGenerator:\n- name: com1\n  behavior: create\n  literals: [from=base]\n",
        &mut resmap,
    );
    for res in resmap.iter_mut() {
        let name = format!("p1-{}", res.name());
        res.set_name(&name);
    }
    run(
        &t,
        ".",
        "configMapGenerator:\n- name: com1\n  behavior: merge\n  literals: [from=overlay]\n",
        &mut resmap,
    );
    run(
        &t,
        ".",
        "configMapGenerator:\n- name: com1\n  behavior: merge\n  literals: [foo=bar, baz=qux]\n",
        &mut resmap,
    );
    assert_eq!(resmap.len(), 1);
    assert_eq!(resmap.as_slice()[0].org_id().name, "com1");
    assert_eq!(hashed_names(&mut resmap), ["p1-com1-8tc62428t2"]);
}

#[test]
fn builtin_merge_into_an_empty_generated_map() {
    // TestNamespacePropagationDoesNotBreakGeneratorMerge, before the namespace is set.
    let t = tree(&[
        ("base/configuration/general", b"\nBASE_LAYER_ENV=base\n"),
        ("overlay/configuration/general", b"\nOVERLAY_ENV=overlay\n"),
    ]);
    let mut resmap = ResMap::new();
    run(
        &t,
        "base",
        "configMapGenerator:\n- name: general-environment\n  behavior: create\n",
        &mut resmap,
    );
    let config = obj(
        json!({"apiVersion": "builtin", "kind": "ConfigMapGenerator",
        "metadata": {"name": "general-environment"}, "behavior": "merge",
        "envs": ["configuration/general"]}),
    );
    for dir in ["base", "overlay"] {
        let res =
            generate_builtin("ConfigMapGenerator", &config, &t.loader, &t.root.join(dir)).unwrap();
        add_generated(&mut resmap, res).unwrap();
    }
    resmap.iter_mut().for_each(|r| r.set_namespace("abc"));
    assert_eq!(
        hashed_names(&mut resmap),
        ["general-environment-826bch2dh9"]
    );
}

#[test]
fn keys_are_not_validated_as_in_kustomize() {
    // kustomize v5.8's key validator accepts everything.
    let t = tree(&[]);
    let res = generate_config_map(
        &gen_args("{name: k, literals: ['a b/c=v']}"),
        None,
        &t.loader,
        &t.root,
    )
    .unwrap();
    assert_eq!(res.obj["data"], json!({"a b/c": "v"}));
}

#[test]
fn merging_into_a_secret_drops_its_string_data_as_flux_does() {
    // kustomize v5.8.1 (Flux v1.10.1) merges only `data`: the stringData of the Secret
    // merged into is lost. v5.8.2 encodes it into data first
    // (TestSecretGeneratorMergeStringData); Flux's behavior is kept.
    let t = tree(&[]);
    let mut resmap = ResMap::new();
    let base = Resource::new(obj(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "test"}, "type": "Opaque",
        "data": {"a": "b2xk"},
        "stringData": {"property1": "value1"}
    })));
    resmap.append(base).unwrap();
    let overlay = generated(
        &t.root,
        &t,
        Kind::Secret,
        "{name: test, behavior: merge, literals: [property2=value2]}",
    );
    add_generated(&mut resmap, overlay).unwrap();
    let merged = &resmap.as_slice()[0].obj;
    assert_eq!(
        merged["data"],
        json!({"a": "b2xk", "property2": "dmFsdWUy"})
    );
    assert!(merged.get("stringData").is_none(), "{merged:?}");
}
