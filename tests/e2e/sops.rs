//! SOPS decryption of manifests and generator files before apply.

use super::*;

async fn create_key_secret(client: &kube::Client, ns: &str, name: &str, entries: &[(&str, &str)]) {
    use k8s_openapi::api::core::v1::Secret;
    let data: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(entry, file)| {
            (
                entry.to_string(),
                json!(sops_fixture(&format!("keys/{file}"))),
            )
        })
        .collect();
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data,
    }))
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .expect("create key Secret");
}

#[tokio::test]
async fn sops_encrypted_manifests_and_generator_files_are_decrypted_before_apply() {
    let f = Fixture::new("sops").await;
    let ns = f.ns();
    create_key_secret(
        &f.client,
        ns,
        "sops-keys",
        &[("age.agekey", "age-1.agekey"), ("rsa.asc", "pgp-rsa.asc")],
    )
    .await;
    create_key_secret(
        &f.client,
        ns,
        "wrong-keys",
        &[("other.agekey", "age-2-and-3.agekey")],
    )
    .await;

    let kustomization = "\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - secret.yaml
  - docker-secret.yaml
generatorOptions:
  disableNameSuffixHash: true
secretGenerator:
  - name: generated
    files:
      - settings.yaml=pgp-settings.yaml
    envs:
      - app.env
";
    let age_secret = sops_fixture("encrypted/k8s/secret.yaml");
    let docker_secret = sops_fixture("encrypted/k8s/dockerconfigjson-secret.yaml");
    let pgp_file = sops_fixture("encrypted/keys/pgp-rsa.yaml");
    let env_file = sops_fixture("kustomize/app.env");
    let files = [
        ("app/kustomization.yaml", kustomization),
        ("app/secret.yaml", age_secret.as_str()),
        ("app/docker-secret.yaml", docker_secret.as_str()),
        ("app/pgp-settings.yaml", pgp_file.as_str()),
        ("app/app.env", env_file.as_str()),
        ("plain/secret.yaml", age_secret.as_str()),
    ];
    f.create_source("repo").await;
    f.publish(1, &files).await;
    let decryption = |secret: &str| json!({"provider": "sops", "secretRef": {"name": secret}});
    create_kustomization(
        &f.client,
        ns,
        "decrypted",
        "repo",
        json!({
            "path": "./app", "targetNamespace": ns, "decryption": decryption("sops-keys"),
        }),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "wrong-key",
        "repo",
        json!({
            "path": "./app", "targetNamespace": ns, "namePrefix": "wrong-",
            "decryption": decryption("wrong-keys"),
        }),
    )
    .await;
    create_kustomization(
        &f.client,
        ns,
        "no-decryption",
        "repo",
        json!({
            "path": "./plain", "targetNamespace": ns, "namePrefix": "plain-",
        }),
    )
    .await;

    wait_ready_with(
        &f.client,
        ns,
        "decrypted",
        ConditionStatus::True,
        "decrypted: Ready",
    )
    .await;
    let credentials = secret_data(&f.client, ns, "app-credentials")
        .await
        .expect("app-credentials applied");
    assert_eq!(credentials["password"], b"s3cr3t-Pa55word");
    assert_eq!(credentials["username"], b"app");
    assert!(String::from_utf8_lossy(&credentials["config.yaml"]).contains("tok_0123456789abcdef"));
    let docker = secret_data(&f.client, ns, "registry-credentials").await;
    let docker = docker.expect("the dockerconfigjson Secret is applied");
    assert_eq!(
        docker[".dockerconfigjson"],
        sops_fixture("expected/k8s/dockerconfig.json").into_bytes(),
        "the encrypted data value is decrypted to the JSON sops -d prints"
    );
    let generated = secret_data(&f.client, ns, "generated")
        .await
        .expect("generated Secret");
    assert_eq!(
        generated["settings.yaml"],
        sops_fixture("expected/keys/pgp-rsa.yaml").into_bytes(),
        "the PGP-encrypted generator file is decrypted to what sops -d prints"
    );
    for line in sops_fixture("expected/kustomize/app.env").lines() {
        if let Some((key, value)) = line.split_once('=').filter(|_| !line.starts_with('#')) {
            assert_eq!(generated[key], value.as_bytes(), "env entry {key}");
        }
    }

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "wrong-key",
        ConditionStatus::False,
        "wrong-key: Ready=False",
    )
    .await;
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("pgp-settings.yaml"),
        "the message names the file: {message}"
    );
    assert!(message.contains("supplied: 2 age identities"), "{message}");
    for secret in ["s3cr3t", "tok_0123", "AGE-SECRET-KEY"] {
        assert!(!message.contains(secret), "{message}");
    }
    for name in [
        "wrong-app-credentials",
        "wrong-generated",
        "wrong-registry-credentials",
    ] {
        assert!(
            secret_data(&f.client, ns, name).await.is_none(),
            "{name} must not be written"
        );
    }

    let (reason, message) = wait_ready_with(
        &f.client,
        ns,
        "no-decryption",
        ConditionStatus::False,
        "no-decryption: Ready=False",
    )
    .await;
    assert_eq!(reason, "ReconciliationFailed", "{message}");
    assert!(
        message.contains(
            "plain-app-credentials is SOPS encrypted, configuring decryption is required"
        ),
        "{message}"
    );
    assert!(
        secret_data(&f.client, ns, "plain-app-credentials")
            .await
            .is_none()
    );
}
