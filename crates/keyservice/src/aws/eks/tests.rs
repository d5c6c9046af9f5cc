use super::*;
use crate::gcp::tests::{policy, server};

const SECRET: &str = "eks-test-secret-DO-NOT-LEAK";

fn services(env: &[(&str, &str)]) -> KeyServices {
    KeyServices::new(
        tokio::runtime::Handle::current(),
        crate::HttpClient::new().unwrap(),
        crate::Credentials::default(),
        crate::Environment::from_pairs(env.iter().copied()),
    )
    .with_policy(policy())
    .with_purpose(crate::Purpose::RemoteCluster)
}

fn request(cluster: &str, address: Option<&str>, ca: Option<&str>) -> ClusterRequest {
    ClusterRequest {
        cluster: Some(cluster.to_owned()),
        address: address.map(str::to_owned),
        ca: ca.map(str::to_owned),
    }
}

/// The presigned URL inside an EKS token.
fn url_of(token: &str) -> String {
    let encoded = token
        .strip_prefix(TOKEN_PREFIX)
        .expect("k8s-aws-v1. prefix");
    String::from_utf8(URL_SAFE_NO_PAD.decode(encoded).expect("base64url")).unwrap()
}

#[test]
fn cluster_arns_as_flux_reads_them() {
    let arn = ClusterArn::parse("arn:aws:eks:eu-west-1:111122223333:cluster/prod").unwrap();
    assert_eq!(
        (
            arn.partition.as_str(),
            arn.region.as_str(),
            arn.name.as_str()
        ),
        ("aws", "eu-west-1", "prod")
    );
    let china = ClusterArn::parse("arn:aws-cn:eks:cn-north-1:1:cluster/a/b").unwrap();
    assert_eq!(
        (china.region.as_str(), china.name.as_str()),
        ("cn-north-1", "a/b")
    );
    for bad in [
        "",
        "prod",
        "arn:aws:eks:eu-west-1:111122223333:nodegroup/prod",
        "arn:aws:kms:eu-west-1:111122223333:cluster/prod",
        "arn:aws:eks::111122223333:cluster/prod",
        "arn:aws:eks:eu-west-1:abc:cluster/prod",
        "arn:aws:eks:eu-west-1:111122223333:cluster/",
    ] {
        assert_eq!(
            ClusterArn::parse(bad).unwrap_err().to_string(),
            format!("invalid EKS cluster ARN: '{bad}'. must match {CLUSTER_PATTERN}")
        );
    }
}

#[test]
fn the_token_is_a_get_caller_identity_url_signed_for_the_cluster() {
    let credentials = AwsCredentials::new(
        "AKIDEXAMPLE",
        SECRET,
        Some("session/token+=".into()),
        None,
        "t",
    );
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let sign = |cluster: &str| {
        presigned_caller_identity(
            "https://sts.eu-west-1.amazonaws.com",
            "eu-west-1",
            &credentials,
            cluster,
            time,
        )
        .unwrap()
        .to_string()
    };
    let url = sign("prod");
    assert!(
        url.starts_with(
            "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
        ),
        "{url}"
    );
    for part in [
        "X-Amz-Algorithm=AWS4-HMAC-SHA256",
        "X-Amz-Credential=AKIDEXAMPLE%2F20231114%2Feu-west-1%2Fsts%2Faws4_request",
        "X-Amz-Date=20231114T221320Z",
        "X-Amz-Expires=900",
        "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id",
        "X-Amz-Security-Token=session%2Ftoken%2B%3D",
        "X-Amz-Signature=",
    ] {
        assert!(url.contains(part), "{part} missing from {url}");
    }
    assert!(!url.contains(SECRET));
    // The signature covers the cluster's name: another cluster, another signature.
    let signature = |url: &str| url.rsplit("X-Amz-Signature=").next().unwrap().to_owned();
    assert_eq!(signature(&sign("prod")), signature(&url));
    assert_ne!(signature(&sign("staging")), signature(&url));
}

#[tokio::test]
async fn looks_the_cluster_up_and_presigns_against_the_endpoints_given() {
    let ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let server = server::serve(vec![(
        200,
        serde_json::json!({"cluster": {
            "name": "prod",
            "endpoint": "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
            "certificateAuthority": {"data": STANDARD.encode(ca)},
        }})
        .to_string(),
    )])
    .await;
    let services = services(&[
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_ENDPOINT_URL", &server.url),
    ]);
    let access = rest_config(
        &services,
        &request(
            "arn:aws:eks:eu-west-1:111122223333:cluster/prod",
            None,
            None,
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        access.host,
        "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com"
    );
    assert_eq!(access.ca.as_deref(), Some(ca.as_bytes()));
    assert!(access.renew_at > Instant::now() + Duration::from_secs(600));
    assert!(!format!("{access:?}").contains(access.token.as_str()));
    let url = url_of(&access.token);
    assert!(
        url.starts_with(&format!("{}/?Action=GetCallerIdentity&", server.url)),
        "{url}"
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        1,
        "only DescribeCluster is sent; the token is presigned"
    );
    assert_eq!(
        (requests[0].method.as_str(), requests[0].target.as_str()),
        ("GET", "/clusters/prod")
    );
    assert!(
        requests[0]
            .headers
            .contains("authorization: aws4-hmac-sha256 credential=akidexample/")
            && requests[0].headers.contains("/eu-west-1/eks/aws4_request"),
        "{}",
        requests[0].headers
    );

    // The address and CA of the ConfigMap: no lookup at all.
    let access = rest_config(
        &services,
        &request(
            "arn:aws:eks:eu-west-1:111122223333:cluster/prod",
            Some("https://10.0.0.1"),
            Some(ca),
        ),
    )
    .await
    .unwrap();
    assert_eq!(access.host, "https://10.0.0.1");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cluster_that_does_not_exist_is_named_without_credentials() {
    let server = server::serve(vec![(
        404,
        r#"{"message":"No cluster found for name: gone."}"#.to_owned(),
    )])
    .await;
    let services = services(&[
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_ENDPOINT_URL_EKS", &server.url),
    ]);
    let error = rest_config(
        &services,
        &request(
            "arn:aws:eks:eu-west-1:111122223333:cluster/gone",
            Some("https://10.0.0.1"),
            None,
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "failed to describe EKS cluster 'gone': DescribeCluster answered HTTP 404: No cluster found for name: gone."
    );
    let missing = rest_config(&services, &ClusterRequest::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        missing.starts_with("invalid EKS cluster ARN: ''"),
        "{missing}"
    );
}

#[tokio::test]
async fn no_credentials_is_said_before_any_call() {
    let services = services(&[
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("HOME", "/nonexistent"),
    ]);
    let error = rest_config(
        &services,
        &request(
            "arn:aws:eks:eu-west-1:111122223333:cluster/prod",
            None,
            None,
        ),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.starts_with("no AWS credentials"), "{error}");
}
