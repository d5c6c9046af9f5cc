//! Logging set-up: JSON (Flux's default) or console text, at the `--log-level` given.

use tracing_subscriber::EnvFilter;

use crate::flags::LogEncoding;

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
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
        LogEncoding::Console => builder.init(),
    }
    Ok(())
}
