//! Event forwarding (`--events-addr`) against a local receiver that decodes with the schema of
//! fluxcd/pkg apis/event v0.32.0 v1 (`support/event_receiver.rs`): the payload, plain HTTP
//! and HTTPS with a CA the test provides, and Flux's delivery policy (retries on 5xx and
//! timeouts with doubling waits, a 503's `Retry-After`, no retry on 429, 4xx or an untrusted
//! certificate). No cluster is needed: events are built from in-memory objects.
#[path = "support/event_receiver.rs"]
mod event_receiver;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use event_receiver::{Answer, EventSeverity, FluxEvent, Receiver, TestCa};
use kustomize_controller::api::Kustomization;
use kustomize_controller::controller::events::{
    self, Action, Delivery, EventPayload, ForwardError, Forwarder, InvolvedObject, Notice,
    Reference, RetryPolicy, Severity,
};

/// Flux's policy with the waits and the timeout scaled down.
const FAST: RetryPolicy = RetryPolicy {
    max_retries: 4,
    wait_min: Duration::from_millis(50),
    wait_max: Duration::from_millis(1500),
    attempt_timeout: Duration::from_millis(700),
};

fn kustomization() -> Kustomization {
    let mut ks = Kustomization::new("app", Default::default());
    ks.metadata.namespace = Some("apps".into());
    ks.metadata.uid = Some("5f0c-ks".into());
    ks.metadata.resource_version = Some("1234".into());
    ks.metadata.annotations = Some(
        [(
            "event.toolkit.fluxcd.io/token".to_string(),
            "t-1".to_string(),
        )]
        .into(),
    );
    ks
}

fn source() -> Reference {
    Reference {
        kind: "GitRepository".into(),
        namespace: "flux-system".into(),
        name: "repo".into(),
        uid: "9a1e-src".into(),
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        resource_version: "77".into(),
    }
}

fn payload(related: Option<&Reference>) -> EventPayload {
    let ks = InvolvedObject::of(&kustomization());
    let metadata = events::metadata(&ks, Some("main@sha1:0123"), None, true);
    let notice = Notice {
        severity: Severity::Info,
        action: Action::Reconcile,
        reason: "ReconciliationSucceeded",
        message: "Reconciliation finished in 1.2s, next run in 10m0s",
        metadata,
        related,
    };
    EventPayload::new(
        &ks,
        &notice,
        &events::reporter("kustomize-controller-7d9f-abcde".into()),
    )
}

/// A forwarder over plain HTTP, naming itself as the controller's does.
fn plain_forwarder(receiver: &Receiver) -> Forwarder {
    Forwarder::with_tls(
        &receiver.url("127.0.0.1"),
        FAST,
        TestCa::new().client_config(),
    )
    .expect("a forwarder")
    .with_user_agent(events::USER_AGENT)
}

/// Runs `future` on a fresh runtime (each test is synchronous around the receiver threads).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

#[test]
fn events_reach_an_http_receiver_in_fluxs_schema() {
    let receiver = Receiver::http();
    let forwarder = plain_forwarder(&receiver);
    let related = source();
    let delivered = block_on(async {
        (
            forwarder.post(&payload(Some(&related))).await,
            forwarder.post(&payload(None)).await,
        )
    });
    assert_eq!(
        delivered.0.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );
    assert_eq!(
        delivered.1.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );

    let received = receiver.received();
    assert_eq!(received.len(), 2, "one request per event: {received:?}");
    for request in &received {
        assert_eq!(request.request_line, "POST / HTTP/1.1");
        assert_eq!(
            request.headers.get("content-type").map(String::as_str),
            Some("application/json")
        );
        assert!(
            request
                .headers
                .get("user-agent")
                .is_some_and(|ua| ua.starts_with("kustomize-controller/")),
            "{:?}",
            request.headers
        );
    }
    let events = receiver.events();
    let with_source = &events[0];
    assert_eq!(with_source.severity, EventSeverity::Info);
    assert_eq!(with_source.action, "Reconcile");
    assert_eq!(with_source.reason, "ReconciliationSucceeded");
    assert_eq!(with_source.reporting_controller, "kustomize-controller");
    assert_eq!(
        with_source.reporting_instance.as_deref(),
        Some("kustomize-controller-7d9f-abcde")
    );
    let involved = &with_source.involved_object;
    assert_eq!(
        (
            involved.kind.as_deref(),
            involved.api_version.as_deref(),
            involved.namespace.as_deref(),
            involved.name.as_deref(),
            involved.uid.as_deref(),
            involved.resource_version.as_deref(),
            involved.field_path.as_deref(),
        ),
        (
            Some("Kustomization"),
            Some("kustomize.toolkit.fluxcd.io/v1"),
            Some("apps"),
            Some("app"),
            Some("5f0c-ks"),
            Some("1234"),
            None
        )
    );
    let related = with_source.related_object.as_ref().expect("relatedObject");
    assert_eq!(related.kind.as_deref(), Some("GitRepository"));
    assert_eq!(
        related.api_version.as_deref(),
        Some("source.toolkit.fluxcd.io/v1")
    );
    assert_eq!(related.uid.as_deref(), Some("9a1e-src"));
    let metadata: BTreeMap<String, String> = [
        ("event.toolkit.fluxcd.io/token", "t-1"),
        ("kustomize.toolkit.fluxcd.io/commit_status", "update"),
        ("kustomize.toolkit.fluxcd.io/revision", "main@sha1:0123"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(with_source.metadata.as_ref(), Some(&metadata));
    assert!(
        with_source.timestamp.ends_with('Z') && !with_source.timestamp.contains('.'),
        "metav1.Time is whole seconds in UTC: {}",
        with_source.timestamp
    );
    // Without a source the field is left out, not null.
    assert_eq!(events[1].related_object, None);
}

#[test]
fn the_schema_refuses_what_notification_controller_would_not_read() {
    let good = serde_json::to_vec(&payload(None)).expect("encode");
    assert!(FluxEvent::decode(&good).is_ok());
    let mut value: serde_json::Value = serde_json::from_slice(&good).expect("json");
    value["extra"] = serde_json::json!(1);
    assert!(
        FluxEvent::decode(value.to_string().as_bytes()).is_err(),
        "unknown field"
    );
    let mut value: serde_json::Value = serde_json::from_slice(&good).expect("json");
    value.as_object_mut().expect("object").remove("action");
    assert!(
        FluxEvent::decode(value.to_string().as_bytes()).is_err(),
        "no action"
    );
    let mut value: serde_json::Value = serde_json::from_slice(&good).expect("json");
    value["severity"] = serde_json::json!("warning");
    assert!(
        FluxEvent::decode(value.to_string().as_bytes()).is_err(),
        "severity enum"
    );
}

#[test]
fn https_receivers_are_verified_with_the_given_roots() {
    let ca = TestCa::new();
    let receiver = Receiver::https(&ca);
    for host in ["localhost", "127.0.0.1"] {
        let forwarder =
            Forwarder::with_tls(&receiver.url(host), FAST, ca.client_config()).expect("forwarder");
        let delivered = block_on(forwarder.post(&payload(Some(&source()))));
        assert_eq!(
            delivered.expect(host),
            Delivery::Answered(http::StatusCode::ACCEPTED)
        );
    }
    assert_eq!(receiver.events().len(), 2);

    // Another CA: refused at once, not retried (go-retryablehttp does not retry a
    // certificate error either).
    let stranger = TestCa::new();
    let forwarder = Forwarder::with_tls(&receiver.url("localhost"), FAST, stranger.client_config())
        .expect("forwarder");
    let before = receiver.connections();
    let refused = block_on(forwarder.post(&payload(None)));
    assert!(
        matches!(refused, Err(ForwardError::NotTrusted { .. })),
        "{refused:?}"
    );
    // The server's certificate reached the forwarder over a connection the receiver had
    // accepted: one connection is one attempt, and a retry would be another.
    assert_eq!(receiver.connections() - before, 1, "one attempt, no retry");
    assert_eq!(receiver.received().len(), 2, "nothing reached the receiver");
}

#[test]
fn server_errors_are_retried_with_doubling_waits_then_given_up() {
    let receiver = Receiver::http();
    receiver.answer(&[Answer::Status(500); 5]);
    let forwarder = plain_forwarder(&receiver);
    let outcome = block_on(forwarder.post(&payload(None)));
    match outcome {
        Err(ForwardError::GaveUp {
            attempts, ref last, ..
        }) => {
            assert_eq!(attempts, 5);
            assert!(last.contains("500"), "{last}");
        }
        other => panic!("expected to give up after 5 attempts, got {other:?}"),
    }
    let times: Vec<Instant> = receiver.received().iter().map(|r| r.at).collect();
    assert_eq!(times.len(), 5, "1 attempt and 4 retries");
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    // At least the doubling wait before each retry (sleeps never end early); the exact waits
    // are asserted on a paused clock in the flux-events crate (`forward.rs`).
    for (n, gap) in gaps.iter().enumerate() {
        let wait = FAST.wait_min * 2u32.pow(n as u32);
        assert!(
            *gap >= wait,
            "retry {n}: waited {gap:?}, expected {wait:?} (all: {gaps:?})"
        );
    }
    // Every attempt carried the same, valid event.
    assert_eq!(receiver.events().len(), 5);
}

#[test]
fn a_retried_event_is_delivered_once_the_receiver_recovers() {
    let receiver = Receiver::http();
    receiver.answer(&[Answer::Status(502), Answer::Status(500)]);
    let delivered = block_on(plain_forwarder(&receiver).post(&payload(None)));
    assert_eq!(
        delivered.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );
    assert_eq!(receiver.received().len(), 3);
}

#[test]
fn duplicates_client_errors_and_501_are_not_retried() {
    for (status, expected) in [
        (429, Delivery::Duplicate),
        (400, Delivery::Answered(http::StatusCode::BAD_REQUEST)),
        (501, Delivery::Answered(http::StatusCode::NOT_IMPLEMENTED)),
    ] {
        let receiver = Receiver::http();
        receiver.answer(&[Answer::Status(status)]);
        let delivered = block_on(plain_forwarder(&receiver).post(&payload(None)));
        assert_eq!(delivered.expect("answered"), expected, "{status}");
        assert_eq!(receiver.received().len(), 1, "{status} is not retried");
    }
}

#[test]
fn a_503_retry_after_sets_the_wait() {
    let receiver = Receiver::http();
    receiver.answer(&[Answer::RetryAfter(503, 1)]);
    let delivered = block_on(plain_forwarder(&receiver).post(&payload(None)));
    assert_eq!(
        delivered.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );
    let times: Vec<Instant> = receiver.received().iter().map(|r| r.at).collect();
    assert_eq!(times.len(), 2);
    let gap = times[1] - times[0];
    // A second, where the backoff would have waited 50 ms; exactly one second on a paused
    // clock in the flux-events crate (`forward.rs`).
    assert!(
        gap >= Duration::from_secs(1),
        "Retry-After: 1 should set the wait, not the 50 ms backoff: {gap:?}"
    );
}

#[test]
fn an_attempt_without_answer_times_out_and_is_retried() {
    let receiver = Receiver::http();
    receiver.answer(&[Answer::Stall(FAST.attempt_timeout * 3)]);
    let started = Instant::now();
    let delivered = block_on(plain_forwarder(&receiver).post(&payload(None)));
    let took = started.elapsed();
    assert_eq!(
        delivered.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );
    assert_eq!(
        receiver.received().len(),
        2,
        "the stalled attempt, then the retry"
    );
    // The first attempt was cut at the timeout, not waited out: the stalled request is
    // answered 202 once its stall ends, so a forwarder that waited it out would have been
    // delivered by it, with no second request. Between the two, the attempt's timeout and at
    // least the shortest wait passed (sleeps never end early).
    assert!(took >= FAST.attempt_timeout + FAST.wait_min, "{took:?}");
}

#[test]
fn credentials_in_the_address_are_sent_as_basic_auth() {
    let receiver = Receiver::http();
    let address = receiver
        .url("127.0.0.1")
        .replacen("http://", "http://nc:s%40cret@", 1);
    let forwarder =
        Forwarder::with_tls(&address, FAST, TestCa::new().client_config()).expect("forwarder");
    let delivered = block_on(forwarder.post(&payload(None)));
    assert_eq!(
        delivered.expect("delivered"),
        Delivery::Answered(http::StatusCode::ACCEPTED)
    );
    let received = receiver.received();
    // base64("nc:s@cret")
    assert_eq!(
        received[0].headers.get("authorization").map(String::as_str),
        Some("Basic bmM6c0BjcmV0")
    );
    assert!(
        !forwarder.address().contains("cret"),
        "{}",
        forwarder.address()
    );
}
