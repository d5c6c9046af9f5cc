use super::*;
use serde_json::json;

/// A healthCheckExprs entry with only `current` (also used by the assess module's tests).
pub(crate) fn check(api_version: &str, kind: Option<&str>, current: &str) -> CustomHealthCheck {
    CustomHealthCheck {
        api_version: api_version.to_string(),
        kind: kind.map(str::to_string),
        current: current.to_string(),
        in_progress: None,
        failed: None,
    }
}

fn full(current: &str, in_progress: &str, failed: &str) -> CustomHealthCheck {
    CustomHealthCheck {
        api_version: "example.com/v1".to_string(),
        kind: Some("Thing".to_string()),
        current: current.to_string(),
        in_progress: Some(in_progress.to_string()),
        failed: Some(failed.to_string()),
    }
}

fn thing(fields: Value) -> Value {
    let mut object = json!({"apiVersion": "example.com/v1", "kind": "Thing"});
    if let (Some(object), Some(fields)) = (object.as_object_mut(), fields.as_object()) {
        object.extend(fields.clone());
    }
    object
}

fn eval(check: CustomHealthCheck, object: Value) -> Result<Assessment, CelError> {
    let exprs = HealthCheckExprs::new(&[check]).unwrap();
    exprs
        .evaluate(&thing(object))
        .expect("the check covers Thing")
}

fn flux_instance(status: Value, generation: i64) -> Value {
    json!({"apiVersion": "fluxcd.controlplane.io/v1", "kind": "FluxInstance",
               "metadata": {"name": "flux", "generation": generation}, "status": status})
}

#[test]
fn construction() {
    let parse_error = |index: usize, field: &str, expr: &str, issues: &str| {
        format!(
            "failed to create custom status evaluator for healthchecks[{index}]: failed to \
                 parse the expression {field}: failed to parse the CEL expression '{expr}': \
                 {issues}"
        )
    };
    let duplicate = |group_kind: &str, index: usize| {
        format!("duplicate custom health check for GroupKind {group_kind} at healthchecks[{index}]")
    };
    let cases: Vec<(&str, Vec<CustomHealthCheck>, Option<String>)> = vec![
        ("no checks", vec![], None),
        (
            "all expressions",
            vec![full("data.current", "data.inProgress", "data.failed")],
            None,
        ),
        (
            "inProgress and failed are optional, empty counts as absent",
            vec![full("data.current", "", "")],
            None,
        ),
        (
            "same kind in different groups",
            vec![
                check("a.example.com/v1", Some("Thing"), "true"),
                check("b.example.com/v1", Some("Thing"), "true"),
            ],
            None,
        ),
        (
            "a kind and its group",
            vec![
                check("example.com/v1", Some("Thing"), "true"),
                check("example.com/v1", None, "true"),
                check("example.com/v2", Some(""), "false"),
            ],
            Some(duplicate(".example.com", 2)),
        ),
        (
            "versions do not matter",
            vec![
                check("bitnami.com/v1alpha1", Some("SealedSecret"), "true"),
                check("bitnami.com/v1", Some("SealedSecret"), "true"),
            ],
            Some(duplicate("SealedSecret.bitnami.com", 1)),
        ),
        (
            "core group",
            vec![
                check("v1", Some("ConfigMap"), "true"),
                check("v1", Some("ConfigMap"), "true"),
            ],
            Some(duplicate("ConfigMap", 1)),
        ),
        (
            "an invalid apiVersion is the core group",
            vec![
                check("v1", Some("ConfigMap"), "true"),
                check("a/b/c", Some("ConfigMap"), "true"),
            ],
            Some(duplicate("ConfigMap", 1)),
        ),
        (
            "duplicates are found before the expressions are parsed",
            vec![
                check("example.com/v1", Some("Thing"), "true"),
                check("example.com/v1", Some("Thing"), "data."),
            ],
            Some(duplicate("Thing.example.com", 1)),
        ),
        (
            "current is required",
            vec![
                check("example.com/v1", Some("Other"), "true"),
                full("", "true", "false"),
            ],
            Some(
                "failed to create custom status evaluator for healthchecks[1]: expression \
                     Current not specified"
                    .to_string(),
            ),
        ),
        (
            "invalid current",
            vec![check("example.com/v1", Some("Thing"), "data.")],
            Some(parse_error(
                0,
                "Current",
                "data.",
                "ERROR: <input>:1:6: Syntax error: no viable alternative at input '.'\n | \
                     data.\n | .....^",
            )),
        ),
        (
            "invalid inProgress",
            vec![full("data.current", "data.", "data.failed")],
            Some(parse_error(
                0,
                "InProgress",
                "data.",
                "ERROR: <input>:1:6: Syntax error: no viable alternative at input '.'\n | \
                     data.\n | .....^",
            )),
        ),
        (
            "invalid failed",
            vec![full("data.current", "data.inProgress", "has(status)")],
            Some(parse_error(
                0,
                "Failed",
                "has(status)",
                "ERROR: <input>:1:5: invalid argument to has() macro\n | has(status)\n | ....^",
            )),
        ),
        (
            "failed is parsed before inProgress",
            vec![full("true", "(", ")")],
            Some(parse_error(
                0,
                "Failed",
                ")",
                "ERROR: <input>:1:1: Syntax error: mismatched input ')' expecting {'[', \
                     '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, \
                     NUM_UINT, STRING, BYTES, IDENTIFIER}\n | )\n | ^",
            )),
        ),
        (
            "unknown variables are not an error until evaluated",
            vec![check(
                "example.com/v1",
                Some("Thing"),
                "nosuchvariable.field == 1",
            )],
            None,
        ),
    ];
    for (name, checks, want) in cases {
        let got = HealthCheckExprs::new(&checks).err().map(|e| e.to_string());
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn support() {
    let exprs = HealthCheckExprs::new(&[
        check("example.com/v1", Some("Thing"), "true"),
        check("cert-manager.io/v1", None, "true"),
        check("v1", Some("ConfigMap"), "true"),
    ])
    .unwrap();
    assert!(!exprs.is_empty());
    assert!(HealthCheckExprs::new(&[]).unwrap().is_empty());
    for (group, kind, want) in [
        ("example.com", "Thing", true),
        ("example.com", "Other", false),
        ("other.com", "Thing", false),
        ("cert-manager.io", "Certificate", true),
        ("cert-manager.io", "ClusterIssuer", true),
        ("", "ConfigMap", true),
        ("", "Secret", false),
    ] {
        assert_eq!(exprs.supports(group, kind), want, "{group}/{kind}");
    }
    assert!(
        exprs
            .evaluate(&json!({"apiVersion": "example.com/v1", "kind": "Other"}))
            .is_none()
    );
    assert!(
        exprs
            .evaluate(&json!({"apiVersion": "v1", "kind": "ConfigMap"}))
            .is_some()
    );
    assert_eq!(
        format!("{exprs:?}"),
        r#"["ConfigMap", ".cert-manager.io", "Thing.example.com"]"#
    );
}

#[test]
fn kind_wins_over_group() {
    let exprs = HealthCheckExprs::new(&[
        check("example.com/v1", None, "false"),
        check("example.com/v2", Some("Thing"), "true"),
    ])
    .unwrap();
    let status = |kind: &str| {
        exprs
            .evaluate(&json!({"apiVersion": "example.com/v9", "kind": kind}))
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(status("Thing"), Status::Current);
    assert_eq!(status("Other"), Status::InProgress);
}

/// fluxcd/pkg/runtime's StatusEvaluator cases.
#[test]
fn status_evaluator() {
    let data = |current: bool, in_progress: bool, failed: bool| json!({"data": {"current": current, "inProgress": in_progress, "failed": failed}});
    let ready_failed = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')";
    let ready_current = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')";
    let not_observed =
        "has(status.observedGeneration) && metadata.generation != status.observedGeneration";
    let cases: Vec<(&str, CustomHealthCheck, Value, Result<Status, &str>)> = vec![
        (
            "observed generation differs",
            check("example.com/v1", Some("Thing"), "true"),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "current fails",
            full("data.currentt", "data.inProgress", "data.failed"),
            data(true, false, false),
            Err("failed to evaluate the CEL expression 'data.currentt': no such key: currentt"),
        ),
        (
            "inProgress fails",
            full("data.current", "data.inProgresss", "data.failed"),
            data(true, false, false),
            Err(
                "failed to evaluate the CEL expression 'data.inProgresss': no such key: \
                     inProgresss",
            ),
        ),
        (
            "failed fails",
            full("data.current", "data.inProgress", "data.failedd"),
            data(true, false, false),
            Err("failed to evaluate the CEL expression 'data.failedd': no such key: failedd"),
        ),
        (
            "all false",
            full("data.current", "data.inProgress", "data.failed"),
            data(false, false, false),
            Ok(Status::InProgress),
        ),
        (
            "all true",
            full("data.current", "data.inProgress", "data.failed"),
            data(true, true, true),
            Ok(Status::InProgress),
        ),
        (
            "failed and current",
            full("data.current", "data.inProgress", "data.failed"),
            data(true, false, true),
            Ok(Status::Failed),
        ),
        (
            "only current",
            full("data.current", "data.inProgress", "data.failed"),
            data(true, false, false),
            Ok(Status::Current),
        ),
        (
            "no status, with inProgress",
            full(ready_current, not_observed, ready_failed),
            json!({}),
            Err(
                "failed to evaluate the CEL expression 'has(status.observedGeneration) && \
                     metadata.generation != status.observedGeneration': no such attribute(s): \
                     status.observedGeneration",
            ),
        ),
        (
            "no status, without inProgress",
            full(ready_current, "", ready_failed),
            json!({}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type \
                     == 'Ready').all(e, e.status == 'False')': no such attribute(s): \
                     status.conditions",
            ),
        ),
        (
            "status without conditions, with inProgress",
            full(ready_current, not_observed, ready_failed),
            json!({"status": {}}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type \
                     == 'Ready').all(e, e.status == 'False')': no such key: conditions",
            ),
        ),
        (
            "status without conditions, without inProgress",
            full(ready_current, "", ready_failed),
            json!({"status": {}}),
            Err(
                "failed to evaluate the CEL expression 'status.conditions.filter(e, e.type \
                     == 'Ready').all(e, e.status == 'False')': no such key: conditions",
            ),
        ),
        (
            "empty conditions, with inProgress",
            full(ready_current, not_observed, ready_failed),
            json!({"status": {"conditions": []}}),
            Ok(Status::Failed),
        ),
        (
            "empty conditions, without inProgress",
            full(ready_current, "", ready_failed),
            json!({"status": {"conditions": []}}),
            Ok(Status::Failed),
        ),
        (
            "observedGeneration behind, with inProgress",
            full(ready_current, not_observed, ready_failed),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "observedGeneration behind, without inProgress",
            full(ready_current, "", ready_failed),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}),
            Ok(Status::InProgress),
        ),
        (
            "a string observedGeneration is left to the expressions",
            check(
                "example.com/v1",
                Some("Thing"),
                "status.observedGeneration == '2'",
            ),
            json!({"metadata": {"generation": 2}, "status": {"observedGeneration": "2"}}),
            Ok(Status::Current),
        ),
        (
            "a string generation is left to the expressions",
            check(
                "example.com/v1",
                Some("Thing"),
                "metadata.generation == '2'",
            ),
            json!({"metadata": {"generation": "2"}, "status": {"observedGeneration": 2}}),
            Ok(Status::Current),
        ),
        (
            "a non-boolean result",
            check("example.com/v1", Some("Thing"), "'some-value'"),
            json!({}),
            Err("failed to evaluate CEL expression as boolean: ''some-value''"),
        ),
        (
            "a non-boolean field",
            check("example.com/v1", Some("Thing"), "foo.bar"),
            json!({"foo": {"bar": "baz"}}),
            Err("failed to evaluate CEL expression as boolean: 'foo.bar'"),
        ),
        (
            "a null field is not a boolean",
            check("example.com/v1", Some("Thing"), "foo"),
            json!({"foo": null}),
            Err("failed to evaluate CEL expression as boolean: 'foo'"),
        ),
        (
            "a missing variable",
            check("example.com/v1", Some("Thing"), "foo"),
            json!({}),
            Err("failed to evaluate the CEL expression 'foo': no such attribute(s): foo"),
        ),
        (
            "a non-boolean inProgress stops the evaluation",
            full("true", "1", "true"),
            json!({}),
            Err("failed to evaluate CEL expression as boolean: '1'"),
        ),
    ];
    for (name, check, object, want) in cases {
        let got = eval(check, object);
        match want {
            Ok(status) => assert_eq!(got, Ok(Assessment::new(status, "")), "{name}"),
            Err(message) => assert_eq!(
                got.map_err(|e| e.to_string()),
                Err(message.to_string()),
                "{name}"
            ),
        }
    }
}

/// The expressions of Flux's documentation and CEL cheatsheet.
#[test]
fn documented_expressions() {
    let ready = |status: &str| json!({"conditions": [{"type": "Ready", "status": status}]});
    let failed_ready = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')";
    let current_ready = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')";
    let entry =
        |api_version: &str, kind: Option<&str>, failed: &str, current: &str| CustomHealthCheck {
            api_version: api_version.to_string(),
            kind: kind.map(str::to_string),
            current: current.to_string(),
            in_progress: None,
            failed: Some(failed.to_string()),
        };
    // An entry judged by the Ready condition.
    let ready_entry =
        |api_version: &str, kind: &str| entry(api_version, Some(kind), failed_ready, current_ready);
    let object = |api_version: &str, kind: &str, status: Value| {
        json!({"apiVersion": api_version, "kind": kind,
                   "metadata": {"name": "x", "generation": 3}, "status": status})
    };
    let synced = |status: &str| json!({"conditions": [{"type": "Synced", "status": status}]});
    let sealed_secret = entry(
        "bitnami.com/v1alpha1",
        Some("SealedSecret"),
        "status.conditions.filter(e, e.type == 'Synced').all(e, e.status == 'False')",
        "status.conditions.filter(e, e.type == 'Synced').all(e, e.status == 'True')",
    );
    let ceph_health = |health: &str| json!({"ceph": {"health": health}});
    let ceph_cluster = entry(
        "ceph.rook.io/v1",
        Some("CephCluster"),
        "status.ceph.health == 'HEALTH_ERR'",
        "status.ceph.health == 'HEALTH_OK'",
    );
    let has_attribute = entry(
        "example.com/v1",
        Some("Thing"),
        "false",
        "has(status.attribute) && status.attribute.ready",
    );
    let cases: Vec<(&str, CustomHealthCheck, Value, Status)> = vec![
        (
            "SealedSecret synced",
            sealed_secret.clone(),
            object("bitnami.com/v1alpha1", "SealedSecret", synced("True")),
            Status::Current,
        ),
        (
            "SealedSecret not synced",
            sealed_secret.clone(),
            object("bitnami.com/v1alpha1", "SealedSecret", synced("False")),
            Status::Failed,
        ),
        (
            "cert-manager Certificate ready",
            ready_entry("cert-manager.io/v1", "Certificate"),
            object(
                "cert-manager.io/v1",
                "Certificate",
                json!({"conditions": [
                        {"type": "Ready", "status": "True", "reason": "Ready",
                         "message": "Certificate is up to date and has not expired"},
                        {"type": "Issuing", "status": "False"}],
                        "notAfter": "2026-04-01T00:00:00Z"}),
            ),
            Status::Current,
        ),
        (
            "cert-manager Certificate issuing",
            CustomHealthCheck {
                in_progress: Some(
                    "status.conditions.exists(e, e.type == 'Issuing' && e.status == 'True')"
                        .to_string(),
                ),
                ..ready_entry("cert-manager.io/v1", "Certificate")
            },
            object(
                "cert-manager.io/v1",
                "Certificate",
                json!({"conditions": [
                        {"type": "Ready", "status": "False"},
                        {"type": "Issuing", "status": "True"}]}),
            ),
            Status::InProgress,
        ),
        (
            "ClusterIssuer failed",
            ready_entry("cert-manager.io/v1", "ClusterIssuer"),
            object("cert-manager.io/v1", "ClusterIssuer", ready("False")),
            Status::Failed,
        ),
        (
            "ClusterIssuer ready",
            ready_entry("cert-manager.io/v1", "ClusterIssuer"),
            object("cert-manager.io/v1", "ClusterIssuer", ready("True")),
            Status::Current,
        ),
        (
            "ClusterIssuer unknown",
            ready_entry("cert-manager.io/v1", "ClusterIssuer"),
            object("cert-manager.io/v1", "ClusterIssuer", ready("Unknown")),
            Status::InProgress,
        ),
        (
            "Cluster API Cluster",
            ready_entry("cluster.x-k8s.io/v1beta1", "Cluster"),
            object("cluster.x-k8s.io/v1beta1", "Cluster", ready("True")),
            Status::Current,
        ),
        (
            "Flux HelmRelease, Ready condition",
            CustomHealthCheck {
                in_progress: Some(
                    "status.conditions.exists(e, e.type == 'Reconciling' && e.status == \
                         'True')"
                        .to_string(),
                ),
                ..ready_entry("helm.toolkit.fluxcd.io/v2", "HelmRelease")
            },
            object(
                "helm.toolkit.fluxcd.io/v2",
                "HelmRelease",
                json!({"observedGeneration": 3, "conditions": [
                        {"type": "Reconciling", "status": "True"},
                        {"type": "Ready", "status": "Unknown"}]}),
            ),
            Status::InProgress,
        ),
        (
            "CephCluster healthy",
            ceph_cluster.clone(),
            object("ceph.rook.io/v1", "CephCluster", ceph_health("HEALTH_OK")),
            Status::Current,
        ),
        (
            "CephCluster warning",
            ceph_cluster.clone(),
            object("ceph.rook.io/v1", "CephCluster", ceph_health("HEALTH_WARN")),
            Status::InProgress,
        ),
        (
            "Crossplane Role reconcile error",
            entry(
                "iam.aws.crossplane.io/v1beta1",
                Some("Role"),
                "status.conditions.filter(e, e.type == 'Synced').all(e, e.status == 'False' \
                     && e.reason == 'ReconcileError')",
                current_ready,
            ),
            object(
                "iam.aws.crossplane.io/v1beta1",
                "Role",
                json!({"conditions": [
                        {"type": "Synced", "status": "False", "reason": "ReconcileError"},
                        {"type": "Ready", "status": "False"}]}),
            ),
            Status::Failed,
        ),
        (
            "phase",
            entry(
                "mongodbcommunity.mongodb.com/v1",
                Some("MongoDBCommunity"),
                "status.phase == 'Failed'",
                "status.phase == 'Running'",
            ),
            object(
                "mongodbcommunity.mongodb.com/v1",
                "MongoDBCommunity",
                json!({"phase": "Running"}),
            ),
            Status::Current,
        ),
        (
            "has() guards a missing field",
            has_attribute.clone(),
            object("example.com/v1", "Thing", json!({})),
            Status::InProgress,
        ),
        (
            "has() on a present field",
            has_attribute.clone(),
            object(
                "example.com/v1",
                "Thing",
                json!({"attribute": {"ready": true}}),
            ),
            Status::Current,
        ),
    ];
    for (name, check, object, want) in cases {
        let exprs = HealthCheckExprs::new(&[check]).unwrap();
        let got = exprs.evaluate(&object).expect("covered").map(|a| a.status);
        assert_eq!(got, Ok(want), "{name}");
    }

    // A group-only entry, with the observedGeneration of the conditions.
    let exprs = HealthCheckExprs::new(&[entry(
        "fluxcd.controlplane.io/v1",
        None,
        "status.conditions.exists(e, e.type == 'Stalled' && e.status == 'True' && \
             e.observedGeneration == metadata.generation)",
        "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True' && \
             e.observedGeneration == metadata.generation)",
    )])
    .unwrap();
    for (status, want) in [
        (
            json!({"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}]}),
            Status::Current,
        ),
        (
            json!({"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]}),
            Status::InProgress,
        ),
        (
            json!({"conditions": [
                    {"type": "Stalled", "status": "True", "observedGeneration": 2},
                    {"type": "Ready", "status": "False", "observedGeneration": 2}]}),
            Status::Failed,
        ),
    ] {
        let got = exprs
            .evaluate(&flux_instance(status.clone(), 2))
            .unwrap()
            .map(|a| a.status);
        assert_eq!(got, Ok(want), "{status}");
    }
}

/// What the environment offers beyond the standard library: each expression must be true.
#[test]
fn environment() {
    let object = json!({
        "metadata": {"name": "web-abc12", "annotations": {"example.com/revision": "7"}},
        "spec": {"secret": "aGk="},
        "status": {"replicas": 2, "ratio": 0.5, "big": 9223372036854775808u64,
                   "phases": ["Ready", "Synced"], "time": "2024-01-01T00:00:00Z",
                   "conditions": [{"type": "Ready", "status": "True"}]}
    });
    for expression in [
        // strings
        "metadata.name.startsWith('web-') && metadata.name.endsWith('12')",
        "metadata.name.split('-')[0].upperAscii() == 'WEB'",
        "metadata.name.indexOf('-') == 3 && metadata.name.substring(4) == 'abc12'",
        "metadata.name.replace('-', '_') == 'web_abc12'",
        "'  x '.trim() == 'x' && ['a', 'b'].join(',') == 'a,b'",
        "metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name.contains('abc') && size(metadata.name) == 9",
        "metadata.annotations['example.com/revision'] == '7'",
        // encoders
        "base64.decode(spec.secret) == b'hi' && base64.encode(b'hi') == spec.secret",
        // sets
        "sets.contains(status.phases, ['Synced'])",
        "!sets.contains(status.phases, ['Stalled'])",
        "sets.equivalent(status.phases, ['Synced', 'Ready', 'Ready'])",
        "sets.intersects(status.phases, ['Stalled', 'Ready'])",
        "!sets.intersects(status.phases, [])",
        "sets.contains([1, 2.0], [2, 1u])",
        // optional types
        "status.?missing.orValue('none') == 'none'",
        "!status.?missing.hasValue() && status.?replicas.hasValue()",
        "optional.of(1).value() == 1",
        // numbers: integers are int, cross-type comparisons
        "status.replicas == 2 && status.replicas > 1.5 && status.ratio < 1",
        "status.big > 9.0e18 && type(status.big) == double",
        "type(status.replicas) == int && type(status.ratio) == double",
        // timestamps and durations
        "timestamp(status.time) < timestamp('2030-01-01T00:00:00Z')",
        "timestamp(status.time) + duration('1h') == timestamp('2024-01-01T01:00:00Z')",
        // macros
        "status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
        "status.conditions.exists_one(c, c.type == 'Ready')",
        "status.conditions.map(c, c.type) == ['Ready']",
        "has(status.replicas) && !has(status.nothing) && has(metadata.annotations)",
        // a repeated map key keeps the last value, as in cel-go
        "{'a': 1, 'a': 2}['a'] == 2",
        // operators short-circuit over errors
        "true || status.nothing",
        "!(false && status.nothing)",
    ] {
        let got = eval(
            check("example.com/v1", Some("Thing"), expression),
            object.clone(),
        );
        assert_eq!(
            got,
            Ok(Assessment::new(Status::Current, "")),
            "{expression}"
        );
    }
}

#[test]
fn evaluation_errors() {
    let object = json!({"status": {"replicas": 2, "name": "a", "list": [1]}});
    for (expression, reason) in [
        ("nothing.field", "no such attribute(s): nothing.field"),
        ("has(data.foo.bar)", "no such attribute(s): data.foo.bar"),
        ("data['foo'].bar == 1", "no such attribute(s): data.foo.bar"),
        ("status.nothing", "no such key: nothing"),
        ("status.list[3] == 1", "index out of bounds: 3"),
        ("status.replicas / 0 == 1", "division by zero"),
        ("status.replicas % 0 == 1", "modulus by zero"),
        (
            "status.replicas + 1u == 3",
            "unsupported binary operator 'add' on int and uint",
        ),
        (
            "status.name < 1",
            "found no matching overload for '_<_' applied to '(string, int)'",
        ),
        (
            "status.name.startsWith(1)",
            "found no matching overload for 'startsWith' applied to 'string.(int)'",
        ),
        ("nofunction(1)", "undeclared reference to 'nofunction'"),
        (
            "[1].exists(e, e == missing.x)",
            "no such attribute(s): missing.x",
        ),
        (
            "[1].map(other, other + 1) == other.b",
            "no such attribute(s): other.b",
        ),
        (
            "status.replicas == 2 ? other.a : true",
            "no such attribute(s): other.a",
        ),
        ("first.a || second.b", "no such attribute(s): first.a"),
        (
            "status.replicas == 2 && (true && later.x)",
            "no such attribute(s): later.x",
        ),
    ] {
        let got = eval(
            check("example.com/v1", Some("Thing"), expression),
            object.clone(),
        );
        assert_eq!(
            got.map_err(|e| e.to_string()),
            Err(format!(
                "failed to evaluate the CEL expression '{expression}': {reason}"
            )),
            "{expression}"
        );
    }
}

#[test]
fn shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<HealthCheckExprs>();
}
