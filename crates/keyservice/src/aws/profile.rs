//! The AWS shared config and credentials files (`~/.aws/config`, `~/.aws/credentials`, or
//! `AWS_CONFIG_FILE` and `AWS_SHARED_CREDENTIALS_FILE`), read as the AWS SDK for Go reads
//! them for sops: a profile's static keys, a role assumed with another profile's credentials
//! (`role_arn` and `source_profile`), or a role assumed with a web identity token file
//! (`role_arn` and `web_identity_token_file`). Settings that run programs or sign in
//! interactively (`credential_process`, SSO) are refused by name.

use std::collections::HashMap;

use zeroize::Zeroizing;

/// How many `source_profile` links a chain may follow (a cycle is refused before that).
const MAX_CHAIN: usize = 8;

/// The name of the profile read when `AWS_PROFILE` is not set.
pub const DEFAULT_PROFILE: &str = "default";

/// Where a profile's credentials come from.
#[derive(Clone, PartialEq, Eq)]
pub enum ProfileCredentials {
    /// `aws_access_key_id`, `aws_secret_access_key` and, for a session,
    /// `aws_session_token`.
    Static {
        /// The access key ID.
        id: String,
        /// The secret access key.
        secret: Zeroizing<String>,
        /// The session token, if any.
        token: Option<Zeroizing<String>>,
    },
    /// `role_arn` assumed with the credentials of `source_profile`.
    AssumeRole {
        /// The role.
        role_arn: String,
        /// `role_session_name`, if set.
        session_name: Option<String>,
        /// `external_id`, if set.
        external_id: Option<String>,
        /// The source profile's credentials.
        source: Box<ProfileCredentials>,
    },
    /// `role_arn` assumed with the token in `web_identity_token_file`.
    WebIdentity {
        /// The role.
        role_arn: String,
        /// The token file.
        token_file: String,
        /// `role_session_name`, if set.
        session_name: Option<String>,
    },
}

impl std::fmt::Debug for ProfileCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileCredentials::Static { id, .. } => f
                .debug_struct("Static")
                .field("id", id)
                .finish_non_exhaustive(),
            ProfileCredentials::AssumeRole {
                role_arn, source, ..
            } => f
                .debug_struct("AssumeRole")
                .field("role_arn", role_arn)
                .field("source", source)
                .finish_non_exhaustive(),
            ProfileCredentials::WebIdentity {
                role_arn,
                token_file,
                ..
            } => f
                .debug_struct("WebIdentity")
                .field("role_arn", role_arn)
                .field("token_file", token_file)
                .finish_non_exhaustive(),
        }
    }
}

/// Why a profile gives no usable credentials (never a key or token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// Neither file has the profile.
    #[error("AWS profile '{0}' is not in the shared config or credentials files")]
    NotFound(String),
    /// The profile has none of the settings that give credentials.
    #[error(
        "AWS profile '{0}' has no credentials (aws_access_key_id and aws_secret_access_key, role_arn with source_profile, or role_arn with web_identity_token_file)"
    )]
    NoCredentials(String),
    /// Only one of the two static keys is set.
    #[error("AWS profile '{profile}' sets {set} without {missing}")]
    HalfKey {
        /// The profile.
        profile: String,
        /// The key that is set.
        set: &'static str,
        /// The key that is missing.
        missing: &'static str,
    },
    /// A setting this controller does not run.
    #[error(
        "AWS profile '{profile}' uses {setting}, which this controller does not support: give it static keys, or a role_arn with source_profile or web_identity_token_file"
    )]
    Unsupported {
        /// The profile.
        profile: String,
        /// The setting.
        setting: &'static str,
    },
    /// `source_profile` links loop or run too long.
    #[error("AWS profile '{0}' has a source_profile chain that loops or is longer than 8")]
    Chain(String),
}

/// The settings of every profile in both files; the credentials file's win.
#[derive(Debug, Default)]
pub struct SharedFiles {
    profiles: HashMap<String, HashMap<String, Zeroizing<String>>>,
}

impl SharedFiles {
    /// Reads the text of the config file and of the credentials file (either may be empty).
    pub fn parse(config: &str, credentials: &str) -> Self {
        let mut files = SharedFiles::default();
        files.add(config, true);
        files.add(credentials, false);
        files
    }

    /// Whether the files have the profile at all.
    pub fn has(&self, profile: &str) -> bool {
        self.profiles.contains_key(profile)
    }

    /// Adds the profiles of one file. In the config file a section is `[profile name]`
    /// (`[default]` too); in the credentials file it is `[name]`.
    fn add(&mut self, text: &str, is_config: bool) {
        let mut section: Option<String> = None;
        for line in text.lines() {
            // Indented lines continue a nested setting (`s3 =` ...): not credentials.
            if line.starts_with([' ', '\t']) {
                continue;
            }
            let line = line.trim();
            if line.is_empty() || line.starts_with(['#', ';']) {
                continue;
            }
            if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let header = header.trim();
                section = if is_config {
                    match header.strip_prefix("profile ") {
                        Some(name) => Some(name.trim().to_string()),
                        None if header == DEFAULT_PROFILE => Some(header.to_string()),
                        // `[sso-session x]`, `[services x]`: not profiles.
                        None => None,
                    }
                } else {
                    Some(header.to_string())
                };
                if let Some(name) = &section {
                    self.profiles.entry(name.clone()).or_default();
                }
                continue;
            }
            let (Some(name), Some((key, value))) = (&section, line.split_once('=')) else {
                continue;
            };
            let value = value.trim();
            if let Some(settings) = self.profiles.get_mut(name) {
                settings.insert(
                    key.trim().to_ascii_lowercase(),
                    Zeroizing::new(value.to_string()),
                );
            }
        }
    }

    /// The credentials of `profile`.
    pub fn credentials(&self, profile: &str) -> Result<ProfileCredentials, ProfileError> {
        self.resolve(profile, &mut Vec::new())
    }

    fn resolve(
        &self,
        profile: &str,
        visited: &mut Vec<String>,
    ) -> Result<ProfileCredentials, ProfileError> {
        if visited.iter().any(|p| p == profile) || visited.len() >= MAX_CHAIN {
            return Err(ProfileError::Chain(
                visited.first().cloned().unwrap_or_default(),
            ));
        }
        visited.push(profile.to_string());
        let settings = self
            .profiles
            .get(profile)
            .ok_or_else(|| ProfileError::NotFound(profile.to_string()))?;
        let get = |key: &str| {
            settings
                .get(key)
                .map(|v| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let owned = |key: &str| get(key).map(str::to_string);
        if let Some(role_arn) = owned("role_arn") {
            if let Some(token_file) = owned("web_identity_token_file") {
                return Ok(ProfileCredentials::WebIdentity {
                    role_arn,
                    token_file,
                    session_name: owned("role_session_name"),
                });
            }
            if let Some(source) = get("source_profile") {
                // A profile may name itself as source for its own static keys.
                let source = if source == profile {
                    self.static_keys(profile, get)?
                        .ok_or_else(|| ProfileError::NoCredentials(profile.to_string()))?
                } else {
                    self.resolve(source, visited)?
                };
                return Ok(ProfileCredentials::AssumeRole {
                    role_arn,
                    session_name: owned("role_session_name"),
                    external_id: owned("external_id"),
                    source: Box::new(source),
                });
            }
            if get("credential_source").is_some() {
                return Err(ProfileError::Unsupported {
                    profile: profile.to_string(),
                    setting: "credential_source",
                });
            }
        }
        if let Some(keys) = self.static_keys(profile, get)? {
            return Ok(keys);
        }
        let unsupported = [
            ("credential_process", "credential_process"),
            ("sso_session", "SSO (sso_session)"),
            ("sso_start_url", "SSO (sso_start_url)"),
        ];
        if let Some((_, setting)) = unsupported.iter().find(|(key, _)| get(key).is_some()) {
            return Err(ProfileError::Unsupported {
                profile: profile.to_string(),
                setting,
            });
        }
        Err(ProfileError::NoCredentials(profile.to_string()))
    }

    /// The profile's static keys, if it sets them.
    fn static_keys<'a>(
        &self,
        profile: &str,
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<ProfileCredentials>, ProfileError> {
        const ID: &str = "aws_access_key_id";
        const SECRET: &str = "aws_secret_access_key";
        match (get(ID), get(SECRET)) {
            (Some(id), Some(secret)) => Ok(Some(ProfileCredentials::Static {
                id: id.to_string(),
                secret: Zeroizing::new(secret.to_string()),
                token: get("aws_session_token").map(|t| Zeroizing::new(t.to_string())),
            })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(ProfileError::HalfKey {
                profile: profile.to_string(),
                set: ID,
                missing: SECRET,
            }),
            (None, Some(_)) => Err(ProfileError::HalfKey {
                profile: profile.to_string(),
                set: SECRET,
                missing: ID,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "\
# comment
[default]
region = us-east-1

[profile deployer]
role_arn = arn:aws:iam::123456789012:role/deploy
source_profile = team
external_id = ext-1
s3 =
  max_concurrent_requests = 20

[profile ci]
role_arn = arn:aws:iam::123456789012:role/ci
web_identity_token_file = /var/run/token
role_session_name = ci-session

[profile tool]
credential_process = /usr/bin/creds

[profile portal]
sso_session = corp

[sso-session corp]
sso_start_url = https://example.awsapps.com/start

[profile loop-a]
role_arn = arn:aws:iam::123456789012:role/a
source_profile = loop-b

[profile loop-b]
role_arn = arn:aws:iam::123456789012:role/b
source_profile = loop-a

[profile self]
role_arn = arn:aws:iam::123456789012:role/self
source_profile = self
aws_access_key_id = SELFID
aws_secret_access_key = selfsecret
";

    const CREDENTIALS: &str = "\
[default]
aws_access_key_id = DEFAULTID
aws_secret_access_key = defaultsecret

[team]
aws_access_key_id=TEAMID
aws_secret_access_key=teamsecret
aws_session_token = teamtoken

; half a key
[half]
aws_access_key_id = HALF
";

    fn files() -> SharedFiles {
        SharedFiles::parse(CONFIG, CREDENTIALS)
    }

    fn static_id(credentials: &ProfileCredentials) -> &str {
        match credentials {
            ProfileCredentials::Static { id, .. } => id,
            other => panic!("not static: {other:?}"),
        }
    }

    #[test]
    fn static_keys_come_from_either_file_with_the_credentials_file_winning() {
        let files = files();
        let default = files.credentials("default").unwrap();
        assert_eq!(static_id(&default), "DEFAULTID");
        let team = files.credentials("team").unwrap();
        match &team {
            ProfileCredentials::Static { id, secret, token } => {
                assert_eq!(id, "TEAMID");
                assert_eq!(secret.as_str(), "teamsecret");
                assert_eq!(token.as_deref().map(String::as_str), Some("teamtoken"));
            }
            other => panic!("{other:?}"),
        }
        let both = SharedFiles::parse(
            "[profile x]\naws_access_key_id = CONFIGID\naws_secret_access_key = c\n",
            "[x]\naws_access_key_id = CREDID\naws_secret_access_key = k\n",
        );
        assert_eq!(static_id(&both.credentials("x").unwrap()), "CREDID");
    }

    #[test]
    fn roles_are_assumed_with_a_source_profile_or_a_web_identity_token_file() {
        let files = files();
        match files.credentials("deployer").unwrap() {
            ProfileCredentials::AssumeRole {
                role_arn,
                external_id,
                source,
                session_name,
            } => {
                assert_eq!(role_arn, "arn:aws:iam::123456789012:role/deploy");
                assert_eq!(external_id.as_deref(), Some("ext-1"));
                assert_eq!(session_name, None);
                assert_eq!(static_id(&source), "TEAMID");
            }
            other => panic!("{other:?}"),
        }
        match files.credentials("self").unwrap() {
            ProfileCredentials::AssumeRole { source, .. } => {
                assert_eq!(static_id(&source), "SELFID")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            files.credentials("ci").unwrap(),
            ProfileCredentials::WebIdentity {
                role_arn: "arn:aws:iam::123456789012:role/ci".into(),
                token_file: "/var/run/token".into(),
                session_name: Some("ci-session".into()),
            }
        );
    }

    #[test]
    fn what_gives_no_credentials_is_named() {
        let files = files();
        let message = |profile: &str| files.credentials(profile).unwrap_err().to_string();
        assert!(message("absent").contains("'absent' is not in the shared"));
        assert!(message("tool").contains("credential_process"));
        assert!(message("portal").contains("SSO (sso_session)"));
        assert!(message("loop-a").contains("loops"));
        assert!(message("half").contains("aws_access_key_id without aws_secret_access_key"));
        // `[sso-session corp]` is not a profile.
        assert!(!files.has("corp") && !files.has("sso-session corp"));
        let bare = SharedFiles::parse("[profile bare]\nregion = eu-west-1\n", "");
        assert!(
            bare.credentials("bare")
                .unwrap_err()
                .to_string()
                .contains("has no credentials")
        );
        // No message carries a secret.
        for profile in ["absent", "tool", "portal", "loop-a", "half"] {
            let text = message(profile);
            assert!(!text.contains("secret") || text.contains("aws_secret_access_key"));
            assert!(!text.contains("HALF"), "{text}");
        }
    }
}
