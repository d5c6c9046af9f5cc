//! SOPS decryption in the build, as Flux does it: encrypted `secretGenerator` sources and
//! patch files are decrypted before kustomize reads them (served from memory, never written
//! back to disk), and encrypted objects and Secret data values after the build.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use zeroize::Zeroizing;

use super::redact::SecretValues;
use apply::Object;
use kustomize::kustfile::Kustomization;
use kustomize::loader::{Entry, InMemoryFiles, LoadError, Loader};
use kustomize::target;
use sops::{DecryptError, Format, Keyring, Revealed};

/// The annotation that turns decryption off for one object (`disabled`, any case).
pub const DECRYPT_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/decrypt";

/// Why decryption failed; names the file, object or field, never a value.
#[derive(Debug, thiserror::Error)]
pub enum DecryptionError {
    /// A kustomization file on the way could not be read.
    #[error("error decrypting sources: {0}")]
    Kustomization(#[from] target::BuildError),
    /// A source file could not be read.
    #[error("error decrypting sources: {0}")]
    Load(#[from] LoadError),
    /// A source file is larger than sops files may be.
    #[error(
        "error decrypting sources: cannot decrypt '{path}': size ({size} bytes) exceeds the limit ({limit} bytes)"
    )]
    TooLarge {
        /// Path relative to the artifact root.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: usize,
    },
    /// A source file did not decrypt.
    #[error("error decrypting sources: failed to decrypt '{path}': {source}")]
    Source {
        /// Path relative to the artifact root.
        path: String,
        /// Why.
        source: Box<DecryptError>,
    },
    /// An encrypted object did not decrypt.
    #[error("decryption failed for '{object}': {source}")]
    Object {
        /// `Kind/name` as Flux prints it.
        object: String,
        /// Why.
        source: Box<DecryptError>,
    },
    /// A value of a decrypted object is still in sops' envelope: applying it would store
    /// the ciphertext.
    #[error(
        "decryption failed for '{object}': the value at '{path}' is still encrypted after decryption; refusing to apply ciphertext"
    )]
    StillEncrypted {
        /// `Kind/name` as Flux prints it.
        object: String,
        /// The field path, `.`-separated (list items as `[i]`).
        path: String,
    },
    /// A Secret data value is larger than sops files may be.
    #[error(
        "decryption failed for '{object}': '{secret}' Secret field '{field}' decodes to up to {size} bytes, over the limit for sops files ({limit} bytes)"
    )]
    SecretFieldTooLarge {
        /// `~G_v1_Secret/name`, as Flux prints it.
        object: String,
        /// `namespace/name`.
        secret: String,
        /// The data key.
        field: String,
        /// The most bytes it decodes to.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A Secret data value holding an encrypted file did not decrypt.
    #[error(
        "decryption failed for '{object}': failed to decrypt and format '{secret}' Secret field '{field}': {source}"
    )]
    SecretField {
        /// `~G_v1_Secret/name`, as Flux prints it.
        object: String,
        /// `namespace/name`.
        secret: String,
        /// The data key.
        field: String,
        /// Why.
        source: Box<DecryptError>,
    },
}

/// Decrypts, in memory, the encrypted generator sources and patch files reachable from the
/// kustomization in `dir` (through `resources` and `components`), and returns them for the
/// loader to serve instead of the files on disk. What was decrypted is added to `secrets`.
pub fn decrypt_sources(
    loader: &Loader,
    dir: &Path,
    top: &Kustomization,
    keys: &Keyring,
    secrets: &mut SecretValues,
) -> Result<InMemoryFiles, DecryptionError> {
    let mut walk = SourceWalk {
        loader,
        keys,
        visited_dirs: HashSet::new(),
        decrypted: HashMap::new(),
        secrets,
    };
    walk.visited_dirs.insert(dir.to_path_buf());
    walk.kustomization(dir, top)?;
    Ok(InMemoryFiles::new(walk.decrypted))
}

struct SourceWalk<'a> {
    loader: &'a Loader,
    keys: &'a Keyring,
    visited_dirs: HashSet<PathBuf>,
    decrypted: HashMap<PathBuf, Zeroizing<Vec<u8>>>,
    secrets: &'a mut SecretValues,
}

impl SourceWalk<'_> {
    fn kustomization(&mut self, dir: &Path, k: &Kustomization) -> Result<(), DecryptionError> {
        for generator in &k.secret_generator {
            for source in &generator.files {
                let (key, path) = source.split_once('=').unwrap_or((source, source));
                self.file(dir, path, Format::for_key(key))?;
            }
            let env = (!generator.env.is_empty()).then_some(&generator.env);
            for path in generator.envs.iter().chain(env) {
                let format = match Format::for_path(path) {
                    Format::Binary => Format::Dotenv,
                    other => other,
                };
                self.file(dir, path, format)?;
            }
        }
        for patch in &k.patches {
            if !patch.path.is_empty() && !is_remote(&patch.path) {
                self.file(dir, &patch.path, Format::for_path(&patch.path))?;
            }
        }
        for entry in k.resources.iter().chain(&k.bases).chain(&k.components) {
            // Files and missing entries are the build's business, as in Flux.
            let Ok(Entry::Dir(sub)) = self.loader.entry(dir, entry) else {
                continue;
            };
            if self.visited_dirs.insert(sub.clone()) && super::has_kustomization_file(&sub) {
                let nested = target::load_kustomization(self.loader, &sub)?;
                self.kustomization(&sub, &nested)?;
            }
        }
        Ok(())
    }

    fn file(&mut self, dir: &Path, name: &str, format: Format) -> Result<(), DecryptionError> {
        let path = match self.loader.entry(dir, name) {
            Ok(Entry::File(path)) => path,
            // A missing file or a directory: the build reports it.
            _ => return Ok(()),
        };
        if self.decrypted.contains_key(&path) {
            return Ok(());
        }
        let display = self.loader.display(&path);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if size > sops::MAX_ENCRYPTED_FILE_SIZE as u64 {
            return Err(DecryptionError::TooLarge {
                path: display,
                size,
                limit: sops::MAX_ENCRYPTED_FILE_SIZE,
            });
        }
        // The limit again while reading: the file may have grown since.
        let data = self
            .loader
            .read_limited(dir, name, sops::MAX_ENCRYPTED_FILE_SIZE as u64)?;
        if !format.is_encrypted(&data) {
            return Ok(());
        }
        let mut revealed = Vec::new();
        let plain = sops::decrypt_revealing(&data, format, format, self.keys, true, &mut revealed)
            .map_err(|source| DecryptionError::Source {
                path: display,
                source: Box::new(source),
            })?;
        keep_revealed(self.secrets, revealed);
        self.secrets.add_file(&String::from_utf8_lossy(&plain));
        self.decrypted.insert(path, plain);
        Ok(())
    }
}

fn is_remote(path: &str) -> bool {
    path.split_once("://")
        .is_some_and(|(scheme, rest)| !scheme.is_empty() && !rest.is_empty())
}

/// Decrypts the built objects in place: every object with a `sops` block (its MAC is not
/// required, as kustomize may have changed the object), and every Secret `data` value that
/// holds a sops-encrypted file, decrypted to the format its key names. Objects annotated
/// `kustomize.toolkit.fluxcd.io/decrypt: disabled` are left alone. What was decrypted is
/// added to `secrets`.
pub fn decrypt_objects(
    objects: &mut [Object],
    keys: &Keyring,
    secrets: &mut SecretValues,
) -> Result<(), DecryptionError> {
    for object in objects.iter_mut() {
        if is_decryption_disabled(object) {
            continue;
        }
        if has_sops_block(object) {
            let mut revealed = Vec::new();
            let decrypted = sops::decrypt_object_revealing(object.as_map(), keys, &mut revealed)
                .map_err(|source| DecryptionError::Object {
                    object: flux_id(object),
                    source: Box::new(source),
                })?;
            keep_revealed(secrets, revealed);
            let decrypted = Object::new(decrypted);
            if let Some(path) = find_envelope(&Value::Object(decrypted.as_map().clone())) {
                return Err(DecryptionError::StillEncrypted {
                    object: flux_id(&decrypted),
                    path,
                });
            }
            *object = decrypted;
        } else {
            // A `sops` block sops cannot decrypt (no MAC): its ciphertext is never applied.
            if object.as_map().get("sops").is_some_and(|s| !s.is_null())
                && let Some(path) = find_envelope(&Value::Object(object.as_map().clone()))
            {
                return Err(DecryptionError::StillEncrypted {
                    object: flux_id(object),
                    path,
                });
            }
            if object.kind() == "Secret" {
                decrypt_secret_data(object, keys, secrets)?;
            }
        }
    }
    Ok(())
}

fn decrypt_secret_data(
    secret: &mut Object,
    keys: &Keyring,
    secrets: &mut SecretValues,
) -> Result<(), DecryptionError> {
    let object = flux_id(secret);
    let id = format!(
        "{}/{}",
        secret.namespace().unwrap_or_default(),
        secret.name()
    );
    let Some(Value::Object(data)) = secret.as_map_mut().get_mut("data") else {
        return Ok(());
    };
    for (field, value) in data.iter_mut() {
        let Some(encoded) = value.as_str() else {
            continue;
        };
        // The size limit applies before anything is decoded.
        let size = decoded_len(encoded);
        if size > sops::MAX_ENCRYPTED_FILE_SIZE {
            return Err(DecryptionError::SecretFieldTooLarge {
                object: object.clone(),
                secret: id.clone(),
                field: field.clone(),
                size,
                limit: sops::MAX_ENCRYPTED_FILE_SIZE,
            });
        }
        let Ok(bytes) = STANDARD.decode(encoded) else {
            continue;
        };
        let bytes = Zeroizing::new(bytes);
        let Some(input) = Format::detect(&bytes) else {
            continue;
        };
        let mut revealed = Vec::new();
        let output = Format::for_key(field);
        let plain = sops::decrypt_revealing(&bytes, input, output, keys, true, &mut revealed)
            .map_err(|source| DecryptionError::SecretField {
                object: object.clone(),
                secret: id.clone(),
                field: field.clone(),
                source: Box::new(source),
            })?;
        keep_revealed(secrets, revealed);
        secrets.add_file(&String::from_utf8_lossy(&plain));
        *value = Value::String(STANDARD.encode(plain.as_slice()));
    }
    Ok(())
}

/// Keeps the decrypted values to mask, but not an object's identity (`apiVersion`, `kind`,
/// `metadata.name`, `metadata.namespace`, which sops encrypts under a comment rule): the
/// Kustomization's inventory publishes those anyway, and masking `Secret` or a namespace
/// everywhere would leave messages unreadable.
fn keep_revealed(secrets: &mut SecretValues, revealed: Vec<Revealed>) {
    const IDENTITY: [&str; 4] = ["apiVersion", "kind", "metadata:name", "metadata:namespace"];
    for value in revealed {
        if !IDENTITY.contains(&value.path.as_str()) {
            secrets.add(&value.text);
        }
    }
}

/// The path of the first string value (outside the `sops` block) still in sops' envelope.
fn find_envelope(value: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut String) -> Option<String> {
        match value {
            Value::String(s) if s.starts_with(sops::ENVELOPE_PREFIX) => Some(path.clone()),
            Value::Object(map) => map.iter().find_map(|(key, v)| {
                if path.is_empty() && key == "sops" {
                    return None;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = walk(v, path);
                path.truncate(len);
                found
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = walk(v, path);
                path.truncate(len);
                found
            }),
            _ => None,
        }
    }
    walk(value, &mut String::new())
}

/// The most bytes a base64 text decodes to.
fn decoded_len(encoded: &str) -> usize {
    encoded.len().div_ceil(4).saturating_mul(3)
}

/// Whether the object opted out with `kustomize.toolkit.fluxcd.io/decrypt: disabled`.
pub fn is_decryption_disabled(object: &Object) -> bool {
    object
        .annotation(DECRYPT_ANNOTATION)
        .is_some_and(|v| v.eq_ignore_ascii_case("disabled"))
}

/// Flux's `isSOPSEncryptedResource`: a non-empty `sops` block with a non-empty `mac`.
fn has_sops_block(object: &Object) -> bool {
    match object.as_map().get("sops") {
        Some(Value::Object(sops)) => sops
            .get("mac")
            .is_some_and(|mac| !matches!(mac, Value::Null) && mac.as_str() != Some("")),
        _ => false,
    }
}

/// A v1 Secret that still carries a `sops` block: Flux refuses to apply it.
pub fn is_encrypted_secret(object: &Object) -> bool {
    object.kind() == "Secret"
        && object.api_version() == "v1"
        && object.as_map().get("sops").is_some_and(|s| !s.is_null())
}

/// The object as kustomize's resource id prints in Flux's messages (`~G_v1_Secret/name`).
/// A field sops encrypted (its `kind` or name, under a comment rule) shows as `(encrypted)`
/// rather than as ciphertext.
fn flux_id(object: &Object) -> String {
    let shown = |s: &str| -> String {
        if s.starts_with(sops::ENVELOPE_PREFIX) {
            "(encrypted)".to_string()
        } else {
            s.to_string()
        }
    };
    let api_version = shown(object.api_version());
    let (group, version) = api_version
        .split_once('/')
        .unwrap_or(("", api_version.as_str()));
    let group = if group.is_empty() { "~G" } else { group };
    let version = if version.is_empty() { "~V" } else { version };
    format!(
        "{group}_{version}_{}/{}",
        shown(object.kind()),
        shown(object.name())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Object {
        Object::new(value.as_object().cloned().unwrap_or_default())
    }

    fn comment_regex_fixtures() -> (PathBuf, Keyring) {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sops-comment-regex");
        let mut keys = Keyring::new();
        let text = std::fs::read_to_string(dir.join("test.agekey")).unwrap();
        keys.import_age(&text).unwrap();
        (dir, keys)
    }

    fn built(dir: &Path, keys: Option<&Keyring>) -> Vec<Object> {
        let spec = api::KustomizationSpec::default();
        super::super::build(dir, dir, &spec, keys).unwrap()
    }

    #[test]
    fn values_encrypted_by_comment_regex_are_decrypted_after_the_build() {
        let (dir, keys) = comment_regex_fixtures();
        let objects = built(&dir, Some(&keys));
        let find = |name: &str| {
            objects
                .iter()
                .find(|o| o.name() == name)
                .unwrap_or_else(|| panic!("{name}"))
                .as_map()
                .clone()
        };
        let enc = find("enc-comment");
        assert_eq!(enc["stringData"]["password"], "hunter2-enc-comment");
        assert_eq!(enc["stringData"]["nested"]["token"], "tok-enc-comment");
        assert_eq!(enc["stringData"]["username"], "admin");
        assert!(enc.get("sops").is_none());
        let unenc = find("unenc-comment");
        assert_eq!(unenc["kind"], "Secret");
        assert_eq!(unenc["metadata"]["namespace"], "apps");
        assert_eq!(unenc["stringData"]["password"], "hunter2-unenc-comment");
        assert_eq!(unenc["stringData"]["username"], "admin");
        for object in &objects {
            assert_eq!(find_envelope(&Value::Object(object.as_map().clone())), None);
        }
    }

    #[test]
    fn ciphertext_left_after_decryption_is_refused_by_object_and_field() {
        let (dir, keys) = comment_regex_fixtures();
        let mut objects: Vec<Object> = built(&dir, None)
            .into_iter()
            .filter(|o| o.name() == "enc-comment")
            .collect();
        // A rule that selects nothing: the walk decrypts no value and the envelope stays.
        let sops = objects[0].as_map_mut().get_mut("sops").unwrap();
        let sops = sops.as_object_mut().unwrap();
        sops.remove("encrypted_comment_regex");
        sops.insert("encrypted_regex".into(), json!("^nothing$"));
        let err = decrypt_objects(&mut objects, &keys, &mut SecretValues::new())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "decryption failed for '~G_v1_Secret/enc-comment': the value at 'stringData.nested.token' \
             is still encrypted after decryption; refusing to apply ciphertext"
        );
        let mut nested = json!({"a": [{"b": "x"}, {"c": "ENC[AES256_GCM,data:AA==]"}]});
        assert_eq!(find_envelope(&nested).as_deref(), Some("a[1].c"));
        nested["a"][1]["c"] = json!("ENC[not sops]");
        assert_eq!(find_envelope(&nested), None);
    }

    #[test]
    fn an_object_whose_identity_is_encrypted_is_named_without_ciphertext() {
        let (dir, _) = comment_regex_fixtures();
        let mut objects: Vec<Object> = built(&dir, None)
            .into_iter()
            .filter(|o| o.as_map()["stringData"]["username"] == "admin")
            .filter(|o| o.kind().starts_with("ENC["))
            .collect();
        assert_eq!(objects.len(), 1);
        let err = decrypt_objects(&mut objects, &Keyring::new(), &mut SecretValues::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("decryption failed for '~G_(encrypted)_(encrypted)/(encrypted)': "),
            "{err}"
        );
        assert!(!err.contains("ENC["), "{err}");
    }

    #[test]
    fn ciphertext_under_a_sops_block_without_mac_is_refused() {
        let (dir, keys) = comment_regex_fixtures();
        let mut objects: Vec<Object> = built(&dir, None)
            .into_iter()
            .filter(|o| o.name() == "enc-comment")
            .collect();
        let sops = objects[0].as_map_mut().get_mut("sops").unwrap();
        sops.as_object_mut().unwrap().remove("mac");
        let err = decrypt_objects(&mut objects, &keys, &mut SecretValues::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'~G_v1_Secret/enc-comment'") && err.contains("'stringData.nested.token'"),
            "{err}"
        );
        // Opting out of decryption leaves the object alone.
        let mut opted_out = objects.clone();
        opted_out[0].as_map_mut()["metadata"]["annotations"] =
            json!({DECRYPT_ANNOTATION: "disabled"});
        decrypt_objects(&mut opted_out, &keys, &mut SecretValues::new()).unwrap();
    }

    #[test]
    fn an_oversized_secret_data_value_is_refused_before_decoding() {
        let big = "QUFB".repeat((sops::MAX_ENCRYPTED_FILE_SIZE / 3) + 1);
        let mut objects = vec![object(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "big", "namespace": "apps"},
            "data": {"blob.yaml": big, "small": "QUFB"}
        }))];
        let err =
            decrypt_objects(&mut objects, &Keyring::new(), &mut SecretValues::new()).unwrap_err();
        assert!(
            matches!(&err, DecryptionError::SecretFieldTooLarge { field, secret, .. }
                if field == "blob.yaml" && secret == "apps/big"),
            "{err}"
        );
        assert_eq!(decoded_len("QUFB"), 3);
        assert_eq!(decoded_len("QUE="), 3);
    }
}
