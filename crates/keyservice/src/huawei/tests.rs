use super::*;
use crate::gcp::tests::server;
use crate::{CallPolicy, Credentials, HttpClient};
use std::time::Duration;

const AK: &str = "AKTEST";
const SK: &str = "SKTEST-DO-NOT-LEAK";
const KEY_ID: &str = "tr-west-1:0d0466b0-e727-4d9c-b35d-f84bb474a37f";

fn keys(sk: &str, security_token: Option<&str>) -> AccessKeys {
    AccessKeys {
        ak: AK.to_owned(),
        sk: Zeroizing::new(sk.to_owned()),
        security_token: security_token.map(|t| Zeroizing::new(t.to_owned())),
    }
}

fn at_noon() -> jiff::Timestamp {
    "2026-11-27T12:00:00Z".parse().unwrap()
}

fn authorization(request: &Request<Full<Bytes>>) -> &str {
    request.headers()[http::header::AUTHORIZATION]
        .to_str()
        .unwrap()
}

/// The expected signatures were computed by the Huawei Cloud Go SDK's own signer
/// (`core/auth/signer.Sign`, v0.1.207, the version sops 3.13 uses) for the same request,
/// date and keys (AK `AKTEST`, SK `SKTEST`).
#[test]
fn requests_are_signed_as_the_go_sdk_signs_them() {
    let body = Bytes::from_static(
        br#"{"cipher_text":"AgDoAG7E","encryption_algorithm":"SYMMETRIC_DEFAULT","key_id":"0d0466b0-e727-4d9c-b35d-f84bb474a37f"}"#,
    );
    let decrypt = signed(
        &keys("SKTEST", Some("tok")),
        Method::POST,
        "https://kms.tr-west-1.myhuaweicloud.com/v1.0/0a1b2c3d/kms/decrypt-data",
        &[("x-project-id", "0a1b2c3d")],
        body,
        at_noon(),
    )
    .unwrap();
    assert_eq!(
        authorization(&decrypt),
        "SDK-HMAC-SHA256 Access=AKTEST, SignedHeaders=x-project-id;x-sdk-date;x-security-token, Signature=263888541c2d0de9cf943a30f24fa69130a7e3b962accb64fcf866e13af5b91f"
    );
    assert_eq!(decrypt.headers()["x-sdk-date"], "20261127T120000Z");
    assert_eq!(decrypt.headers()["x-security-token"], "tok");

    let projects = signed(
        &keys("SKTEST", None),
        Method::GET,
        "https://iam.myhuaweicloud.com/v3/projects?name=tr-west-1",
        &[],
        Bytes::new(),
        at_noon(),
    )
    .unwrap();
    assert_eq!(
        authorization(&projects),
        "SDK-HMAC-SHA256 Access=AKTEST, SignedHeaders=x-sdk-date, Signature=0e5a74dcca79adba5d73059c193a7207f16b11226b180e30f3415ef5e3f7b8f6"
    );
}

#[test]
fn key_ids_and_regions_are_read_as_sops_reads_them() {
    assert_eq!(
        KeyId::parse(" tr-west-1 : abc ").unwrap(),
        KeyId {
            region: "tr-west-1".into(),
            uuid: "abc".into()
        }
    );
    for (id, says) in [
        (
            "abc",
            "invalid key ID format: expected 'region:key-uuid', got \"abc\"",
        ),
        (":abc", "region cannot be empty in key ID: \":abc\""),
        (
            "tr-west-1:",
            "key UUID cannot be empty in key ID: \"tr-west-1:\"",
        ),
    ] {
        assert_eq!(KeyId::parse(id).unwrap_err().to_string(), says);
    }
    let env = Environment::from_pairs([]);
    assert_eq!(
        kms_endpoint(&env, "tr-west-1").unwrap(),
        "https://kms.tr-west-1.myhuaweicloud.com"
    );
    assert_eq!(
        kms_endpoint(&env, "eu-west-101").unwrap(),
        "https://kms.eu-west-101.myhuaweicloud.eu"
    );
    let unknown = kms_endpoint(&env, "xx-nowhere-1").unwrap_err().to_string();
    assert!(
        unknown.contains("'xx-nowhere-1' is not in the supported regions")
            && unknown.contains("HUAWEICLOUD_SDK_REGION_KMS_XX_NOWHERE_1"),
        "{unknown}"
    );
    let overridden = Environment::from_pairs([(
        "HUAWEICLOUD_SDK_REGION_KMS_XX_NOWHERE_1",
        "http://kms.local/",
    )]);
    assert_eq!(
        kms_endpoint(&overridden, "xx-nowhere-1").unwrap(),
        "http://kms.local"
    );
    assert_eq!(
        iam_endpoint(&env, "tr-west-1"),
        "https://iam.tr-west-1.myhuaweicloud.com"
    );
    assert_eq!(iam_endpoint(&env, "cn-north-11"), GLOBAL_IAM_ENDPOINT);
    let iam = Environment::from_pairs([("HUAWEICLOUD_SDK_IAM_ENDPOINT", "iam.example.com")]);
    assert_eq!(iam_endpoint(&iam, "tr-west-1"), "https://iam.example.com");
}

#[test]
fn credentials_other_than_access_keys_are_refused_by_name() {
    let refused = |pairs: &[(&str, &str)]| {
        AccessKeys::from_environment(&Environment::from_pairs(pairs.iter().copied()))
            .err()
            .expect("refused")
            .to_string()
    };
    assert!(refused(&[("HUAWEICLOUD_SDK_AK", AK)]).starts_with("no Huawei Cloud credentials"));
    assert!(
        refused(&[
            ("HUAWEICLOUD_SDK_IDP_ID", "idp"),
            ("HUAWEICLOUD_SDK_ID_TOKEN_FILE", "/var/run/token")
        ])
        .contains("IdP token files")
    );
    assert!(
        refused(&[
            ("HUAWEICLOUD_SDK_CREDENTIAL_TYPE", "global"),
            ("HUAWEICLOUD_SDK_AK", AK),
            ("HUAWEICLOUD_SDK_SK", SK)
        ])
        .contains("credential type 'global'")
    );
}

#[test]
fn answers_and_errors_are_read() {
    assert_eq!(
        parse_plaintext(br#"{"key_id":"k","plain_text":"AQID"}"#)
            .unwrap()
            .as_slice(),
        [1, 2, 3]
    );
    assert_eq!(
        parse_plaintext(br#"{"key_id":"k"}"#).unwrap_err(),
        "decryption response missing plaintext"
    );
    assert!(
        matches!(failure(StatusCode::BAD_REQUEST, br#"{"error":{"error_code":"KMS.0205","error_msg":"The key is disabled."}}"#),
            Failure::Permanent(m) if m == "HTTP 400: KMS.0205: The key is disabled.")
    );
    assert!(
        matches!(failure(StatusCode::UNAUTHORIZED, br#"{"error_code":"APIGW.0301","error_msg":"Incorrect IAM authentication information"}"#),
            Failure::Permanent(m) if m == "HTTP 401: APIGW.0301: Incorrect IAM authentication information")
    );
    assert!(matches!(
        failure(StatusCode::SERVICE_UNAVAILABLE, b"busy"),
        Failure::Transient(m) if m == "HTTP 503"
    ));
    assert_eq!(
        parse_project(br#"{"projects":[{"id":"p1"}]}"#).unwrap(),
        "p1"
    );
    assert_eq!(
        parse_project(br#"{"projects":[]}"#),
        Err(ProjectError::NoProject)
    );
    assert_eq!(
        parse_project(br#"{"projects":[{"id":"p1"},{"id":"p2"}]}"#)
            .unwrap_err()
            .to_string(),
        "2 projects of that name (p1, p2): set HUAWEICLOUD_SDK_PROJECT_ID to one of them"
    );
}

fn services(env: &[(&str, &str)]) -> KeyServices {
    KeyServices::new(
        tokio::runtime::Handle::current(),
        HttpClient::new().unwrap(),
        Credentials::default(),
        Environment::from_pairs(env.iter().copied()),
    )
    .with_policy(CallPolicy {
        timeout: Duration::from_secs(5),
        attempts: 2,
        backoff: Duration::from_millis(1),
    })
}

/// Against local doubles of IAM and KMS: the project is looked up once (signed), then the
/// data key is decrypted with it in the path and the `X-Project-Id` header; a busy KMS is
/// retried.
#[tokio::test]
async fn decrypts_looking_up_the_project_once() {
    let iam = server::serve(vec![(200, r#"{"projects":[{"id":"p-tr"}]}"#.into())]).await;
    let kms = server::serve(vec![
        (503, "{}".into()),
        (200, r#"{"key_id":"k","plain_text":"AQID"}"#.into()),
        (200, r#"{"key_id":"k","plain_text":"BAUG"}"#.into()),
    ])
    .await;
    let services = services(&[
        ("HUAWEICLOUD_SDK_AK", AK),
        ("HUAWEICLOUD_SDK_SK", SK),
        ("HUAWEICLOUD_SDK_IAM_ENDPOINT", &iam.url),
        ("HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1", &kms.url),
    ]);
    let key = decrypt(&services, KEY_ID, "AgDoAG7E").await.unwrap();
    assert_eq!(key.as_slice(), [1, 2, 3]);
    let key = decrypt(&services, KEY_ID, "AgDoAG7F").await.unwrap();
    assert_eq!(key.as_slice(), [4, 5, 6]);

    let lookups = iam.requests();
    assert_eq!(lookups.len(), 1, "the project id is cached");
    assert_eq!(lookups[0].target, "/v3/projects?name=tr-west-1");
    // The recorded head is lower-cased.
    assert!(lookups[0].headers.contains(
        "authorization: sdk-hmac-sha256 access=aktest, signedheaders=x-sdk-date, signature="
    ));
    let calls = kms.requests();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1].target, "/v1.0/p-tr/kms/decrypt-data");
    assert!(
        calls[1].headers.contains("x-project-id: p-tr"),
        "{}",
        calls[1].headers
    );
    let body: serde_json::Value = serde_json::from_str(&calls[1].body).unwrap();
    assert_eq!(
        body,
        json!({
            "cipher_text": "AgDoAG7E",
            "encryption_algorithm": "SYMMETRIC_DEFAULT",
            "key_id": "0d0466b0-e727-4d9c-b35d-f84bb474a37f"
        })
    );
    let secret = SK.to_ascii_lowercase();
    for call in lookups.iter().chain(&calls) {
        assert!(!call.headers.contains(&secret) && !call.body.contains(SK));
    }
}

#[tokio::test]
async fn a_refusal_names_the_key_and_the_service_words_only() {
    let kms = server::serve(vec![(
        403,
        r#"{"error":{"error_code":"KMS.0303","error_msg":"Access denied."}}"#.into(),
    )])
    .await;
    let services = services(&[
        ("HUAWEICLOUD_SDK_AK", AK),
        ("HUAWEICLOUD_SDK_SK", SK),
        (
            "HUAWEICLOUD_SDK_SECURITY_TOKEN",
            "session-token-DO-NOT-LEAK",
        ),
        ("HUAWEICLOUD_SDK_PROJECT_ID", "p-given"),
        ("HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1", &kms.url),
    ]);
    let message = decrypt(&services, KEY_ID, "AgDoAG7E")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        format!(
            "failed to decrypt sops data key with Huawei Cloud KMS key '{KEY_ID}': HTTP 403: KMS.0303: Access denied."
        )
    );
    let calls = kms.requests();
    assert_eq!(calls.len(), 1, "a refusal is not retried");
    assert_eq!(calls[0].target, "/v1.0/p-given/kms/decrypt-data");
    assert!(
        calls[0]
            .headers
            .contains("x-security-token: session-token-do-not-leak")
    );
}
