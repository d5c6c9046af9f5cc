//! The `sops` metadata block: master keys (in key groups), encryption rules, MAC and
//! `lastmodified`, read with the weak typing sops applies (dotenv and INI store every value
//! as a string).

use std::fmt;

use super::service::ServiceKey;
use super::tree::{Branch, Key, Value};

/// A malformed metadata block; names the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MetadataError {
    /// A required field is absent.
    #[error("sops metadata has no '{0}'")]
    Missing(&'static str),
    /// A field has the wrong type or shape.
    #[error("sops metadata field '{0}' is not {1}")]
    Invalid(String, &'static str),
    /// More than one encryption rule, which sops refuses.
    #[error(
        "sops metadata sets more than one of encrypted_suffix, unencrypted_suffix, encrypted_regex, unencrypted_regex, encrypted_comment_regex, unencrypted_comment_regex"
    )]
    SeveralRules,
    /// Neither top-level keys nor key groups.
    #[error("sops metadata lists no keys")]
    NoKeys,
    /// `version` is missing, empty or not a semantic version; sops refuses such files when
    /// it decrypts them (its words follow the field name).
    #[error("sops metadata field 'version' is invalid: {0}")]
    Version(#[source] SemverError),
}

/// Which values of the file are encrypted (one rule at most; sops' default is the
/// `_unencrypted` suffix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Values under a key ending with the suffix are plain.
    UnencryptedSuffix(String),
    /// Only values under a key ending with the suffix are encrypted.
    EncryptedSuffix(String),
    /// Values under a key matching the regex are plain.
    UnencryptedRegex(String),
    /// Only values under a key matching the regex are encrypted.
    EncryptedRegex(String),
    /// Values after a comment matching the regex are plain.
    UnencryptedCommentRegex(String),
    /// Only values after a comment matching the regex are encrypted.
    EncryptedCommentRegex(String),
}

/// One wrapped copy of the data key (or of one Shamir part of it).
#[derive(Clone, PartialEq, Eq)]
pub enum MasterKey {
    /// An age recipient and the armored age file holding the key.
    Age { recipient: String, enc: String },
    /// An OpenPGP key fingerprint and the armored message holding the key.
    Pgp { fingerprint: String, enc: String },
    /// A key held by a key service (cloud KMS, Vault) and the data key as it encrypted it.
    Service { key: ServiceKey, enc: String },
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl MasterKey {
    /// The key type as the metadata names it (`age`, `pgp`, `kms`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            MasterKey::Age { .. } => "age",
            MasterKey::Pgp { .. } => "pgp",
            MasterKey::Service { key, .. } => key.kind(),
        }
    }

    /// The key type and its public identifier (recipient, fingerprint, ARN, ...).
    pub fn describe(&self) -> String {
        match self {
            MasterKey::Age { recipient, .. } => format!("age {recipient}"),
            MasterKey::Pgp { fingerprint, .. } => format!("pgp {fingerprint}"),
            MasterKey::Service { key, .. } => format!("{} {}", key.kind(), key.id()),
        }
    }

    /// Order in which sops tries the keys of a group (`DefaultDecryptionOrder`: age, pgp,
    /// then the rest in file order).
    fn priority(&self) -> u8 {
        match self {
            MasterKey::Age { .. } => 0,
            MasterKey::Pgp { .. } => 1,
            MasterKey::Service { .. } => 2,
        }
    }
}

/// The parsed `sops` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// Key groups, each able to recover the data key (one group) or one Shamir part of it.
    pub key_groups: Vec<Vec<MasterKey>>,
    /// Parts needed when there are several groups.
    pub shamir_threshold: usize,
    /// `lastmodified` as RFC 3339 (the MAC's additional data).
    pub last_modified: String,
    /// The encrypted MAC.
    pub mac: String,
    /// The encryption rule.
    pub rule: Rule,
    /// Whether the MAC covers only encrypted values.
    pub mac_only_encrypted: bool,
}

impl Metadata {
    /// Reads the metadata branch a store split off the file.
    pub fn parse(branch: &Branch) -> Result<Metadata, MetadataError> {
        let last_modified =
            string(branch, "lastmodified")?.ok_or(MetadataError::Missing("lastmodified"))?;
        let last_modified = super::go_text::time_rfc3339(&last_modified)
            .ok_or_else(|| MetadataError::Invalid("lastmodified".into(), "an RFC 3339 time"))?;
        let mac = string(branch, "mac")?.unwrap_or_default();
        let mac_only_encrypted = match field(branch, "mac_only_encrypted") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => super::go_text::parse_bool(s)
                .ok_or_else(|| MetadataError::Invalid("mac_only_encrypted".into(), "a boolean"))?,
            Some(_) => {
                return Err(MetadataError::Invalid(
                    "mac_only_encrypted".into(),
                    "a boolean",
                ));
            }
        };
        let shamir_threshold = match field(branch, "shamir_threshold") {
            None | Some(Value::Null) => 0,
            Some(Value::Int(i)) => usize::try_from(*i).unwrap_or(0),
            Some(Value::String(s)) => s
                .parse()
                .map_err(|_| MetadataError::Invalid("shamir_threshold".into(), "an integer"))?,
            Some(_) => {
                return Err(MetadataError::Invalid(
                    "shamir_threshold".into(),
                    "an integer",
                ));
            }
        };
        let metadata = Metadata {
            key_groups: key_groups(branch)?,
            shamir_threshold,
            last_modified,
            mac,
            rule: rule(branch)?,
            mac_only_encrypted,
        };
        // sops checks the version once the file is loaded, before it decrypts anything.
        check_version(string(branch, "version")?.as_deref().unwrap_or(""))?;
        Ok(metadata)
    }

    /// Every master key of every group, in file order.
    pub fn master_keys(&self) -> impl Iterator<Item = &MasterKey> {
        self.key_groups.iter().flatten()
    }
}

/// A group's keys in the order sops tries them.
pub fn decryption_order(group: &[MasterKey]) -> Vec<&MasterKey> {
    let mut keys: Vec<&MasterKey> = group.iter().collect();
    keys.sort_by_key(|k| k.priority());
    keys
}

fn field<'a>(branch: &'a Branch, name: &str) -> Option<&'a Value> {
    branch.iter().find_map(|item| match &item.key {
        Key::Name(k) if k == name => Some(&item.value),
        _ => None,
    })
}

/// A string field, weakly typed (numbers and booleans print as text), `None` when absent or
/// empty.
fn string(branch: &Branch, name: &str) -> Result<Option<String>, MetadataError> {
    let text = match field(branch, name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) | Some(Value::Time(s)) => s.clone(),
        Some(Value::Int(i)) => i.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Float(f)) => super::go_text::format_float(*f),
        Some(_) => return Err(MetadataError::Invalid(name.to_owned(), "a string")),
    };
    Ok((!text.is_empty()).then_some(text))
}

/// sops' check of the version that wrote the file (`AIsNewerThanB` in `sops decrypt`): a
/// `1.x` version passes; otherwise, less a leading `v`, it must be a semantic version as
/// blang/semver reads it. The messages are semver's.
fn check_version(version: &str) -> Result<(), MetadataError> {
    if version.starts_with("1.") {
        return Ok(());
    }
    let version = version.strip_prefix('v').unwrap_or(version);
    semver(version).map_err(MetadataError::Version)
}

/// Why a version is not a semantic version, in blang/semver's words.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SemverError {
    /// The version is empty.
    #[error("Version string empty")]
    Empty,
    /// Fewer than three dot-separated parts.
    #[error("No Major.Minor.Patch elements found")]
    NoMajorMinorPatch,
    /// A version number that is not decimal digits.
    #[error("Invalid character(s) found in {} number {text:?}", part.lower())]
    NumberCharacters {
        /// Which number.
        part: Part,
        /// The number as written.
        text: String,
    },
    /// A version number with a leading zero.
    #[error("{} number must not contain leading zeroes {text:?}", part.capitalized())]
    NumberLeadingZero {
        /// Which number.
        part: Part,
        /// The number as written.
        text: String,
    },
    /// A version number beyond 64 bits.
    #[error("strconv.ParseUint: parsing {text:?}: invalid syntax or value out of range")]
    NumberRange {
        /// The number as written.
        text: String,
    },
    /// An empty prerelease identifier.
    #[error("Prerelease is empty")]
    EmptyPrerelease,
    /// A numeric prerelease identifier with a leading zero.
    #[error("Numeric PreRelease version must not contain leading zeroes {text:?}")]
    PrereleaseLeadingZero {
        /// The identifier.
        text: String,
    },
    /// A prerelease identifier with characters other than `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in prerelease {text:?}")]
    PrereleaseCharacters {
        /// The identifier.
        text: String,
    },
    /// An empty build metadata identifier.
    #[error("Build meta data is empty")]
    EmptyBuild,
    /// A build metadata identifier with characters other than `[0-9A-Za-z-]`.
    #[error("Invalid character(s) found in build meta data {text:?}")]
    BuildCharacters {
        /// The identifier.
        text: String,
    },
}

/// One of the three numbers of a semantic version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The major version.
    Major,
    /// The minor version.
    Minor,
    /// The patch version.
    Patch,
}

impl Part {
    fn lower(self) -> &'static str {
        match self {
            Part::Major => "major",
            Part::Minor => "minor",
            Part::Patch => "patch",
        }
    }

    fn capitalized(self) -> &'static str {
        match self {
            Part::Major => "Major",
            Part::Minor => "Minor",
            Part::Patch => "Patch",
        }
    }
}

fn semver(s: &str) -> Result<(), SemverError> {
    const ALPHANUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789";
    let only = |s: &str, set: &str| s.chars().all(|c| set.contains(c));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let leading_zero = |s: &str| s.len() > 1 && s.starts_with('0');
    let number = |text: &str, part: Part| -> Result<(), SemverError> {
        if !digits(text) {
            return Err(SemverError::NumberCharacters {
                part,
                text: text.to_string(),
            });
        }
        if leading_zero(text) {
            return Err(SemverError::NumberLeadingZero {
                part,
                text: text.to_string(),
            });
        }
        text.parse::<u64>()
            .map(|_| ())
            .map_err(|_| SemverError::NumberRange {
                text: text.to_string(),
            })
    };
    if s.is_empty() {
        return Err(SemverError::Empty);
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    let [major, minor, rest] = parts.as_slice() else {
        return Err(SemverError::NoMajorMinorPatch);
    };
    number(major, Part::Major)?;
    number(minor, Part::Minor)?;
    let (rest, build) = match rest.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (*rest, None),
    };
    let (patch, pre) = match rest.split_once('-') {
        Some((patch, pre)) => (patch, Some(pre)),
        None => (rest, None),
    };
    number(patch, Part::Patch)?;
    for part in pre.into_iter().flat_map(|p| p.split('.')) {
        if part.is_empty() {
            return Err(SemverError::EmptyPrerelease);
        }
        if digits(part) && leading_zero(part) {
            return Err(SemverError::PrereleaseLeadingZero {
                text: part.to_string(),
            });
        }
        if !only(part, ALPHANUM) {
            return Err(SemverError::PrereleaseCharacters {
                text: part.to_string(),
            });
        }
    }
    for part in build.into_iter().flat_map(|b| b.split('.')) {
        if part.is_empty() {
            return Err(SemverError::EmptyBuild);
        }
        if !only(part, ALPHANUM) {
            return Err(SemverError::BuildCharacters {
                text: part.to_string(),
            });
        }
    }
    Ok(())
}

fn rule(branch: &Branch) -> Result<Rule, MetadataError> {
    type MakeRule = fn(String) -> Rule;
    let candidates: [(&str, MakeRule); 6] = [
        ("unencrypted_suffix", Rule::UnencryptedSuffix),
        ("encrypted_suffix", Rule::EncryptedSuffix),
        ("unencrypted_regex", Rule::UnencryptedRegex),
        ("encrypted_regex", Rule::EncryptedRegex),
        ("unencrypted_comment_regex", Rule::UnencryptedCommentRegex),
        ("encrypted_comment_regex", Rule::EncryptedCommentRegex),
    ];
    let mut found = None;
    for (name, make) in candidates {
        if let Some(value) = string(branch, name)? {
            if found.is_some() {
                return Err(MetadataError::SeveralRules);
            }
            found = Some(make(value));
        }
    }
    Ok(found.unwrap_or_else(|| Rule::UnencryptedSuffix("_unencrypted".to_owned())))
}

fn key_groups(branch: &Branch) -> Result<Vec<Vec<MasterKey>>, MetadataError> {
    let top = group(branch, "")?;
    if !top.is_empty() {
        return Ok(vec![top]);
    }
    let groups = match field(branch, "key_groups") {
        Some(Value::Seq(groups)) => groups,
        None | Some(Value::Null) => return Err(MetadataError::NoKeys),
        Some(_) => return Err(MetadataError::Invalid("key_groups".into(), "a list")),
    };
    let mut out = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        match g {
            Value::Map(items) => out.push(group(items, &format!("key_groups[{i}]."))?),
            Value::Comment(_) => {}
            _ => {
                return Err(MetadataError::Invalid(
                    format!("key_groups[{i}]"),
                    "a mapping",
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(MetadataError::NoKeys);
    }
    Ok(out)
}

/// The keys of one group, in the order sops builds a group (key services, pgp, age).
fn group(branch: &Branch, prefix: &str) -> Result<Vec<MasterKey>, MetadataError> {
    let mut keys = Vec::new();
    let text = |entry: &Branch, name: &str| string(entry, name).map(Option::unwrap_or_default);
    for entry in entries(branch, "kms", prefix)? {
        let key = ServiceKey::AwsKms {
            arn: text(entry, "arn")?,
            role: text(entry, "role")?,
            context: encryption_context(entry, &format!("{prefix}kms.context"))?,
            profile: text(entry, "aws_profile")?,
        };
        keys.push(service(entry, key)?);
    }
    for entry in entries(branch, "gcp_kms", prefix)? {
        let resource_id = text(entry, "resource_id")?;
        keys.push(service(entry, ServiceKey::GcpKms { resource_id })?);
    }
    for entry in entries(branch, "hckms", prefix)? {
        let key_id = text(entry, "key_id")?;
        keys.push(service(entry, ServiceKey::HuaweiKms { key_id })?);
    }
    for entry in entries(branch, "azure_kv", prefix)? {
        let key = ServiceKey::AzureKeyVault {
            vault_url: text(entry, "vault_url")?,
            name: text(entry, "name")?,
            version: text(entry, "version")?,
        };
        keys.push(service(entry, key)?);
    }
    for entry in entries(branch, "hc_vault", prefix)? {
        let key = ServiceKey::HcVault {
            address: text(entry, "vault_address")?,
            engine_path: text(entry, "engine_path")?,
            key_name: text(entry, "key_name")?,
        };
        keys.push(service(entry, key)?);
    }
    for entry in entries(branch, "pgp", prefix)? {
        keys.push(MasterKey::Pgp {
            fingerprint: string(entry, "fp")?.unwrap_or_default(),
            enc: string(entry, "enc")?.unwrap_or_default(),
        });
    }
    for entry in entries(branch, "age", prefix)? {
        keys.push(MasterKey::Age {
            recipient: string(entry, "recipient")?.unwrap_or_default(),
            enc: string(entry, "enc")?.unwrap_or_default(),
        });
    }
    Ok(keys)
}

fn service(entry: &Branch, key: ServiceKey) -> Result<MasterKey, MetadataError> {
    let enc = string(entry, "enc")?.unwrap_or_default();
    Ok(MasterKey::Service { key, enc })
}

/// A `kms` entry's `context`: a mapping of strings (values weakly typed, as sops reads them).
fn encryption_context(entry: &Branch, path: &str) -> Result<Vec<(String, String)>, MetadataError> {
    let items = match field(entry, "context") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Map(items)) => items,
        Some(_) => return Err(MetadataError::Invalid(path.to_owned(), "a mapping")),
    };
    let mut context = Vec::new();
    for item in items {
        let Key::Name(name) = &item.key else {
            continue;
        };
        if let Some(value) = string(items, name)? {
            context.push((name.clone(), value));
        }
    }
    Ok(context)
}

fn entries<'a>(
    branch: &'a Branch,
    name: &str,
    prefix: &str,
) -> Result<Vec<&'a Branch>, MetadataError> {
    let invalid = || MetadataError::Invalid(format!("{prefix}{name}"), "a list of mappings");
    match field(branch, name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Seq(items)) => items
            .iter()
            .filter(|v| !matches!(v, Value::Comment(_)))
            .map(|v| match v {
                Value::Map(entry) => Ok(entry),
                _ => Err(invalid()),
            })
            .collect(),
        Some(_) => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Item;

    fn item(key: &str, value: Value) -> Item {
        Item {
            key: Key::Name(key.into()),
            value,
        }
    }

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    fn age(recipient: &str) -> Value {
        Value::Map(vec![
            item("recipient", s(recipient)),
            item("enc", s("-----BEGIN AGE ENCRYPTED FILE-----")),
        ])
    }

    #[test]
    fn reads_top_level_keys_and_defaults() {
        let md = Metadata::parse(&vec![
            item("age", Value::Seq(vec![age("age1a")])),
            item(
                "pgp",
                Value::Seq(vec![Value::Map(vec![
                    item("fp", s("ABCD")),
                    item("enc", s("msg")),
                ])]),
            ),
            item(
                "kms",
                Value::Seq(vec![Value::Map(vec![item("arn", s("arn:aws:kms:1"))])]),
            ),
            item("lastmodified", s("2024-05-06T07:08:09Z")),
            item("mac", s("ENC[...]")),
            item("version", s("3.13.2")),
        ])
        .unwrap();
        assert_eq!(md.key_groups.len(), 1);
        let kinds: Vec<_> = md.key_groups[0].iter().map(MasterKey::kind).collect();
        assert_eq!(kinds, ["kms", "pgp", "age"]);
        let order: Vec<_> = decryption_order(&md.key_groups[0])
            .iter()
            .map(|k| k.kind())
            .collect();
        assert_eq!(order, ["age", "pgp", "kms"]);
        assert_eq!(md.rule, Rule::UnencryptedSuffix("_unencrypted".into()));
        assert!(!md.mac_only_encrypted);
        assert_eq!(md.last_modified, "2024-05-06T07:08:09Z");
    }

    #[test]
    fn reads_every_key_service_entry_in_sops_group_order() {
        let entry = |fields: &[(&str, Value)]| {
            Value::Seq(vec![Value::Map(
                fields
                    .iter()
                    .map(|(k, v)| item(k, v.clone()))
                    .chain([item("enc", s("wrapped"))])
                    .collect(),
            )])
        };
        let md = Metadata::parse(&vec![
            item(
                "hc_vault",
                entry(&[
                    ("vault_address", s("http://127.0.0.1:8200")),
                    ("engine_path", s("sops")),
                    ("key_name", s("first")),
                ]),
            ),
            item(
                "azure_kv",
                entry(&[
                    ("vault_url", s("https://v.vault.azure.net")),
                    ("name", s("k")),
                    ("version", s("abc")),
                ]),
            ),
            item(
                "kms",
                entry(&[
                    ("arn", s("arn:aws:kms:eu-west-1:111122223333:key/k")),
                    ("role", s("arn:aws:iam::111122223333:role/r")),
                    (
                        "context",
                        Value::Map(vec![item("team", s("a")), item("n", Value::Int(1))]),
                    ),
                    ("aws_profile", s("dev")),
                ]),
            ),
            item("gcp_kms", entry(&[("resource_id", s("projects/p/k"))])),
            item("lastmodified", s("2024-05-06T07:08:09Z")),
            item("version", s("3.13.2")),
        ])
        .unwrap();
        let described: Vec<_> = md.master_keys().map(MasterKey::describe).collect();
        assert_eq!(
            described,
            [
                "kms arn:aws:kms:eu-west-1:111122223333:key/k+arn:aws:iam::111122223333:role/r",
                "gcp_kms projects/p/k",
                "azure_kv https://v.vault.azure.net/keys/k/abc",
                "hc_vault http://127.0.0.1:8200/v1/sops/keys/first",
            ]
        );
        let MasterKey::Service { key, enc } = &md.key_groups[0][0] else {
            panic!("not a service key");
        };
        assert_eq!(enc, "wrapped");
        let ServiceKey::AwsKms {
            context, profile, ..
        } = key
        else {
            panic!("not a kms key");
        };
        assert_eq!(
            context,
            &[
                ("team".to_owned(), "a".to_owned()),
                ("n".into(), "1".into())
            ]
        );
        assert_eq!(profile, "dev");
        let bad = Metadata::parse(&vec![
            item("kms", entry(&[("context", s("team:a"))])),
            item("lastmodified", s("2024-05-06T07:08:09Z")),
            item("version", s("3.13.2")),
        ]);
        assert_eq!(
            bad,
            Err(MetadataError::Invalid("kms.context".into(), "a mapping"))
        );
    }

    #[test]
    fn reads_key_groups_with_weak_typing() {
        let md = Metadata::parse(&vec![
            item(
                "key_groups",
                Value::Seq(vec![
                    Value::Map(vec![item("age", Value::Seq(vec![age("age1a")]))]),
                    Value::Map(vec![item("age", Value::Seq(vec![age("age1b")]))]),
                ]),
            ),
            item("shamir_threshold", s("2")),
            item("mac_only_encrypted", s("true")),
            item("encrypted_regex", s("^data$")),
            item("lastmodified", s("2024-05-06T07:08:09+00:00")),
            item("mac", s("m")),
            item("version", s("v3.7.1")),
        ])
        .unwrap();
        assert_eq!(md.key_groups.len(), 2);
        assert_eq!(md.shamir_threshold, 2);
        assert!(md.mac_only_encrypted);
        assert_eq!(md.rule, Rule::EncryptedRegex("^data$".into()));
        assert_eq!(md.last_modified, "2024-05-06T07:08:09Z");
    }

    #[test]
    fn refuses_bad_blocks() {
        let base = || {
            vec![
                item("age", Value::Seq(vec![age("age1a")])),
                item("lastmodified", s("2024-05-06T07:08:09Z")),
                item("version", s("3.13.2")),
            ]
        };
        let mut two_rules = base();
        two_rules.push(item("encrypted_regex", s("a")));
        two_rules.push(item("unencrypted_suffix", s("_u")));
        assert_eq!(
            Metadata::parse(&two_rules),
            Err(MetadataError::SeveralRules)
        );
        let no_keys = vec![item("lastmodified", s("2024-05-06T07:08:09Z"))];
        assert_eq!(Metadata::parse(&no_keys), Err(MetadataError::NoKeys));
        let no_time = vec![item("age", Value::Seq(vec![age("age1a")]))];
        assert_eq!(
            Metadata::parse(&no_time),
            Err(MetadataError::Missing("lastmodified"))
        );
        let mut bad_age = base();
        bad_age[0] = item("age", s("x"));
        assert!(
            matches!(Metadata::parse(&bad_age), Err(MetadataError::Invalid(f, _)) if f == "age")
        );
    }

    #[test]
    fn the_version_must_be_one_sops_accepts() {
        let with = |version: Option<Value>| {
            let mut branch = vec![
                item("age", Value::Seq(vec![age("age1a")])),
                item("lastmodified", s("2024-05-06T07:08:09Z")),
            ];
            if let Some(v) = version {
                branch.push(item("version", v));
            }
            Metadata::parse(&branch).map(|_| ())
        };
        let refused = |version: Option<Value>| match with(version) {
            Err(MetadataError::Version(error)) => error.to_string(),
            other => panic!("{other:?}"),
        };
        // sops 3.13.2's own words for each.
        assert_eq!(refused(None), "Version string empty");
        assert_eq!(refused(Some(Value::Null)), "Version string empty");
        assert_eq!(
            refused(Some(Value::Int(3))),
            "No Major.Minor.Patch elements found"
        );
        assert_eq!(
            refused(Some(s("3.7"))),
            "No Major.Minor.Patch elements found"
        );
        assert_eq!(
            refused(Some(s("3.1.2.3"))),
            "Invalid character(s) found in patch number \"2.3\""
        );
        assert_eq!(
            refused(Some(s("03.1.2"))),
            "Major number must not contain leading zeroes \"03\""
        );
        assert_eq!(
            with(Some(Value::Seq(vec![s("3.13.2")]))),
            Err(MetadataError::Invalid("version".into(), "a string"))
        );
        for accepted in [
            "3.13.2",
            "v3.7.1",
            "3.13.2-rc1",
            "1.0",
            "1.x",
            "3.0.0+build.1",
        ] {
            assert_eq!(with(Some(s(accepted))), Ok(()), "{accepted}");
        }
    }
}
