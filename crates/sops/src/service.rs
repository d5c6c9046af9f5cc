//! Master keys held by key services (AWS KMS, GCP KMS, Azure Key Vault, HashiCorp Vault
//! transit, Huawei Cloud KMS), and the trait through which a caller opens them.
//!
//! This crate does no I/O: reaching a key service is the caller's job. A [`KeyService`]
//! given to the [`Keyring`](crate::Keyring) is asked for each service key sops would ask its
//! key services for, in the order sops tries them.

use std::fmt;

use zeroize::Zeroizing;

/// A key held by a key service, as a file's metadata names it.
#[derive(Clone, PartialEq, Eq)]
pub enum ServiceKey {
    /// An AWS KMS key (`kms` entries).
    AwsKms {
        /// The key's ARN (a key or an alias).
        arn: String,
        /// A role to assume before calling KMS, or empty.
        role: String,
        /// The encryption context, in file order.
        context: Vec<(String, String)>,
        /// The AWS profile sops was told to use, or empty.
        profile: String,
    },
    /// A GCP Cloud KMS key (`gcp_kms` entries).
    GcpKms {
        /// `projects/P/locations/L/keyRings/R/cryptoKeys/K`.
        resource_id: String,
    },
    /// An Azure Key Vault key (`azure_kv` entries).
    AzureKeyVault {
        /// `https://NAME.vault.azure.net`.
        vault_url: String,
        /// The key's name.
        name: String,
        /// The key's version.
        version: String,
    },
    /// A HashiCorp Vault (or OpenBao) transit key (`hc_vault` entries).
    HcVault {
        /// The server's address, e.g. `https://vault.example.com:8200`.
        address: String,
        /// The transit engine's mount path.
        engine_path: String,
        /// The transit key's name.
        key_name: String,
    },
    /// A Huawei Cloud KMS key (`hckms` entries).
    HuaweiKms {
        /// `region:key-uuid`.
        key_id: String,
    },
}

impl ServiceKey {
    /// The metadata field listing keys of this kind (`kms`, `gcp_kms`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceKey::AwsKms { .. } => "kms",
            ServiceKey::GcpKms { .. } => "gcp_kms",
            ServiceKey::AzureKeyVault { .. } => "azure_kv",
            ServiceKey::HcVault { .. } => "hc_vault",
            ServiceKey::HuaweiKms { .. } => "hckms",
        }
    }

    /// The service's name as users know it.
    pub fn service_name(&self) -> &'static str {
        match self {
            ServiceKey::AwsKms { .. } => "AWS KMS",
            ServiceKey::GcpKms { .. } => "GCP KMS",
            ServiceKey::AzureKeyVault { .. } => "Azure Key Vault",
            ServiceKey::HcVault { .. } => "HashiCorp Vault transit",
            ServiceKey::HuaweiKms { .. } => "Huawei Cloud KMS",
        }
    }

    /// The key's public identifier, as sops prints it (ARN, resource id, key URL).
    pub fn id(&self) -> String {
        match self {
            ServiceKey::AwsKms { arn, role, .. } if !role.is_empty() => format!("{arn}+{role}"),
            ServiceKey::AwsKms { arn, .. } => arn.clone(),
            ServiceKey::GcpKms { resource_id } => resource_id.clone(),
            ServiceKey::AzureKeyVault {
                vault_url,
                name,
                version,
            } => format!("{}/keys/{name}/{version}", vault_url.trim_end_matches('/')),
            ServiceKey::HcVault {
                address,
                engine_path,
                key_name,
            } => format!(
                "{}/v1/{}/keys/{key_name}",
                address.trim_end_matches('/'),
                engine_path.trim_matches('/')
            ),
            ServiceKey::HuaweiKms { key_id } => key_id.clone(),
        }
    }
}

impl fmt::Debug for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind(), self.id())
    }
}

/// Why a key service did not open a data key. The message names the service and the key
/// and says what went wrong; it never carries a data key, a credential or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No credentials (or no client) for this kind of key: the key is skipped, as sops skips
    /// a key none of its key services handles.
    #[error("no {0} credentials configured")]
    NotConfigured(&'static str),
    /// The service was asked and refused or failed.
    #[error("{0}")]
    Failed(String),
    /// The service named `service` (`AWS KMS`, ...) was asked and refused or failed; its
    /// typed error is kept as the source.
    #[error("{service}: {source}")]
    Service {
        /// The service's name, as [`ServiceKey::service_name`] gives it.
        service: &'static str,
        /// Why it failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Opens data keys held by key services. Implemented outside this crate, which does no I/O.
pub trait KeyService: Send + Sync {
    /// The data key (or Shamir part) that `enc` holds, encrypted by `key`'s service.
    fn decrypt(&self, key: &ServiceKey, enc: &str) -> Result<Zeroizing<Vec<u8>>, ServiceError>;
}
