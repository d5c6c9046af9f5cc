//! Kubeconfigs of remote clusters, read from a Secret as Flux reads them: only inline
//! credentials, and only what `--insecure-kubeconfig-exec` / `--insecure-kubeconfig-tls`
//! allow of exec plugins and unverified TLS.

use kube::config::{KubeConfigOptions, Kubeconfig};

/// What a kubeconfig taken from a Secret may use, from the controller's flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KubeConfigPolicy {
    /// `--insecure-kubeconfig-exec`: run the `user.exec` credential plugin.
    pub allow_exec: bool,
    /// `--insecure-kubeconfig-tls`: honour `insecure-skip-tls-verify`.
    pub allow_insecure_tls: bool,
}

/// A kubeconfig that cannot be used. The messages of the checks Flux makes are Flux's.
#[derive(Debug, thiserror::Error)]
pub enum KubeConfigError {
    /// Not a kubeconfig.
    #[error("{0}")]
    Parse(String),
    /// A file on the controller's disk is named where only inline data is allowed.
    #[error(
        "cluster '{0}' references a certificate-authority file, only certificate-authority-data is supported"
    )]
    CertificateAuthorityFile(String),
    /// See [`KubeConfigError::CertificateAuthorityFile`].
    #[error("user '{0}' references a tokenFile, only an inline token is supported")]
    TokenFile(String),
    /// See [`KubeConfigError::CertificateAuthorityFile`].
    #[error(
        "user '{0}' references a client-certificate file, only client-certificate-data is supported"
    )]
    ClientCertificateFile(String),
    /// See [`KubeConfigError::CertificateAuthorityFile`].
    #[error("user '{0}' references a client-key file, only client-key-data is supported")]
    ClientKeyFile(String),
    /// The user's only credential is an exec plugin, which the flags do not allow.
    #[error(
        "user '{0}' has no credentials but an exec plugin, and exec plugins are not allowed in remote kubeconfigs (--insecure-kubeconfig-exec is not set)"
    )]
    ExecNotAllowed(String),
    /// The cluster can only be reached without verifying TLS, which the flags do not allow.
    #[error(
        "cluster '{0}' sets insecure-skip-tls-verify without certificate-authority-data, and skipping TLS verification is not allowed in remote kubeconfigs (--insecure-kubeconfig-tls is not set)"
    )]
    InsecureTlsNotAllowed(String),
    /// kube could not make a client configuration of it (no server, no current context...).
    #[error("{0}")]
    Load(String),
}

/// The client configuration for the current context of `text`, after Flux's checks.
///
/// As Flux's controller does, it keeps the server, TLS data, proxy and inline credentials;
/// it drops auth-provider plugins and the kubeconfig's own impersonation, the exec plugin
/// unless `allow_exec`, and `insecure-skip-tls-verify` unless `allow_insecure_tls`. Where
/// dropping leaves a user with no credentials or a cluster with no way to verify its
/// certificate, it refuses up front, naming the flag, rather than failing later with an
/// Unauthorized or certificate error.
pub async fn client_config(
    text: &[u8],
    policy: KubeConfigPolicy,
) -> Result<kube::Config, KubeConfigError> {
    let text = std::str::from_utf8(text)
        .map_err(|_| KubeConfigError::Parse("the kubeconfig is not UTF-8 text".to_string()))?;
    let mut kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| parse_error(&e.to_string()))?;
    restrict(&mut kubeconfig, policy)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| KubeConfigError::Load(e.to_string()))
}

/// The parser's words can quote the text (a token among it), so only the position is kept.
fn parse_error(message: &str) -> KubeConfigError {
    let position = message.lines().next().and_then(|first| {
        let at = first.find("line ")?;
        let words: Vec<&str> = first[at..].split([' ', ':', ',']).collect();
        match words.as_slice() {
            ["line", line, "column", column, ..] => {
                Some(format!(" at line {line} column {column}"))
            }
            ["line", line, ..] => Some(format!(" at line {line}")),
            _ => None,
        }
    });
    KubeConfigError::Parse(format!(
        "the kubeconfig is not a valid kubeconfig YAML document{}",
        position.unwrap_or_default()
    ))
}

/// Flux's validation, then what its copy of the REST config leaves out.
fn restrict(kubeconfig: &mut Kubeconfig, policy: KubeConfigPolicy) -> Result<(), KubeConfigError> {
    for named in &mut kubeconfig.clusters {
        let Some(cluster) = named.cluster.as_mut() else {
            continue;
        };
        if cluster
            .certificate_authority
            .as_deref()
            .is_some_and(|f| !f.is_empty())
        {
            return Err(KubeConfigError::CertificateAuthorityFile(
                named.name.clone(),
            ));
        }
        if cluster.insecure_skip_tls_verify == Some(true) && !policy.allow_insecure_tls {
            if cluster.certificate_authority_data.is_none() {
                return Err(KubeConfigError::InsecureTlsNotAllowed(named.name.clone()));
            }
            cluster.insecure_skip_tls_verify = None;
        }
    }
    for named in &mut kubeconfig.auth_infos {
        let Some(user) = named.auth_info.as_mut() else {
            continue;
        };
        let set = |field: &Option<String>| field.as_deref().is_some_and(|f| !f.is_empty());
        if set(&user.token_file) {
            return Err(KubeConfigError::TokenFile(named.name.clone()));
        }
        if set(&user.client_certificate) {
            return Err(KubeConfigError::ClientCertificateFile(named.name.clone()));
        }
        if set(&user.client_key) {
            return Err(KubeConfigError::ClientKeyFile(named.name.clone()));
        }
        user.auth_provider = None;
        user.impersonate = None;
        user.impersonate_uid = None;
        user.impersonate_groups = None;
        user.impersonate_user_extra = None;
        if user.exec.is_some() && !policy.allow_exec {
            let other_credentials = user.token.is_some()
                || user.client_certificate_data.is_some()
                || user.username.is_some();
            if !other_credentials {
                return Err(KubeConfigError::ExecNotAllowed(named.name.clone()));
            }
            user.exec = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed test CA certificate (PEM, base64), no key kept.
    const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmRENDQVNHZ0F3SUJBZ0lVT1l0aCswOE1STkkxcVNGWmdqVkJ2V2w4V3Jvd0NnWUlLb1pJemowRUF3SXcKRWpFUU1BNEdBMVVFQXd3SGRHVnpkQzFqWVRBZ0Z3MHlOakV4TWpZd016TTVNalJhR0E4eU1USTJNVEV3TWpBegpNemt5TkZvd0VqRVFNQTRHQTFVRUF3d0hkR1Z6ZEMxallUQlpNQk1HQnlxR1NNNDlBZ0VHQ0NxR1NNNDlBd0VICkEwSUFCRlREMGFrc241a0RKZjVKYmRmSWxMbUdCT0s0cnFmM3FwQ3ZNYVdWcEZ6dVBtWS9zOHhRTU0zdWZMODgKY04xQ1V0enZrN3JYU1hZK3BINDlLNk05akMyalV6QlJNQjBHQTFVZERnUVdCQlJVaDl2ZTdBTnh0RXEzYXRzSQp1UElMR3lUZStUQWZCZ05WSFNNRUdEQVdnQlJVaDl2ZTdBTnh0RXEzYXRzSXVQSUxHeVRlK1RBUEJnTlZIUk1CCkFmOEVCVEFEQVFIL01Bb0dDQ3FHU000OUJBTUNBMGtBTUVZQ0lRREJPYVdOVnI5Uy9xODdzY0MwOHExT0NLUGQKL1BndERESHhtVERCd09zdDlRSWhBTWpRcFpOZlRQYmt4VWQvZW80TlQydC9mcWx3Zlo4WjAxVkZjWnZJWHdnawotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: remote\n\
             clusters:\n- name: spoke\n  cluster:\n    server: https://127.0.0.1:6443\n{cluster}\
             contexts:\n- name: remote\n  context:\n    cluster: spoke\n    user: deployer\n\
             users:\n- name: deployer\n  user:\n{user}"
        )
    }

    async fn load(text: &str, policy: KubeConfigPolicy) -> Result<kube::Config, KubeConfigError> {
        client_config(text.as_bytes(), policy).await
    }

    #[tokio::test]
    async fn inline_credentials_make_a_client_configuration() {
        let text = kubeconfig(
            &format!("    certificate-authority-data: {CA}\n"),
            "    token: abc\n",
        );
        let config = load(&text, KubeConfigPolicy::default()).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert!(config.root_cert.is_some());
        assert!(!config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn files_on_the_controllers_disk_are_refused_as_flux_refuses_them() {
        let cases = [
            (
                kubeconfig(
                    "    certificate-authority: /etc/ca.crt\n",
                    "    token: abc\n",
                ),
                "cluster 'spoke' references a certificate-authority file, only certificate-authority-data is supported",
            ),
            (
                kubeconfig("", "    tokenFile: /var/run/token\n"),
                "user 'deployer' references a tokenFile, only an inline token is supported",
            ),
            (
                kubeconfig("", "    client-certificate: /tls.crt\n"),
                "user 'deployer' references a client-certificate file, only client-certificate-data is supported",
            ),
            (
                kubeconfig("", "    client-key: /tls.key\n"),
                "user 'deployer' references a client-key file, only client-key-data is supported",
            ),
        ];
        for (text, message) in cases {
            let err = load(&text, KubeConfigPolicy::default()).await.unwrap_err();
            assert_eq!(err.to_string(), message);
        }
    }

    #[tokio::test]
    async fn exec_plugins_need_the_flag() {
        let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/get-token\n";
        let text = kubeconfig("", exec);
        let err = load(&text, KubeConfigPolicy::default()).await.unwrap_err();
        assert!(matches!(err, KubeConfigError::ExecNotAllowed(ref user) if user == "deployer"));
        assert!(err.to_string().contains("--insecure-kubeconfig-exec"));
        let allowed = KubeConfigPolicy {
            allow_exec: true,
            ..KubeConfigPolicy::default()
        };
        let config = load(&text, allowed).await.unwrap();
        assert!(config.auth_info.exec.is_some());
        // Beside another credential the plugin is dropped, as Flux drops it.
        let text = kubeconfig("", &format!("    token: abc\n{exec}"));
        let config = load(&text, KubeConfigPolicy::default()).await.unwrap();
        assert!(config.auth_info.exec.is_none());
    }

    #[tokio::test]
    async fn skipping_tls_verification_needs_the_flag() {
        let text = kubeconfig("    insecure-skip-tls-verify: true\n", "    token: abc\n");
        let err = load(&text, KubeConfigPolicy::default()).await.unwrap_err();
        assert!(
            err.to_string().contains("--insecure-kubeconfig-tls"),
            "{err}"
        );
        let allowed = KubeConfigPolicy {
            allow_insecure_tls: true,
            ..KubeConfigPolicy::default()
        };
        assert!(load(&text, allowed).await.unwrap().accept_invalid_certs);
        // With a CA to verify against, the setting is dropped, as Flux drops it.
        let text = kubeconfig(
            &format!("    insecure-skip-tls-verify: true\n    certificate-authority-data: {CA}\n"),
            "    token: abc\n",
        );
        let config = load(&text, KubeConfigPolicy::default()).await.unwrap();
        assert!(!config.accept_invalid_certs);
    }

    #[tokio::test]
    async fn the_kubeconfigs_own_impersonation_is_dropped() {
        let text = kubeconfig(
            "",
            "    token: abc\n    as: admin\n    as-groups: [system:masters]\n",
        );
        let config = load(&text, KubeConfigPolicy::default()).await.unwrap();
        assert!(config.auth_info.impersonate.is_none());
        assert!(config.auth_info.impersonate_groups.is_none());
    }

    #[tokio::test]
    async fn unreadable_text_is_refused_without_its_content() {
        let err = load("token: [s3cr3t", KubeConfigPolicy::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the kubeconfig is not a valid kubeconfig YAML document at line 1 column 8"
        );
        let err = load(
            "users: [{name: a, user: {token: [s3cr3t]}}]",
            KubeConfigPolicy::default(),
        )
        .await
        .unwrap_err();
        assert!(!err.to_string().contains("s3cr3t"), "{err}");
        let err = load(
            "apiVersion: v1\nkind: Config\nclusters: []\n",
            KubeConfigPolicy::default(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, KubeConfigError::Load(_)), "{err}");
    }
}
