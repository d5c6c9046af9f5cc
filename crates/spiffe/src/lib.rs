#![doc = include_str!("../README.md")]

pub mod broker;
pub mod endpoint;
pub mod grpc;
pub mod id;
mod proto;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tls;
pub mod x509;

pub use broker::{Broker, BrokerConfigError, BrokerError, KubernetesObject};
pub use endpoint::Endpoint;
pub use id::{SpiffeId, SpiffeIdError};
pub use tls::{PeerError, client_config};
pub use x509::{SOCKET_ENV, SourceError, X509Context, X509Source};
