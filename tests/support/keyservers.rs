//! Real local key services for the SOPS key-service tests: moto's server (AWS KMS and STS,
//! from PyPI, tests/keyservices/install-moto.sh) and a Vault dev server with the transit
//! engine (tests/keyservices/install-vault.sh). They start once per test binary, on free
//! ports, and stop when the test process exits (their stdin closes). Fixtures are encrypted
//! against them by the real sops.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::reference_tool;

/// moto's default account.
pub const ACCOUNT: &str = "123456789012";
/// A role moto lets anyone assume (it does not check the trust policy).
pub const ROLE: &str = "arn:aws:iam::123456789012:role/sops-decrypt";
/// The Vault dev server's root token.
pub const VAULT_TOKEN: &str = "root";

/// The running servers and the keys made on them.
pub struct KeyServers {
    _children: Vec<Child>,
    /// moto's endpoint, `http://127.0.0.1:PORT`.
    pub moto: String,
    /// A symmetric KMS key in us-east-1.
    pub kms_arn: String,
    /// A second KMS key, in eu-west-1.
    pub kms_arn_eu: String,
    /// Vault's address, `http://127.0.0.1:PORT`.
    pub vault: String,
    /// The transit key's URL for `sops --hc-vault-transit`.
    pub vault_key: String,
    /// The reference sops.
    pub sops: PathBuf,
    /// A directory for sops' HOME, with nothing of the caller's in it.
    pub home: PathBuf,
}

/// The servers of this test process, started on first use.
pub fn key_servers() -> &'static KeyServers {
    static SERVERS: OnceLock<KeyServers> = OnceLock::new();
    SERVERS.get_or_init(start)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `command` under a shell that stops it when this process's end of its stdin closes.
fn start_tied(command: &str, log: &Path) -> Child {
    let log = std::fs::File::create(log).expect("server log");
    Command::new("sh")
        .args([
            "-c",
            &format!("{command} & pid=$!; read _; kill $pid; wait $pid"),
        ])
        .stdin(Stdio::piped())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start a key server")
}

fn start() -> KeyServers {
    let moto_server = reference_tool("KC_MOTO_SERVER", "tests/keyservices/install-moto.sh");
    let vault_bin = reference_tool("KC_VAULT_BIN", "tests/keyservices/install-vault.sh");
    let sops = reference_tool("KC_SOPS_BIN", "tests/sops/install-tools.sh");
    let dir = std::env::temp_dir().join(super::unique_name("keyservers"));
    let home = dir.join("home");
    std::fs::create_dir_all(&home).expect("key server dir");

    let moto_port = free_port();
    let moto = format!("http://127.0.0.1:{moto_port}");
    let moto_child = start_tied(
        &format!("'{}' -H 127.0.0.1 -p {moto_port}", moto_server.display()),
        &dir.join("moto.log"),
    );
    let vault_port = free_port();
    let vault = format!("http://127.0.0.1:{vault_port}");
    let vault_child = start_tied(
        &format!(
            "HOME='{}' '{}' server -dev -dev-root-token-id={VAULT_TOKEN} -dev-listen-address=127.0.0.1:{vault_port}",
            home.display(),
            vault_bin.display()
        ),
        &dir.join("vault.log"),
    );
    wait_http(&moto, "GET", "/", None, &dir.join("moto.log"));
    wait_http(
        &vault,
        "GET",
        "/v1/sys/health",
        None,
        &dir.join("vault.log"),
    );

    let python = moto_server.with_file_name("python");
    let kms_arn = create_kms_key(&python, &moto, "us-east-1");
    let kms_arn_eu = create_kms_key(&python, &moto, "eu-west-1");

    let (status, body) = http(
        &vault,
        "POST",
        "/v1/sys/mounts/sops",
        Some(r#"{"type":"transit"}"#),
    );
    assert!(status / 100 == 2, "mounting transit: {status} {body}");
    let (status, body) = http(&vault, "POST", "/v1/sops/keys/firstkey", Some("{}"));
    assert!(
        status / 100 == 2,
        "creating the transit key: {status} {body}"
    );

    KeyServers {
        _children: vec![moto_child, vault_child],
        vault_key: format!("{vault}/v1/sops/keys/firstkey"),
        moto,
        kms_arn,
        kms_arn_eu,
        vault,
        sops,
        home,
    }
}

/// A KMS key made with botocore from moto's own virtualenv.
fn create_kms_key(python: &Path, endpoint: &str, region: &str) -> String {
    let script = r#"
import sys, boto3
kms = boto3.client("kms", endpoint_url=sys.argv[1], region_name=sys.argv[2],
                   aws_access_key_id="test", aws_secret_access_key="test")
print(kms.create_key(KeySpec="SYMMETRIC_DEFAULT", KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]["Arn"])
"#;
    let output = Command::new(python)
        .args(["-c", script, endpoint, region])
        .output()
        .expect("run moto's python");
    assert!(
        output.status.success(),
        "CreateKey in {region}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// One HTTP/1.0 exchange with a local server (root token sent to Vault).
pub fn http(base: &str, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let address = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connect to a key server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nX-Vault-Token: {VAULT_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn wait_http(base: &str, method: &str, path: &str, body: Option<&str>, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let ok = TcpStream::connect(base.trim_start_matches("http://")).is_ok()
            && http(base, method, path, body).0 / 100 == 2;
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{base} did not become ready; its log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl KeyServers {
    /// The environment under which sops reaches moto and Vault and nothing else.
    pub fn sops_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", self.home.display().to_string()),
            ("AWS_ENDPOINT_URL", self.moto.clone()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            (
                "AWS_CONFIG_FILE",
                self.home.join("aws-config").display().to_string(),
            ),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                self.home.join("aws-credentials").display().to_string(),
            ),
            ("VAULT_TOKEN", VAULT_TOKEN.into()),
        ]
    }

    /// `sops` with `args` under [`KeyServers::sops_env`], in `dir`; its stdout.
    pub fn sops(&self, dir: &Path, args: &[&str]) -> Vec<u8> {
        let mut command = Command::new(&self.sops);
        command
            .current_dir(dir)
            .args(["--disable-version-check"])
            .args(args)
            .env_remove("SOPS_AGE_KEY_FILE")
            .env_remove("SOPS_AGE_KEY")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_REGION");
        for (k, v) in self.sops_env() {
            command.env(k, v);
        }
        let output = command.output().expect("run sops");
        assert!(
            output.status.success(),
            "sops {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }
}

/// A second moto server with its access checks on, and a file encrypted there for its key.
pub struct DeniedKms {
    _child: Child,
    /// Its endpoint.
    pub endpoint: String,
    /// The key's ARN.
    pub kms_arn: String,
    /// The access key of user `denied`, whose policy denies `kms:Decrypt`.
    pub access_key: (String, String),
    /// A YAML file sops encrypted for the key (before the checks were turned on).
    pub file: PathBuf,
}

/// The access-checking moto server of this test process, started on first use.
pub fn denied_kms() -> &'static DeniedKms {
    static SERVER: OnceLock<DeniedKms> = OnceLock::new();
    SERVER.get_or_init(|| {
        let servers = key_servers();
        let moto_server = reference_tool("KC_MOTO_SERVER", "tests/keyservices/install-moto.sh");
        let python = moto_server.with_file_name("python");
        let dir = std::env::temp_dir().join(super::unique_name("denied-kms"));
        std::fs::create_dir_all(&dir).expect("dir");
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let child = start_tied(
            &format!("'{}' -H 127.0.0.1 -p {port}", moto_server.display()),
            &dir.join("moto.log"),
        );
        wait_http(&endpoint, "GET", "/", None, &dir.join("moto.log"));
        let kms_arn = create_kms_key(&python, &endpoint, "us-east-1");
        let script = r#"
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="test", aws_secret_access_key="test")
iam.create_user(UserName="denied")
key = iam.create_access_key(UserName="denied")["AccessKey"]
iam.put_user_policy(UserName="denied", PolicyName="no-decrypt", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Deny", "Action": "kms:Decrypt", "Resource": "*"},
        {"Effect": "Allow", "Action": "*", "Resource": "*"},
    ]}))
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;
        let output = Command::new(&python)
            .args(["-c", script, &endpoint])
            .output()
            .expect("run moto's python");
        assert!(
            output.status.success(),
            "IAM setup: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut words = stdout.split_whitespace().map(str::to_owned);
        let access_key = (
            words.next().expect("access key id"),
            words.next().expect("secret"),
        );
        std::fs::write(dir.join("plain.yaml"), "password: hunter2-denied\n").expect("write");
        let mut command = Command::new(&servers.sops);
        command.current_dir(&dir).args([
            "--disable-version-check",
            "encrypt",
            "--kms",
            &kms_arn,
            "plain.yaml",
        ]);
        for (k, v) in servers.sops_env() {
            command.env(k, v);
        }
        command.env("AWS_ENDPOINT_URL", &endpoint);
        let encrypted = command.output().expect("run sops");
        assert!(
            encrypted.status.success(),
            "sops encrypt: {}",
            String::from_utf8_lossy(&encrypted.stderr)
        );
        let file = dir.join("denied.yaml");
        std::fs::write(&file, &encrypted.stdout).expect("write");
        // Access checks from now on (moto wants the count as a text/plain body).
        let reset = r#"
import sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/moto-api/reset-auth", data=b"0",
                                 headers={"Content-Type": "text/plain"}, method="POST")
urllib.request.urlopen(request, timeout=30).read()
"#;
        let status = Command::new(&python)
            .args(["-c", reset, &endpoint])
            .status()
            .expect("run moto's python");
        assert!(status.success(), "turning moto's access checks on failed");
        DeniedKms {
            _child: child,
            endpoint,
            kms_arn,
            access_key,
            file,
        }
    })
}
