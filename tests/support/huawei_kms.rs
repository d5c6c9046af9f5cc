//! A local double of Huawei Cloud KMS's `encrypt-data` and `decrypt-data` (the two calls sops
//! and the controller make for `hckms` keys): the "ciphertext" is the plaintext behind a
//! marker, so a file the real sops encrypts against it is opened only through it. Every
//! request is recorded, headers lower-cased.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// One request as received.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `POST /v1.0/<project>/kms/decrypt-data`.
    pub request_line: String,
    /// `name: value` lines, lower-cased.
    pub headers: Vec<String>,
    /// The JSON body.
    pub body: serde_json::Value,
}

/// The running double.
pub struct HuaweiKms {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

const MARKER: &str = "double-kms:";

impl HuaweiKms {
    /// Starts the double on a free port, on a thread of its own.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream);
                let Some(request) = read(&mut reader) else {
                    continue;
                };
                let answer = respond(&request);
                recorded.lock().expect("lock").push(request);
                let mut stream = reader.into_inner();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        HuaweiKms { url, requests }
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }
}

fn read(reader: &mut BufReader<std::net::TcpStream>) -> Option<Recorded> {
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        headers.push(line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or_default(),
    })
}

fn respond(request: &Recorded) -> String {
    let key_id = request.body["key_id"].clone();
    if request.request_line.contains("/kms/encrypt-data") {
        let plain = request.body["plain_text"].as_str().unwrap_or_default();
        serde_json::json!({"key_id": key_id, "cipher_text": format!("{MARKER}{plain}")}).to_string()
    } else {
        let cipher = request.body["cipher_text"].as_str().unwrap_or_default();
        let plain = cipher.strip_prefix(MARKER).unwrap_or_default();
        serde_json::json!({"key_id": key_id, "plain_text": plain}).to_string()
    }
}
