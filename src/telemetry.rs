//! Logging set-up: JSON lines as Flux's controllers write them (the default), or readable
//! console text, at the `--log-level` given.
//!
//! A JSON line carries `level`, `ts`, `msg`, then the fields of the reconcile it belongs to
//! (`controller`, `controllerGroup`, `controllerKind`, `Kustomization`, `name`, `namespace`,
//! `reconcileID`, as controller-runtime adds them) and the event's own fields (`revision`,
//! `error`, ...), so that log queries written for Flux's controller keep working.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::api::names::GROUP;
use crate::flags::LogEncoding;

/// The name of the span each reconcile runs in; see [`reconcile_span`].
const RECONCILE_SPAN: &str = "reconcile";

/// A log level that is not one of trace, debug, info, warn, error.
#[derive(Debug, thiserror::Error)]
#[error("invalid --log-level {0:?}: expected trace, debug, info, warn or error")]
pub struct InvalidLogLevel(String);

/// Installs the global tracing subscriber. `RUST_LOG`, when set, refines the level.
pub fn init(level: &str, encoding: LogEncoding) -> Result<(), InvalidLogLevel> {
    let level = match level.to_ascii_lowercase().as_str() {
        l @ ("trace" | "debug" | "info" | "warn" | "error") => l.to_string(),
        _ => return Err(InvalidLogLevel(level.to_string())),
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{level},hyper=warn,tower=warn,rustls=warn")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match encoding {
        LogEncoding::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(FluxJson)
            .init(),
        LogEncoding::Console => builder.init(),
    }
    Ok(())
}

/// The span a reconcile of Kustomization `namespace/name` runs in: every line it logs
/// carries the fields controller-runtime gives a reconcile's log lines, with a fresh
/// `reconcileID`.
pub fn reconcile_span(namespace: &str, name: &str) -> tracing::Span {
    tracing::info_span!(
        RECONCILE_SPAN,
        controller = crate::metrics::CONTROLLER_NAME,
        controllerGroup = GROUP,
        controllerKind = "Kustomization",
        name,
        namespace,
        reconcileID = %uuid::Builder::from_random_bytes(rand::random()).into_uuid(),
    )
}

/// Formats events as Flux's controllers (zap's JSON encoder) write them.
struct FluxJson;

impl<S, N> FormatEvent<S, N> for FluxJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = EventFields::default();
        event.record(&mut fields);
        let reconcile = ctx.event_scope().and_then(|scope| {
            scope
                .from_root()
                .filter(|span| span.name() == RECONCILE_SPAN)
                .last()
                .and_then(|span| {
                    let extensions = span.extensions();
                    let formatted = extensions.get::<FormattedFields<N>>()?;
                    serde_json::from_str::<Map<String, Value>>(formatted).ok()
                })
        });
        let line = flux_line(
            *event.metadata().level(),
            &timestamp(),
            fields,
            reconcile.unwrap_or_default(),
        );
        writeln!(writer, "{}", Value::Object(line))
    }
}

/// The line's fields in Flux's order: level, ts, msg, the reconcile's, the event's.
fn flux_line(
    level: Level,
    ts: &str,
    event: EventFields,
    reconcile: Map<String, Value>,
) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("level".into(), zap_level(level).into());
    line.insert("ts".into(), ts.into());
    line.insert("msg".into(), event.message.unwrap_or_default().into());
    let mut fields = event.fields;
    // Lines logged outside a reconcile name their Kustomization with these two fields.
    let name = reconcile
        .get("name")
        .cloned()
        .or_else(|| fields.remove("kustomization"));
    let namespace = reconcile
        .get("namespace")
        .cloned()
        .or_else(|| fields.get("namespace").cloned());
    fields.remove("kustomization");
    for (key, value) in reconcile {
        if key == "name"
            && let Some(namespace) = &namespace
        {
            line.insert(
                "Kustomization".into(),
                serde_json::json!({"name": value, "namespace": namespace}),
            );
        }
        line.insert(key, value);
    }
    if !line.contains_key("name")
        && let Some(name) = name
    {
        line.insert(
            "Kustomization".into(),
            serde_json::json!({"name": name, "namespace": namespace.clone().unwrap_or_default()}),
        );
        line.insert("name".into(), name);
    }
    for (key, value) in fields {
        line.entry(key).or_insert(value);
    }
    line
}

/// zap's level names; tracing's trace is zap's debug.
fn zap_level(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG | Level::TRACE => "debug",
    }
}

/// Now, as zap's ISO 8601 encoder writes it: UTC, milliseconds.
fn timestamp() -> String {
    format!("{:.3}", k8s_openapi::jiff::Timestamp::now())
}

/// An event's message and other fields.
#[derive(Default)]
struct EventFields {
    message: Option<String>,
    fields: Map<String, Value>,
}

impl EventFields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
        } else {
            self.fields.insert(field.name().to_string(), value);
        }
    }
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("capture lock").extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn lines_of(log: impl FnOnce()) -> Vec<Map<String, Value>> {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .fmt_fields(JsonFields::new())
            .event_format(FluxJson)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        let text =
            String::from_utf8(captured.0.lock().expect("capture lock").clone()).expect("utf-8 log");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
            .collect()
    }

    #[test]
    fn lines_of_a_reconcile_carry_controller_runtime_fields() {
        let lines = lines_of(|| {
            let span = reconcile_span("flux-system", "apps");
            let _entered = span.enter();
            tracing::info!(
                kustomization = "apps",
                namespace = "flux-system",
                revision = "main@sha1:abc",
                "server-side apply completed"
            );
            tracing::error!(error = "boom", "Reconciliation failed");
        });
        let line = &lines[0];
        let keys: Vec<&str> = line.keys().map(String::as_str).collect();
        assert_eq!(keys[..3], ["level", "ts", "msg"], "zap's order: {line:?}");
        assert_eq!(line["level"], "info");
        assert_eq!(line["msg"], "server-side apply completed");
        assert_eq!(line["controller"], "kustomization");
        assert_eq!(line["controllerGroup"], "kustomize.toolkit.fluxcd.io");
        assert_eq!(line["controllerKind"], "Kustomization");
        assert_eq!(
            line["Kustomization"],
            serde_json::json!({"name": "apps", "namespace": "flux-system"})
        );
        assert_eq!(line["name"], "apps");
        assert_eq!(line["namespace"], "flux-system");
        assert_eq!(line["revision"], "main@sha1:abc");
        assert!(!line.contains_key("kustomization"), "{line:?}");
        let id = line["reconcileID"].as_str().expect("reconcileID");
        assert_eq!(id.len(), 36, "a UUID: {id}");
        assert_eq!(lines[1]["level"], "error");
        assert_eq!(lines[1]["error"], "boom");
        assert_eq!(
            lines[1]["reconcileID"], line["reconcileID"],
            "one ID per reconcile"
        );
        let ts = line["ts"].as_str().expect("ts");
        assert!(
            ts.ends_with('Z') && ts.len() == "2026-11-26T13:30:19.439Z".len(),
            "{ts}"
        );
    }

    #[test]
    fn lines_outside_a_reconcile_name_their_kustomization_as_flux_does() {
        let lines = lines_of(|| {
            tracing::warn!(
                kustomization = "apps",
                namespace = "team-a",
                "reconcile failed"
            );
            tracing::debug!(count = 3, "started");
        });
        assert_eq!(lines[0]["level"], "warn");
        assert_eq!(lines[0]["name"], "apps");
        assert_eq!(
            lines[0]["Kustomization"],
            serde_json::json!({"name": "apps", "namespace": "team-a"})
        );
        assert_eq!(lines[1]["level"], "debug");
        assert_eq!(lines[1]["count"], 3);
        assert!(!lines[1].contains_key("name"));
    }
}
