//! The Kustomization CRD: the checked-in file is what the types generate, it is compatible with
//! Flux's own CRD, and every Kustomization example of Flux's documentation (re-written as the
//! fixtures in `tests/fixtures/flux-docs-examples/`) round-trips through the Rust types and is
//! accepted by a real API server with our CRD installed.
mod support;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kustomize_controller::api::Kustomization;
use kustomize_controller::api::crd::{CRD_FILE, crd_yaml};
use kustomize_controller::api::validation::{self, ValidationError};
use serde_json::{Value, json};

const GROUP_VERSION: &str = "kustomize.toolkit.fluxcd.io/v1";
const REGENERATE: &str = "cargo run -- crd > crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml";

// ---------------------------------------------------------------------------------------------
// 1. Freshness of the checked-in CRD
// ---------------------------------------------------------------------------------------------

#[test]
fn checked_in_crd_is_fresh() {
    let generated = crd_yaml().expect("the CRD must serialise to YAML");
    let path = support::repo_root().join(CRD_FILE);
    let checked_in = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e}; generate it with `{REGENERATE}`",
            path.display()
        )
    });
    if generated != checked_in {
        let first_difference = generated
            .lines()
            .zip(checked_in.lines())
            .position(|(g, c)| g != c)
            .unwrap_or_else(|| generated.lines().count().min(checked_in.lines().count()));
        panic!(
            "{CRD_FILE} is stale: it differs from what the API types generate (first difference at \
             line {}: generated {:?}, checked in {:?}). Regenerate it with `{REGENERATE}`",
            first_difference + 1,
            generated
                .lines()
                .nth(first_difference)
                .unwrap_or("<end of file>"),
            checked_in
                .lines()
                .nth(first_difference)
                .unwrap_or("<end of file>"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Compatibility with Flux's CRD
// ---------------------------------------------------------------------------------------------

/// Env var naming Flux's Kustomization CRD; by default tests/flux/fetch-flux-crd.sh fetches
/// Flux v1.10.1's from the Go module proxy (cached).
const FLUX_CRD_ENV: &str = "FLUX_KUSTOMIZATION_CRD";

fn load_flux_crd() -> Value {
    let path = support::reference_data(FLUX_CRD_ENV, "tests/flux/fetch-flux-crd.sh");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read Flux's Kustomization CRD at {} ({e}). This test never skips",
            path.display()
        )
    });
    serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}

fn load_our_crd() -> Value {
    let text = crd_yaml().expect("the CRD must serialise to YAML");
    serde_saphyr::from_str(&text).expect("our generated CRD must parse back")
}

/// Keywords that hold child schemas: walked into rather than compared whole.
const NESTING_KEYWORDS: &[&str] = &["properties", "items", "additionalProperties"];

/// The one keyword not compared: descriptions are the Rust types' own doc comments, not
/// Flux's Go comments; everything that validates, defaults or prunes is compared exactly.
const UNCOMPARED_KEYWORD: &str = "description";

#[test]
fn crd_is_compatible_with_flux() {
    let flux = load_flux_crd();
    let ours = load_our_crd();
    let mut mismatches = Vec::new();
    let mut notes = Vec::new();

    let mut expect_same = |what: &str, flux: Option<&Value>, ours: Option<&Value>| {
        if flux != ours {
            mismatches.push(format!("{what}: flux={} ours={}", show(flux), show(ours)));
        }
    };
    expect_same(
        "metadata.name",
        flux.pointer("/metadata/name"),
        ours.pointer("/metadata/name"),
    );
    expect_same(
        "metadata.annotations[kustomize.toolkit.fluxcd.io/substitute]",
        flux.pointer("/metadata/annotations/kustomize.toolkit.fluxcd.io~1substitute"),
        ours.pointer("/metadata/annotations/kustomize.toolkit.fluxcd.io~1substitute"),
    );
    expect_same(
        "spec.group",
        flux.pointer("/spec/group"),
        ours.pointer("/spec/group"),
    );
    expect_same(
        "spec.scope",
        flux.pointer("/spec/scope"),
        ours.pointer("/spec/scope"),
    );
    for field in ["kind", "plural", "singular"] {
        let pointer = format!("/spec/names/{field}");
        expect_same(
            &format!("spec.names.{field}"),
            flux.pointer(&pointer),
            ours.pointer(&pointer),
        );
    }
    for field in ["shortNames", "categories"] {
        let pointer = format!("/spec/names/{field}");
        let (f, o) = (
            as_set(flux.pointer(&pointer)),
            as_set(ours.pointer(&pointer)),
        );
        if f != o {
            mismatches.push(format!(
                "spec.names.{field}: flux={f:?} ours={o:?} (compared as sets)"
            ));
        }
    }
    // The API server defaults listKind to `<kind>List`; kube-derive leaves it out.
    if let Some(flux_list_kind) = flux.pointer("/spec/names/listKind") {
        let ours_list_kind = match ours.pointer("/spec/names/listKind") {
            Some(value) => value.clone(),
            None => {
                let kind = ours
                    .pointer("/spec/names/kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                notes.push(format!(
                    "spec.names.listKind is absent in ours; the API server defaults it to \
                     {kind}List (Flux: {flux_list_kind})"
                ));
                json!(format!("{kind}List"))
            }
        };
        if *flux_list_kind != ours_list_kind {
            mismatches.push(format!(
                "spec.names.listKind: flux={flux_list_kind} ours={ours_list_kind} (effective)"
            ));
        }
    }

    let versions = |crd: &Value| -> Vec<Value> {
        crd.pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (flux_versions, our_versions) = (versions(&flux), versions(&ours));
    let names = |vs: &[Value]| -> BTreeSet<String> {
        vs.iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect()
    };
    if names(&flux_versions) != names(&our_versions) {
        mismatches.push(format!(
            "spec.versions: flux serves {:?}, ours {:?}",
            names(&flux_versions),
            names(&our_versions)
        ));
    }
    let flux_v1 = flux_versions
        .iter()
        .find(|v| v.get("name") == Some(&json!("v1")))
        .expect("Flux's CRD has a v1 version");
    match our_versions
        .iter()
        .find(|v| v.get("name") == Some(&json!("v1")))
    {
        None => mismatches.push("spec.versions[v1]: missing in ours".to_owned()),
        Some(our_v1) => {
            for field in ["served", "storage", "deprecated"] {
                if flux_v1.get(field) != our_v1.get(field) {
                    mismatches.push(format!(
                        "spec.versions[v1].{field}: flux={} ours={}",
                        show(flux_v1.get(field)),
                        show(our_v1.get(field))
                    ));
                }
            }
            let status = |v: &Value| v.pointer("/subresources/status").cloned();
            if status(flux_v1) != status(our_v1) {
                mismatches.push(format!(
                    "spec.versions[v1].subresources.status: flux={:?} ours={:?}",
                    status(flux_v1),
                    status(our_v1)
                ));
            }
            let scale = |v: &Value| v.pointer("/subresources/scale").cloned();
            if scale(flux_v1) != scale(our_v1) {
                mismatches.push(format!(
                    "spec.versions[v1].subresources.scale: flux={:?} ours={:?}",
                    scale(flux_v1),
                    scale(our_v1)
                ));
            }
            let columns = |v: &Value| -> Vec<String> {
                v.get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let get = |k: &str| show(c.get(k));
                        format!("{} {} {}", get("name"), get("type"), get("jsonPath"))
                    })
                    .collect()
            };
            if columns(flux_v1) != columns(our_v1) {
                mismatches.push(format!(
                    "spec.versions[v1].additionalPrinterColumns (name type jsonPath): flux=[{}] \
                     ours=[{}]",
                    columns(flux_v1).join(", "),
                    columns(our_v1).join(", ")
                ));
            }
            match (
                flux_v1.pointer("/schema/openAPIV3Schema"),
                our_v1.pointer("/schema/openAPIV3Schema"),
            ) {
                (Some(f), Some(o)) => {
                    compare_schema(f, o, "", &mut mismatches);
                    // The walk above names each difference; this is the whole contract:
                    // equal values, number types included (`0` is not `0.0`), lists in order.
                    let (f, o) = (without_descriptions(f), without_descriptions(o));
                    if f != o && mismatches.is_empty() {
                        mismatches.push(
                            "spec.versions[v1].schema.openAPIV3Schema: differs from Flux's \
                             (descriptions aside) where the walk does not look"
                                .to_owned(),
                        );
                    }
                }
                (f, o) => mismatches.push(format!(
                    "spec.versions[v1].schema.openAPIV3Schema: present in flux={} ours={}",
                    f.is_some(),
                    o.is_some()
                )),
            }
        }
    }

    for note in &notes {
        eprintln!("note: {note}");
    }
    assert!(
        mismatches.is_empty(),
        "our CRD differs from Flux's in {} place(s) (schema paths are JSON paths under \
         openAPIV3Schema):\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Walks Flux's schema node by node (properties, items, additionalProperties) and records every
/// keyword or node in which ours differs. Every keyword but `description` is compared as a
/// value: the same type of number, the same list in the same order.
fn compare_schema(flux: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    let keywords: BTreeSet<&String> = [flux, ours]
        .iter()
        .filter_map(|node| node.as_object())
        .flat_map(|map| map.keys())
        .filter(|k| *k != UNCOMPARED_KEYWORD && !NESTING_KEYWORDS.contains(&k.as_str()))
        .collect();
    for keyword in keywords {
        let (f, o) = (flux.get(keyword), ours.get(keyword));
        if f != o {
            out.push(format!(
                "{at}: {keyword}: flux={} ours={}",
                literal(f),
                literal(o)
            ));
        }
    }

    let flux_props = flux.get("properties").and_then(Value::as_object);
    let our_props = ours.get("properties").and_then(Value::as_object);
    for (name, flux_child) in flux_props.into_iter().flatten() {
        let child_path = format!("{path}.{name}");
        match our_props.and_then(|props| props.get(name)) {
            Some(our_child) => compare_schema(flux_child, our_child, &child_path, out),
            None => out.push(format!(
                "{child_path}: missing in ours (flux: {})",
                summary(flux_child)
            )),
        }
    }
    for (name, our_child) in our_props.into_iter().flatten() {
        if !flux_props.is_some_and(|props| props.contains_key(name)) {
            out.push(format!(
                "{path}.{name}: only in ours, Flux's API server would prune it (ours: {})",
                summary(our_child)
            ));
        }
    }

    match (flux.get("items"), ours.get("items")) {
        (Some(f), Some(o)) => compare_schema(f, o, &format!("{path}[*]"), out),
        (Some(f), None) => out.push(format!(
            "{at}: items missing in ours (flux: {})",
            summary(f)
        )),
        (None, Some(o)) => out.push(format!("{at}: items only in ours ({})", summary(o))),
        (None, None) => {}
    }
    match (
        flux.get("additionalProperties"),
        ours.get("additionalProperties"),
    ) {
        (Some(f @ Value::Object(_)), Some(o @ Value::Object(_))) => {
            compare_schema(f, o, &format!("{path}.*"), out)
        }
        (f, o) if f != o => out.push(format!(
            "{at}: additionalProperties: flux={} ours={}",
            literal(f),
            literal(o)
        )),
        _ => {}
    }
}

/// A value as written, numbers as they are typed (`0` and `0.0` stay apart).
fn literal(value: Option<&Value>) -> String {
    value.map_or_else(|| "<absent>".to_owned(), Value::to_string)
}

/// `schema` with every `description` removed (the keyword, not a property of that name).
fn without_descriptions(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != UNCOMPARED_KEYWORD)
                .map(|(key, value)| {
                    let value = if key == "properties" {
                        // Property names are data here: keep one called `description`.
                        match value {
                            Value::Object(props) => Value::Object(
                                props
                                    .iter()
                                    .map(|(name, child)| {
                                        (name.clone(), without_descriptions(child))
                                    })
                                    .collect(),
                            ),
                            other => other.clone(),
                        }
                    } else {
                        without_descriptions(value)
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// A list keyword as a set of canonical JSON strings (object keys sorted).
fn as_set(value: Option<&Value>) -> BTreeSet<String> {
    match value {
        Some(Value::Array(items)) => items.iter().map(canonical).collect(),
        Some(other) => BTreeSet::from([canonical(other)]),
        None => BTreeSet::new(),
    }
}

fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

fn show(value: Option<&Value>) -> String {
    value.map_or_else(|| "<absent>".to_owned(), canonical)
}

/// A short description of a schema node for mismatch messages.
fn summary(node: &Value) -> String {
    let mut text = node
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("<untyped>")
        .to_owned();
    for keyword in ["enum", "pattern", "required", "default"] {
        if let Some(value) = node.get(keyword) {
            let _ = write!(text, " {keyword}={}", canonical(value));
        }
    }
    text
}

// ---------------------------------------------------------------------------------------------
// 3. Flux documentation examples
// ---------------------------------------------------------------------------------------------

/// One Kustomization document of a fixture file.
struct Example {
    /// `<file>#<document number>` for messages.
    label: String,
    doc: Value,
}

fn fixtures_dir() -> PathBuf {
    support::repo_root().join("tests/fixtures/flux-docs-examples")
}

/// Every document of every fixture; panics on anything that is not a documented Kustomization.
fn load_examples() -> Vec<Example> {
    let dir = fixtures_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 30,
        "expected the Flux documentation fixtures in {}, found {} file(s)",
        dir.display(),
        files.len()
    );
    let mut examples = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        assert!(
            text.starts_with("# Mirrors "),
            "{file}: the first line must be a `# Mirrors <doc page> — <section>` comment"
        );
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{file}: invalid YAML: {e}"));
        assert!(!docs.is_empty(), "{file}: no YAML document");
        for (index, doc) in docs.into_iter().enumerate() {
            let label = format!("{file}#{}", index + 1);
            assert_eq!(
                (doc.get("apiVersion"), doc.get("kind")),
                (Some(&json!(GROUP_VERSION)), Some(&json!("Kustomization"))),
                "{label}: every fixture document must be a {GROUP_VERSION} Kustomization"
            );
            examples.push(Example { label, doc });
        }
    }
    examples
}

#[test]
fn docs_examples_round_trip() {
    let mut problems = Vec::new();
    for example in load_examples() {
        let parsed: Kustomization = match serde_json::from_value(example.doc.clone()) {
            Ok(parsed) => parsed,
            Err(e) => {
                problems.push(format!(
                    "{}: does not deserialise into Kustomization: {e}",
                    example.label
                ));
                continue;
            }
        };
        let output = serde_json::to_value(&parsed).expect("Kustomization serialises");
        let mut lost = Vec::new();
        missing_from(&example.doc, &output, "$", &mut lost);
        problems.extend(
            lost.into_iter()
                .map(|line| format!("{}: {line}", example.label)),
        );
    }
    assert!(
        problems.is_empty(),
        "fields lost or changed by deserialising into Kustomization and serialising back:\n{}",
        problems.join("\n")
    );
}

/// Records every path of `input` that is absent from `output` or has another value there.
/// `output` may have more fields (defaults).
fn missing_from(input: &Value, output: &Value, path: &str, out: &mut Vec<String>) {
    match (input, output) {
        (Value::Object(input), Value::Object(output)) => {
            for (key, input_value) in input {
                let child = format!("{path}.{key}");
                match output.get(key) {
                    Some(output_value) => missing_from(input_value, output_value, &child, out),
                    None => out.push(format!("{child}: lost (was {input_value})")),
                }
            }
        }
        (Value::Array(input), Value::Array(output)) => {
            if input.len() != output.len() {
                out.push(format!(
                    "{path}: {} item(s) became {}",
                    input.len(),
                    output.len()
                ));
            }
            for (index, (i, o)) in input.iter().zip(output).enumerate() {
                missing_from(i, o, &format!("{path}[{index}]"), out);
            }
        }
        (input, output) if input == output => {}
        (input, output) => out.push(format!("{path}: changed from {input} to {output}")),
    }
}

#[test]
fn docs_examples_cover_every_spec_field() {
    let crd = load_our_crd();
    let spec_schema = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec")
        .expect("our CRD has a spec schema");
    let mut fields = BTreeSet::new();
    schema_leaves(spec_schema, "$.spec", &mut fields);
    let mut seen = BTreeSet::new();
    for example in load_examples() {
        if let Some(spec) = example.doc.get("spec") {
            value_paths(spec, "$.spec", &mut seen);
        }
    }
    let uncovered: Vec<_> = fields.difference(&seen).collect();
    assert!(
        uncovered.is_empty(),
        "no fixture in {} sets these spec fields: {uncovered:?}",
        fixtures_dir().display()
    );
}

/// Paths of the schema's leaves: scalars, maps (additionalProperties) and arrays of scalars.
fn schema_leaves(node: &Value, path: &str, out: &mut BTreeSet<String>) {
    let props = node.get("properties").and_then(Value::as_object);
    let items = node.get("items");
    if props.is_none_or(|p| p.is_empty()) && items.is_none() {
        out.insert(path.to_owned());
    }
    for (name, child) in props.into_iter().flatten() {
        schema_leaves(child, &format!("{path}.{name}"), out);
    }
    if let Some(items) = items {
        schema_leaves(items, &format!("{path}[*]"), out);
    }
}

fn value_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    out.insert(path.to_owned());
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                value_paths(child, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for item in items {
                value_paths(item, &format!("{path}[*]"), out);
            }
        }
        _ => {}
    }
}

fn kustomizations(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<Kustomization>(&()),
    )
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

/// Server-side dry-run create of a raw Kustomization document.
async fn dry_run_create(api: &Api<DynamicObject>, doc: &Value) -> Result<Value, kube::Error> {
    let object: DynamicObject =
        serde_json::from_value(doc.clone()).expect("a Kustomization document is an object");
    let created = api.create(&dry_run(), &object).await?;
    Ok(serde_json::to_value(created).expect("DynamicObject serialises"))
}

/// The API server's message for API errors (without kube's debug dump of the Status).
fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn docs_examples_are_accepted_by_the_crd() {
    let client = support::client().await;
    let namespace = support::TestNamespace::new(&client, "crd-docs-examples").await;
    let api = kustomizations(&client, namespace.name());

    let mut problems = Vec::new();
    for example in load_examples() {
        let mut doc = example.doc.clone();
        doc["metadata"]["namespace"] = json!(namespace.name());
        if let Err(e) = validation::validate(&doc) {
            problems.push(format!(
                "{}: refused by api::validation: {e}",
                example.label
            ));
        }
        match dry_run_create(&api, &doc).await {
            Ok(stored) => {
                // Anything the schema does not know is pruned silently: the stored object must
                // still hold every field of the example.
                let mut pruned = Vec::new();
                missing_from(&doc, &stored, "$", &mut pruned);
                problems.extend(
                    pruned
                        .into_iter()
                        .map(|line| format!("{}: accepted, but {line}", example.label)),
                );
            }
            Err(e) => problems.push(format!("{}: rejected: {}", example.label, describe(&e))),
        }
    }
    assert!(
        problems.is_empty(),
        "documentation examples not accepted as written by the API server with our CRD:\n{}",
        problems.join("\n")
    );
}

#[tokio::test]
async fn invalid_kustomizations_are_rejected_by_the_crd() {
    let client = support::client().await;
    let namespace = support::TestNamespace::new(&client, "crd-invalid").await;
    let api = kustomizations(&client, namespace.name());
    let base = json!({
        "apiVersion": GROUP_VERSION,
        "kind": "Kustomization",
        "metadata": { "name": "invalid", "namespace": namespace.name() },
        "spec": {
            "interval": "5m",
            "prune": true,
            "sourceRef": { "kind": "GitRepository", "name": "source" },
        },
    });
    if let Err(e) = dry_run_create(&api, &base).await {
        panic!(
            "the valid base object used by this test is rejected: {}",
            describe(&e)
        );
    }

    // (what, fields merged into .spec, text the error must mention)
    let cases = [
        (
            "interval \"10 minutes\"",
            json!({ "interval": "10 minutes" }),
            "spec.interval",
        ),
        (
            "retryInterval \"soon\"",
            json!({ "retryInterval": "soon" }),
            "spec.retryInterval",
        ),
        (
            "targetNamespace of 64 characters",
            json!({ "targetNamespace": "n".repeat(64) }),
            "spec.targetNamespace",
        ),
        (
            "kubeConfig with both secretRef and configMapRef",
            json!({ "kubeConfig": {
                "secretRef": { "name": "kubeconfig" },
                "configMapRef": { "name": "kubeconfig" },
            } }),
            "spec.kubeConfig",
        ),
        (
            "kubeConfig with neither secretRef nor configMapRef",
            json!({ "kubeConfig": {} }),
            "spec.kubeConfig",
        ),
        (
            "sourceRef.kind \"HelmRepository\"",
            json!({ "sourceRef": { "kind": "HelmRepository", "name": "charts" } }),
            "spec.sourceRef.kind",
        ),
        (
            "deletionPolicy \"Keep\"",
            json!({ "deletionPolicy": "Keep" }),
            "spec.deletionPolicy",
        ),
        (
            "decryption.provider \"vault\"",
            json!({ "decryption": { "provider": "vault" } }),
            "spec.decryption.provider",
        ),
        (
            "substituteFrom kind \"Pod\"",
            json!({ "postBuild": { "substituteFrom": [{ "kind": "Pod", "name": "vars" }] } }),
            "spec.postBuild.substituteFrom[0].kind",
        ),
        (
            "empty namePrefix",
            json!({ "namePrefix": "" }),
            "spec.namePrefix",
        ),
        (
            "timeout of \"5\" and prune \"yes\"",
            json!({ "timeout": "5", "prune": "yes" }),
            "spec.timeout",
        ),
        (
            "healthChecks entry without a name",
            json!({ "healthChecks": [{ "kind": "Deployment", "apiVersion": "apps/v1" }] }),
            "spec.healthChecks[0].name",
        ),
        (
            "dependsOn name of a number",
            json!({ "dependsOn": [{ "name": 3 }] }),
            "spec.dependsOn[0].name",
        ),
    ];
    let mut problems = Vec::new();
    for (what, overrides, field) in cases {
        let mut doc = base.clone();
        for (key, value) in overrides.as_object().expect("overrides are an object") {
            doc["spec"][key] = value.clone();
        }
        let offline = validation::validate(&doc);
        match dry_run_create(&api, &doc).await {
            Ok(_) => problems.push(format!("{what}: accepted, expected a rejection on {field}")),
            Err(kube::Error::Api(status)) => {
                // The offline check (`build --kustomization`) refuses it in the same words.
                match &offline {
                    Ok(()) => problems.push(format!(
                        "{what}: refused by the API server but accepted by api::validation"
                    )),
                    Err(ValidationError::Invalid { causes, .. }) => {
                        for cause in causes {
                            if !status.message.contains(cause.as_str()) {
                                problems.push(format!(
                                    "{what}: api::validation says {cause:?}, the API server says {:?}",
                                    status.message
                                ));
                            }
                        }
                    }
                    Err(other) => problems.push(format!(
                        "{what}: api::validation refused it as {other}, the API server as {:?}",
                        status.message
                    )),
                }
                if status.code != 422 {
                    problems.push(format!(
                        "{what}: expected 422 Invalid, got {}: {}",
                        status.code, status.message
                    ));
                } else if !status.message.contains(field) {
                    problems.push(format!(
                        "{what}: the error does not mention {field}: {}",
                        status.message
                    ));
                }
            }
            Err(e) => problems.push(format!("{what}: request failed: {}", describe(&e))),
        }
    }
    assert!(
        problems.is_empty(),
        "invalid Kustomizations not rejected as expected:\n{}",
        problems.join("\n")
    );
}

#[test]
fn install_copies_of_the_crd_are_identical() {
    let root = support::repo_root();
    let generated =
        std::fs::read(root.join(kustomize_controller::api::crd::CRD_FILE)).expect("generated CRD");
    for copy in [
        "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
        "charts/kustomize-controller/crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    ] {
        let content =
            std::fs::read(root.join(copy)).unwrap_or_else(|e| panic!("cannot read {copy}: {e}"));
        assert!(
            content == generated,
            "{copy} differs from the generated CRD: run `make crds`"
        );
    }
}
