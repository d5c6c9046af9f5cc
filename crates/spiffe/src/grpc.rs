//! A minimal gRPC client over HTTP/2: unary and server-streaming calls with one request
//! message, which is all the Workload API and the Broker API need of one.

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::endpoint::Io;

/// The largest message accepted (a response with many SVIDs and bundles is far smaller).
const MAX_MESSAGE: usize = 16 << 20;

/// A gRPC status code, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code(pub u32);

impl Code {
    /// The request is malformed (for the Workload API: its security header is missing).
    pub const INVALID_ARGUMENT: Code = Code(3);

    /// The code's name, as gRPC spells it.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "OK",
            1 => "Canceled",
            2 => "Unknown",
            3 => "InvalidArgument",
            4 => "DeadlineExceeded",
            5 => "NotFound",
            6 => "AlreadyExists",
            7 => "PermissionDenied",
            8 => "ResourceExhausted",
            9 => "FailedPrecondition",
            10 => "Aborted",
            11 => "OutOfRange",
            12 => "Unimplemented",
            13 => "Internal",
            14 => "Unavailable",
            15 => "DataLoss",
            16 => "Unauthenticated",
            _ => "unknown status",
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// The connection failed or broke.
    #[error("connection failed: {0}")]
    Transport(#[from] hyper::Error),
    /// The server answered with an HTTP status other than 200.
    #[error("the server answered HTTP {0}, not gRPC")]
    Http(http::StatusCode),
    /// The server ended the call with a gRPC error status.
    #[error("{} ({})", if message.is_empty() { "the call failed" } else { message.as_str() }, code.name())]
    Status {
        /// The status code.
        code: Code,
        /// The status message (`grpc-message`).
        message: String,
    },
    /// The response broke gRPC's framing.
    #[error("malformed gRPC response: {0}")]
    Protocol(&'static str),
}

/// An HTTP/2 connection gRPC calls are made on.
pub struct Channel {
    sender: SendRequest<Full<Bytes>>,
}

impl Channel {
    /// Starts HTTP/2 on `io` (the connection is driven by a spawned task until it closes).
    pub async fn handshake(io: Box<dyn Io>) -> Result<Channel, GrpcError> {
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)).await?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "gRPC connection closed");
            }
        });
        Ok(Channel { sender })
    }

    /// Whether the connection can take no more calls.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Calls `path` (`/package.Service/Method`) with `message` and the metadata `header`;
    /// the response messages are read from the returned stream.
    pub async fn call(
        &mut self,
        path: &str,
        header: (&'static str, &'static str),
        message: &[u8],
    ) -> Result<ResponseStream, GrpcError> {
        let mut framed = BytesMut::with_capacity(5 + message.len());
        framed.extend_from_slice(&[0]);
        framed.extend_from_slice(
            &u32::try_from(message.len())
                .unwrap_or(u32::MAX)
                .to_be_bytes(),
        );
        framed.extend_from_slice(message);
        let request = http::Request::post(format!("http://localhost{path}"))
            .header(http::header::CONTENT_TYPE, "application/grpc")
            .header(http::header::TE, "trailers")
            .header(header.0, header.1)
            .body(Full::new(framed.freeze()))
            .map_err(|_| GrpcError::Protocol("invalid request path"))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        if response.status() != http::StatusCode::OK {
            return Err(GrpcError::Http(response.status()));
        }
        // A response with no messages may carry its status in the headers.
        if let Some(status) = status_of(response.headers()) {
            status?;
        }
        Ok(ResponseStream {
            body: response.into_body(),
            buf: BytesMut::new(),
            finished: false,
        })
    }
}

/// The messages of one call's response.
pub struct ResponseStream {
    body: Incoming,
    buf: BytesMut,
    finished: bool,
}

impl ResponseStream {
    /// The next message; `None` when the server ended the call with OK.
    pub async fn message(&mut self) -> Result<Option<Bytes>, GrpcError> {
        loop {
            if self.buf.len() >= 5 {
                if self.buf[0] != 0 {
                    return Err(GrpcError::Protocol("compressed messages are not supported"));
                }
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                if len > MAX_MESSAGE {
                    return Err(GrpcError::Protocol("message larger than 16 MiB"));
                }
                if self.buf.len() >= 5 + len {
                    self.buf.advance(5);
                    return Ok(Some(self.buf.split_to(len).freeze()));
                }
            }
            if self.finished {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(GrpcError::Protocol("truncated message"))
                };
            }
            match self.body.frame().await {
                None => return Err(GrpcError::Protocol("the response ended without a status")),
                Some(frame) => match frame?.into_data() {
                    Ok(data) => self.buf.extend_from_slice(&data),
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            status_of(&trailers).unwrap_or(Err(GrpcError::Protocol(
                                "trailers without grpc-status",
                            )))?;
                            self.finished = true;
                        }
                    }
                },
            }
        }
    }
}

/// The call's status from `grpc-status` (and `grpc-message`), if the headers hold one.
fn status_of(headers: &http::HeaderMap) -> Option<Result<(), GrpcError>> {
    let code = headers.get("grpc-status")?;
    let code = match code.to_str().ok().and_then(|c| c.parse::<u32>().ok()) {
        Some(0) => return Some(Ok(())),
        Some(code) => Code(code),
        None => return Some(Err(GrpcError::Protocol("grpc-status is not a number"))),
    };
    let message = headers
        .get("grpc-message")
        .map(|m| percent_decode(m.as_bytes()))
        .unwrap_or_default();
    Some(Err(GrpcError::Status { code, message }))
}

/// `grpc-message` is percent-encoded UTF-8.
fn percent_decode(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match value.get(i..i + 3) {
            Some([b'%', h, l]) if hex(*h).is_some() && hex(*l).is_some() => {
                out.push((hex(*h).unwrap_or(0) * 16 + hex(*l).unwrap_or(0)) as u8);
                i += 3;
            }
            _ => {
                out.push(value[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_read_from_headers() {
        let mut headers = http::HeaderMap::new();
        assert!(status_of(&headers).is_none());
        headers.insert("grpc-status", http::HeaderValue::from_static("7"));
        headers.insert(
            "grpc-message",
            http::HeaderValue::from_static("caller%20is%20not%20a%20broker"),
        );
        let error = status_of(&headers).expect("status").expect_err("an error");
        assert_eq!(
            error.to_string(),
            "caller is not a broker (PermissionDenied)"
        );
        headers.insert("grpc-status", http::HeaderValue::from_static("0"));
        assert!(matches!(status_of(&headers), Some(Ok(()))));
    }
}
