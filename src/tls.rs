//! The HTTPS connector of every outgoing connection that is not to the Kubernetes API
//! (artifact downloads, event forwarding, key services): defined once, in the key services
//! crate, which makes the most of these connections.

pub use keyservice::tls::https_connector;
