//! Minimal HTTP/1.1 servers on 127.0.0.1 for the tests: one answering from a function,
//! `git http-backend` behind a CGI bridge, and one that accepts and never answers.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request as the handler sees it.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path without the query.
    pub path: String,
    pub query: String,
    /// Header names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// A response; `Connection: close` is added, and `Content-Length` unless `no_length`.
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Sends the body without a length, ended by closing the connection.
    pub no_length: bool,
}

impl Response {
    pub fn new(status: u16, reason: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            reason: reason.to_string(),
            headers: Vec::new(),
            body: body.into(),
            no_length: false,
        }
    }
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// A request as the log keeps it.
#[derive(Debug, Clone)]
pub struct Logged {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Vec<u8>,
}

/// A server answering each request with a handler, one connection per request.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<Logged>>>,
}

impl Server {
    /// Starts a server on a free port of 127.0.0.1.
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = Arc::new(Mutex::new(Vec::new()));
        let stopping = stop.clone();
        let logging = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let handler = handler.clone();
                let log = logging.clone();
                std::thread::spawn(move || serve(stream, &*handler, &log));
            }
        });
        Server { addr, stop, log }
    }

    /// The requests served so far, and forgets them.
    pub fn take_log(&self) -> Vec<Logged> {
        std::mem::take(&mut *self.log.lock().expect("log lock"))
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn serve(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Logged>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
    let Some(request) = read_request(&mut reader) else {
        return;
    };
    log.lock().expect("log lock").push(Logged {
        method: request.method.clone(),
        path: request.path.clone(),
        query: request.query.clone(),
        body: request.body.clone(),
    });
    let response = handler(&request);
    let mut out = stream;
    let mut head = format!("HTTP/1.1 {} {}\r\n", response.status, response.reason);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !response.no_length {
        head.push_str(&format!("Content-Length: {}\r\n", response.body.len()));
    }
    head.push_str("Connection: close\r\n\r\n");
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&response.body);
    let _ = out.flush();
}

fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = headers.get("content-length") {
        body = vec![0; len.parse().ok()?];
        reader.read_exact(&mut body).ok()?;
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };
    Some(Request {
        method,
        path,
        query,
        headers,
        body,
    })
}

/// Serves the repositories under `root` as `git http-backend` does behind a web server,
/// at `http://127.0.0.1:PORT/<name>`. With `v2`, the client's `Git-Protocol` header is
/// passed on (protocol v2); without, the server speaks protocol v0.
pub fn git_server(root: &Path, v2: bool) -> Server {
    let root = root.to_path_buf();
    Server::start(move |request| git_backend(&root, v2, request))
}

/// Answers `request` with `git http-backend` serving the repositories under `root`.
pub fn git_backend(root: &PathBuf, v2: bool, request: &Request) -> Response {
    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(t) = request.headers.get("content-type") {
        cmd.env("CONTENT_TYPE", t);
    }
    if let Some(e) = request.headers.get("content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", e);
    }
    if v2 && let Some(p) = request.headers.get("git-protocol") {
        cmd.env("GIT_PROTOCOL", p);
    }
    let mut child = cmd.spawn().expect("git http-backend");
    let mut stdin = child.stdin.take().expect("stdin");
    let body = request.body.clone();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_end(&mut output)
        .expect("read cgi output");
    let _ = child.wait();
    let _ = feeder.join();
    cgi_response(&output)
}

/// Splits a CGI answer into a response: headers up to the blank line, `Status:` read.
fn cgi_response(output: &[u8]) -> Response {
    let (head_end, body_start) = find_blank_line(output).unwrap_or((output.len(), output.len()));
    let head = String::from_utf8_lossy(&output[..head_end]);
    let mut response = Response::new(200, "OK", output[body_start..].to_vec());
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let (code, reason) = value.split_once(' ').unwrap_or((value, ""));
            response.status = code.parse().unwrap_or(500);
            response.reason = reason.to_string();
        } else {
            response.headers.push((name.to_string(), value.to_string()));
        }
    }
    response
}

fn find_blank_line(data: &[u8]) -> Option<(usize, usize)> {
    for i in 0..data.len() {
        if data[i..].starts_with(b"\r\n\r\n") {
            return Some((i, i + 4));
        }
        if data[i..].starts_with(b"\n\n") {
            return Some((i, i + 2));
        }
    }
    None
}

/// A pkt-line `ERR` answer to a fetch, as a server refusing a want sends it.
pub fn git_error(message: &str) -> Response {
    let line = format!("ERR {message}\n");
    let mut response = Response::new(200, "OK", format!("{:04x}{line}", line.len() + 4));
    response.headers.push((
        "Content-Type".to_string(),
        "application/x-git-upload-pack-result".to_string(),
    ));
    response
}

/// A server that accepts connections and never reads or answers, for `lifetime` (after
/// which it closes them all and stops).
pub struct HangingServer {
    pub addr: SocketAddr,
    closed: Arc<AtomicBool>,
}

impl HangingServer {
    /// Whether the server is still holding its connections open, silent: a client that gave
    /// up while this holds did so by its own timeout, not because the server hung up.
    pub fn still_silent(&self) -> bool {
        !self.closed.load(Ordering::SeqCst)
    }
}

/// Starts a [`HangingServer`] that stays silent for `lifetime`.
pub fn hanging_server(lifetime: Duration) -> HangingServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("addr");
    let closed = Arc::new(AtomicBool::new(false));
    let server_closed = Arc::clone(&closed);
    std::thread::spawn(move || {
        let end = Instant::now() + lifetime;
        let mut held = Vec::new();
        while Instant::now() < end {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        // Flagged before the connections are closed: a client that still sees the flag down
        // has not been hung up on.
        server_closed.store(true, Ordering::SeqCst);
        drop(held);
    });
    HangingServer { addr, closed }
}
