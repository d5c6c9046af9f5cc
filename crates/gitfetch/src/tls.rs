//! The TLS crypto provider of the HTTP clients.

use std::sync::Once;

/// Makes ring the process's default rustls provider unless one is installed already
/// (reqwest is built without a provider of its own, to avoid a second one in the binary).
pub(crate) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means another provider is already the default, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
