//! Where a SPIFFE endpoint listens: `unix:///path` or `tcp://host:port`, the URIs of
//! `SPIFFE_ENDPOINT_SOCKET` and of a SPIFFE Broker endpoint.

use std::fmt;
use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream a gRPC connection runs over.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// A SPIFFE endpoint's address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix domain socket at this absolute path.
    Unix(PathBuf),
    /// A TCP listener at `host:port`.
    Tcp(String),
}

/// Why an address is not a SPIFFE endpoint URI.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("'{address}' is not a SPIFFE endpoint address: {why}")]
pub struct EndpointError {
    address: String,
    why: &'static str,
}

impl Endpoint {
    /// Parses `unix:///absolute/path` or `tcp://host:port` (no path, query or user info).
    pub fn parse(address: &str) -> Result<Endpoint, EndpointError> {
        let fail = |why| EndpointError {
            address: address.to_owned(),
            why,
        };
        if let Some(path) = address.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(fail(
                    "a unix:// address must have an absolute path and no host",
                ));
            }
            if path.contains(['?', '#']) {
                return Err(fail("a unix:// address must have no query or fragment"));
            }
            return Ok(Endpoint::Unix(PathBuf::from(path)));
        }
        if let Some(authority) = address.strip_prefix("tcp://") {
            if authority.contains(['/', '?', '#', '@']) {
                return Err(fail(
                    "a tcp:// address must be only host:port (no path, query or user info)",
                ));
            }
            match authority.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                    return Ok(Endpoint::Tcp(authority.to_owned()));
                }
                _ => return Err(fail("a tcp:// address must have a host and a port")),
            }
        }
        Err(fail("the scheme must be unix or tcp"))
    }

    /// Opens a connection to the endpoint.
    pub async fn connect(&self) -> std::io::Result<Box<dyn Io>> {
        Ok(match self {
            #[cfg(unix)]
            Endpoint::Unix(path) => Box::new(tokio::net::UnixStream::connect(path).await?),
            #[cfg(not(unix))]
            Endpoint::Unix(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "unix sockets are not supported on this platform",
                ));
            }
            Endpoint::Tcp(authority) => {
                let stream = tokio::net::TcpStream::connect(authority.as_str()).await?;
                stream.set_nodelay(true)?;
                Box::new(stream)
            }
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix://{}", path.display()),
            Endpoint::Tcp(authority) => write!(f, "tcp://{authority}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_unix_and_tcp_addresses() {
        assert_eq!(
            Endpoint::parse("unix:///run/spire/agent.sock"),
            Ok(Endpoint::Unix(PathBuf::from("/run/spire/agent.sock")))
        );
        assert_eq!(
            Endpoint::parse("tcp://127.0.0.1:8081"),
            Ok(Endpoint::Tcp("127.0.0.1:8081".into()))
        );
        let endpoint = Endpoint::parse("tcp://broker.flux-system:8443").expect("valid");
        assert_eq!(endpoint.to_string(), "tcp://broker.flux-system:8443");
    }

    #[test]
    fn refuses_other_addresses() {
        for bad in [
            "/run/agent.sock",
            "unix://run/agent.sock",
            "tcp://127.0.0.1",
            "tcp://127.0.0.1:80/x",
            "http://127.0.0.1:80",
        ] {
            let error = Endpoint::parse(bad).expect_err(bad);
            assert!(error.to_string().contains(bad), "{error}");
        }
    }
}
