//! SOPS files encrypted by the real sops against real local key services (moto's AWS KMS and
//! STS, a Vault dev server's transit engine) are decrypted by `kustomize-controller decrypt`
//! byte for byte as `sops -d` prints them, with the credentials of the environment, as sops
//! reads them. Failures name the service and the key, and never carry a value.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::keyservers::{KeyServers, ROLE, key_servers};

const PLAIN_YAML: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n    name: creds\nstringData:\n    password: hunter2-from-keyservice\n    token: t0k3n\n";
const PLAIN_JSON: &str = "{\n\t\"password\": \"hunter2-from-keyservice\",\n\t\"port\": 5432\n}";
const PLAIN_ENV: &str = "PASSWORD=hunter2-from-keyservice\nUSER=admin\n";
const PLAIN_INI: &str = "[db]\npassword = hunter2-from-keyservice\n";
const PLAIN_BINARY: &str = "hunter2-from-keyservice: not a structured file\n";

fn age_key() -> PathBuf {
    support::repo_root().join("tests/fixtures/sops/keys/age-1.agekey")
}

fn age_recipient() -> String {
    std::fs::read_to_string(age_key())
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# public key: "))
        .expect("the identity file names its recipient")
        .to_owned()
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(support::unique_name(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `sops encrypt ARGS name` of `plain` written to `dir/name`; the encrypted file's path.
fn encrypt(servers: &KeyServers, dir: &Path, name: &str, plain: &str, args: &[&str]) -> PathBuf {
    std::fs::write(dir.join(name), plain).unwrap();
    let mut all = vec!["encrypt"];
    all.extend_from_slice(args);
    all.push(name);
    let encrypted = servers.sops(dir, &all);
    let path = dir.join(format!("enc.{name}"));
    std::fs::write(&path, encrypted).unwrap();
    path
}

/// Our `decrypt` with exactly `env` (plus PATH and an empty HOME) and `args`.
fn ours(file: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    let home = workdir("home");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kustomize-controller"));
    command
        .arg("decrypt")
        .arg(file)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        // Whatever the test machine's link-local network answers, no instance profile.
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run kustomize-controller decrypt")
}

fn assert_same_as_sops(servers: &KeyServers, file: &Path, output: &Output) {
    let dir = file.parent().unwrap();
    let name = file.file_name().unwrap().to_str().unwrap();
    let reference = servers.sops(dir, &["decrypt", name]);
    assert!(
        output.status.success(),
        "decrypt {name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&reference),
        "{name}"
    );
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn kms_and_vault_files_decrypt_as_sops_does_in_every_format() {
    let servers = key_servers();
    let dir = workdir("ks-formats");
    let files = [
        ("s.yaml", PLAIN_YAML),
        ("s.json", PLAIN_JSON),
        ("s.env", PLAIN_ENV),
        ("s.ini", PLAIN_INI),
        ("s.txt", PLAIN_BINARY),
    ];
    let kms = servers.kms_arn.as_str();
    for (name, plain) in files {
        for (label, args) in [
            ("kms", vec!["--kms", kms]),
            (
                "kms-context",
                vec![
                    "--kms",
                    kms,
                    "--encryption-context",
                    "team:platform,env:prod",
                ],
            ),
            (
                "vault",
                vec!["--hc-vault-transit", servers.vault_key.as_str()],
            ),
        ] {
            let file = encrypt(servers, &dir, &format!("{label}-{name}"), plain, &args);
            let output = ours(&file, &servers.sops_env(), &[]);
            assert_same_as_sops(servers, &file, &output);
            assert!(
                String::from_utf8_lossy(&output.stdout).contains("hunter2-from-keyservice"),
                "{label} {name}"
            );
        }
    }
}

#[test]
fn a_kms_key_with_a_role_is_opened_after_assuming_it() {
    let servers = key_servers();
    let dir = workdir("ks-role");
    let key = format!("{}+{ROLE}", servers.kms_arn);
    let file = encrypt(servers, &dir, "role.yaml", PLAIN_YAML, &["--kms", &key]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&format!("role: {ROLE}")), "{text}");
    assert_same_as_sops(servers, &file, &ours(&file, &servers.sops_env(), &[]));
}

#[test]
fn a_file_for_kms_and_age_opens_with_either() {
    let servers = key_servers();
    let dir = workdir("ks-either");
    let recipient = age_recipient();
    let file = encrypt(
        servers,
        &dir,
        "both.yaml",
        PLAIN_YAML,
        &["--kms", &servers.kms_arn, "--age", &recipient],
    );
    // KMS only: no age key given.
    assert_same_as_sops(servers, &file, &ours(&file, &servers.sops_env(), &[]));
    // Age only: no AWS credentials, and the KMS endpoint is a closed port, so the data key
    // can only have come from the age key (tried first, as sops does).
    let age_only = ours(
        &file,
        &[("AWS_ENDPOINT_URL", "http://127.0.0.1:1".into())],
        &["--sops-key", age_key().to_str().unwrap()],
    );
    assert_same_as_sops(servers, &file, &age_only);
}

#[test]
fn shamir_key_groups_combine_parts_from_kms_vault_and_age() {
    let servers = key_servers();
    let dir = workdir("ks-shamir");
    std::fs::write(
        dir.join(".sops.yaml"),
        format!(
            "creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n      - kms:\n          - arn: {}\n      - hc_vault:\n          - {}\n      - age:\n          - {}\n",
            servers.kms_arn,
            servers.vault_key,
            age_recipient()
        ),
    )
    .unwrap();
    let file = encrypt(servers, &dir, "groups.yaml", PLAIN_YAML, &[]);
    // All three services.
    assert_same_as_sops(servers, &file, &ours(&file, &servers.sops_env(), &[]));
    // Vault refuses (wrong token) and there is no age key: one part of two.
    let mut env = servers.sops_env();
    env.retain(|(k, _)| *k != "VAULT_TOKEN");
    env.push(("VAULT_TOKEN", "wrong-token".into()));
    let one_part = ours(&file, &env, &[]);
    assert!(!one_part.status.success());
    let message = stderr(&one_part);
    assert!(
        message.contains("1 of 3 key groups opened, 2 needed")
            && message.contains("HashiCorp Vault transit")
            && message.contains("403"),
        "{message}"
    );
    // The age key makes up for Vault.
    assert_same_as_sops(
        servers,
        &file,
        &ours(&file, &env, &["--sops-key", age_key().to_str().unwrap()]),
    );
}

#[test]
fn failures_name_the_service_and_the_key_and_no_value() {
    let servers = key_servers();
    let dir = workdir("ks-failures");
    let file = encrypt(
        servers,
        &dir,
        "kms.yaml",
        PLAIN_YAML,
        &["--kms", &servers.kms_arn],
    );
    let arn = servers.kms_arn.as_str();
    let failing = |env: Vec<(&'static str, String)>| {
        let output = ours(&file, &env, &[]);
        assert!(!output.status.success());
        assert!(output.stdout.is_empty());
        let message = stderr(&output);
        assert!(
            message.contains("AWS KMS") && message.contains(arn),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
        message
    };
    // Unreachable service: connection refused, retried, then reported.
    let unreachable = failing(vec![
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
    ]);
    assert!(
        unreachable.contains("127.0.0.1:1") && unreachable.contains("after 3 attempts"),
        "{unreachable}"
    );
    // No credentials anywhere.
    let none = failing(vec![("AWS_ENDPOINT_URL", servers.moto.clone())]);
    assert!(none.contains("no AWS credentials"), "{none}");
    // Wrong region: the ARN says eu-west-1 but the key lives in us-east-1.
    let text = std::fs::read_to_string(&file).unwrap();
    let moved = arn.replace("us-east-1", "eu-west-1");
    let wrong_region = dir.join("wrong-region.yaml");
    std::fs::write(&wrong_region, text.replace(arn, &moved)).unwrap();
    let output = ours(&wrong_region, &servers.sops_env(), &[]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("AWS KMS") && message.contains(&moved) && message.contains("HTTP 400"),
        "{message}"
    );
    // A key from another file: KMS refuses to open this data key with it.
    let other = text.replace(arn, &servers.kms_arn_eu);
    let other_key = dir.join("other-key.yaml");
    std::fs::write(&other_key, other).unwrap();
    let output = ours(&other_key, &servers.sops_env(), &[]);
    let message = stderr(&output);
    assert!(
        !output.status.success() && message.contains(&servers.kms_arn_eu),
        "{message}"
    );
    // Vault: a wrong token is a 403 naming the transit key.
    let vault_file = encrypt(
        servers,
        &dir,
        "vault.yaml",
        PLAIN_YAML,
        &["--hc-vault-transit", &servers.vault_key],
    );
    let output = ours(&vault_file, &[("VAULT_TOKEN", "wrong".into())], &[]);
    let message = stderr(&output);
    assert!(
        !output.status.success()
            && message.contains("HashiCorp Vault transit")
            && message.contains("/v1/sops/keys/firstkey")
            && message.contains("permission denied"),
        "{message}"
    );
    // No token at all.
    let output = ours(&vault_file, &[], &[]);
    assert!(
        stderr(&output).contains("no token for Vault"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn access_denied_by_iam_names_the_service_the_key_and_the_refusal() {
    let denied = support::keyservers::denied_kms();
    let output = ours(
        &denied.file,
        &[
            ("AWS_ENDPOINT_URL", denied.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", denied.access_key.0.clone()),
            ("AWS_SECRET_ACCESS_KEY", denied.access_key.1.clone()),
        ],
        &[],
    );
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("AWS KMS")
            && message.contains(&denied.kms_arn)
            && message.contains("HTTP 403: AccessDenied")
            && message.contains("is not authorized to perform: kms:Decrypt"),
        "{message}"
    );
    assert!(
        !message.contains(&denied.access_key.1) && !message.contains("hunter2"),
        "{message}"
    );
}

/// The offline `build` decrypts as the controller does: a Kustomization with
/// `spec.decryption` over a directory holding a KMS-encrypted Secret and a Vault-encrypted
/// generator source, the keys opened with the environment's credentials.
#[test]
fn the_offline_build_opens_key_service_files_like_the_controller() {
    let servers = key_servers();
    let dir = workdir("ks-build");
    let app = dir.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("kustomization.yaml"),
        "resources:\n- secret.yaml\nsecretGenerator:\n- name: generated\n  envs:\n  - vault.env\n",
    )
    .unwrap();
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: from-kms\nstringData:\n  password: kms-build-1\n";
    std::fs::write(app.join("plain-secret.yaml"), secret).unwrap();
    let encrypted = servers.sops(
        &app,
        &[
            "encrypt",
            "--encrypted-regex",
            "^(data|stringData)$",
            "--kms",
            &servers.kms_arn,
            "plain-secret.yaml",
        ],
    );
    std::fs::write(app.join("secret.yaml"), encrypted).unwrap();
    std::fs::remove_file(app.join("plain-secret.yaml")).unwrap();
    std::fs::write(app.join("plain.env"), "TOKEN=vault-build-2\n").unwrap();
    let encrypted = servers.sops(
        &app,
        &[
            "encrypt",
            "--hc-vault-transit",
            &servers.vault_key,
            "--input-type",
            "dotenv",
            "--output-type",
            "dotenv",
            "plain.env",
        ],
    );
    std::fs::write(app.join("vault.env"), encrypted).unwrap();
    std::fs::remove_file(app.join("plain.env")).unwrap();
    std::fs::write(
        dir.join("ks.yaml"),
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app\n  namespace: flux-system\n\
         spec:\n  interval: 5m\n  path: ./app\n  prune: true\n  sourceRef: {kind: GitRepository, name: repo}\n\
         \x20 decryption: {provider: sops}\n",
    )
    .unwrap();
    let home = workdir("home");
    let mut command = Command::new(env!("CARGO_BIN_EXE_kustomize-controller"));
    command
        .arg("build")
        .arg(&app)
        .arg("--kustomization")
        .arg(dir.join("ks.yaml"))
        .arg("--root")
        .arg(&dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home);
    for (k, v) in servers.sops_env() {
        command.env(k, v);
    }
    let output = command.output().expect("run kustomize-controller build");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout.contains("password: kms-build-1"), "{stdout}");
    // The generated Secret holds the decrypted value, base64-encoded.
    assert!(stdout.contains("TOKEN: dmF1bHQtYnVpbGQtMg=="), "{stdout}");
    assert!(
        !stdout.contains("ENC[") && !stdout.contains("sops:"),
        "{stdout}"
    );
}

#[test]
fn credentials_come_from_the_aws_shared_files_as_the_sdk_reads_them() {
    let servers = key_servers();
    let dir = workdir("aws-shared-files");
    let file = encrypt(
        servers,
        &dir,
        "secret.yaml",
        PLAIN_YAML,
        &["--kms", &servers.kms_arn],
    );
    let (config, credentials) = (dir.join("config"), dir.join("credentials"));
    std::fs::write(
        &credentials,
        "[team]\naws_access_key_id = test\naws_secret_access_key = test\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "[profile deployer]\nrole_arn = {ROLE}\nsource_profile = team\n\n\
             [profile tool]\ncredential_process = /bin/false\n"
        ),
    )
    .unwrap();
    let env = |profile: Option<&str>| {
        let mut env = vec![
            ("AWS_ENDPOINT_URL", servers.moto.clone()),
            ("AWS_CONFIG_FILE", config.display().to_string()),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                credentials.display().to_string(),
            ),
        ];
        env.extend(profile.map(|p| ("AWS_PROFILE", p.to_string())));
        env
    };
    // A profile's static keys, and a role assumed with them.
    for profile in ["team", "deployer"] {
        assert_same_as_sops(servers, &file, &ours(&file, &env(Some(profile)), &[]));
    }
    // Without AWS_PROFILE, the default profile's keys (no default: no credentials).
    let output = ours(&file, &env(None), &[]);
    assert!(
        stderr(&output).contains("no AWS credentials"),
        "{}",
        stderr(&output)
    );
    std::fs::write(
        &credentials,
        "[default]\naws_access_key_id = test\naws_secret_access_key = test\n",
    )
    .unwrap();
    assert_same_as_sops(servers, &file, &ours(&file, &env(None), &[]));
    // What this controller does not run is refused naming the profile and the setting.
    let output = ours(&file, &env(Some("tool")), &[]);
    let message = stderr(&output);
    assert!(
        !output.status.success() && message.contains("AWS profile 'tool' uses credential_process"),
        "{message}"
    );
    let output = ours(&file, &env(Some("absent")), &[]);
    assert!(
        stderr(&output).contains("AWS profile 'absent' is not in the shared"),
        "{}",
        stderr(&output)
    );
}

/// An `hckms` file the real sops encrypted against a local Huawei Cloud KMS double is opened
/// through the double with the same environment, as sops opens it: the same call, body and
/// project, with an `SDK-HMAC-SHA256` signature by the same access key. Without the keys in
/// the environment, the failure names the service, the key and what to set.
#[test]
fn an_hckms_file_decrypts_as_sops_does_against_a_kms_double() {
    let servers = key_servers();
    let kms = support::huawei_kms::HuaweiKms::start();
    let key = "tr-west-1:0d0466b0-e727-4d9c-b35d-f84bb474a37f";
    let env = |with_keys: bool| {
        let mut env = vec![
            ("HUAWEICLOUD_SDK_PROJECT_ID", "p-double".to_owned()),
            ("HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1", kms.url.clone()),
        ];
        if with_keys {
            env.push(("HUAWEICLOUD_SDK_AK", "AKDOUBLE".to_owned()));
            env.push(("HUAWEICLOUD_SDK_SK", "sk-DO-NOT-LEAK".to_owned()));
        }
        env
    };
    let dir = workdir("ks-hckms");
    std::fs::write(dir.join("s.yaml"), PLAIN_YAML).unwrap();
    let mut sops = Command::new(&servers.sops);
    sops.current_dir(&dir)
        .args([
            "--disable-version-check",
            "encrypt",
            "--hckms",
            key,
            "s.yaml",
        ])
        .env_clear()
        .env("HOME", &dir);
    for (k, v) in env(true) {
        sops.env(k, v);
    }
    let encrypted = sops.output().expect("run sops");
    assert!(encrypted.status.success(), "{}", stderr(&encrypted));
    let file = dir.join("enc.s.yaml");
    std::fs::write(&file, &encrypted.stdout).unwrap();
    assert!(String::from_utf8_lossy(&encrypted.stdout).contains("hckms:"));

    let output = ours(&file, &env(true), &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), PLAIN_YAML);

    let requests = kms.requests();
    let [sops_encrypt, our_decrypt] = requests.as_slice() else {
        panic!("two calls expected: {requests:#?}");
    };
    assert_eq!(
        sops_encrypt.request_line,
        "POST /v1.0/p-double/kms/encrypt-data HTTP/1.1"
    );
    assert_eq!(
        our_decrypt.request_line,
        "POST /v1.0/p-double/kms/decrypt-data HTTP/1.1"
    );
    assert_eq!(
        our_decrypt.body["cipher_text"],
        format!(
            "double-kms:{}",
            sops_encrypt.body["plain_text"].as_str().unwrap()
        )
    );
    assert_eq!(our_decrypt.body["key_id"], sops_encrypt.body["key_id"]);
    assert_eq!(
        our_decrypt.body["encryption_algorithm"],
        sops_encrypt.body["encryption_algorithm"]
    );
    for request in [sops_encrypt, our_decrypt] {
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find_map(|h| h.strip_prefix(&format!("{name}: ")).map(str::to_owned))
                .unwrap_or_default()
        };
        assert_eq!(header("x-project-id"), "p-double", "{request:#?}");
        assert!(
            header("authorization").starts_with("sdk-hmac-sha256 access=akdouble, signedheaders="),
            "{request:#?}"
        );
        assert!(header("x-sdk-date").ends_with('z'), "{request:#?}");
        assert!(
            header("content-type").starts_with("application/json"),
            "{request:#?}"
        );
    }

    let refused = ours(&file, &env(false), &[]);
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(
        message.contains("Huawei Cloud KMS")
            && message.contains("HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK are not both set"),
        "{message}"
    );
    assert!(
        message.contains(&format!("hckms {key}: Huawei Cloud KMS")),
        "{message}"
    );
    assert!(!message.contains("DO-NOT-LEAK"));
}
