//! The offline `build` subcommand: the controller's build stage run on a local directory.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use envsubst::strip_newlines;
use goyaml as yaml;
use keyservice::{Credentials, Environment, KeyServices};
use kustomize::LoadRestrictions;
use kustomize::regular_file;
use kustomize_controller::api::{Kustomization, KustomizationSpec, validation};
use kustomize_controller::render;
use sops::{Format, Keyring};
use zeroize::Zeroizing;

use crate::command_error::CommandError;

/// Arguments of `kustomize-controller build`.
#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The directory to build.
    dir: PathBuf,
    /// A Kustomization object (YAML file) whose build fields (targetNamespace, namePrefix,
    /// nameSuffix, patches, images, components, commonMetadata, ...) are laid over DIR
    /// exactly as the controller does.
    #[arg(long, value_name = "FILE")]
    kustomization: Option<PathBuf>,
    /// Files may only be read under this directory (the artifact root, for the
    /// controller). Defaults to the filesystem root.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// kustomize's load restrictor for a plain build (with --kustomization the controller's
    /// rule applies: any file under --root).
    #[arg(long, value_enum, default_value_t = Restrictor::LoadRestrictionsRootOnly)]
    load_restrictor: Restrictor,
    /// A post-build variable, standing in for `substituteFrom` (repeatable; later ones and
    /// the Kustomization's inline `postBuild.substitute` override earlier ones).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// A dotenv file of post-build variables (`NAME=VALUE` lines, `#` comments), read before
    /// the `--var` flags (repeatable).
    #[arg(long = "var-file", value_name = "FILE")]
    var_files: Vec<PathBuf>,
    /// Whether a `${var}` with no value and no default is an error, as with the
    /// controller's `StrictPostBuildSubstitutions` feature gate (on by default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    strict_substitution: bool,
    /// A SOPS key: an age identity file or an armored OpenPGP secret key (repeatable).
    /// Encrypted sources and objects are decrypted as the controller decrypts them with a
    /// `spec.decryption` Secret holding these keys.
    #[arg(long = "sops-key", value_name = "FILE")]
    sops_keys: Vec<PathBuf>,
    /// Refuse kustomize remote bases (git repositories and http(s) files named by URL), as
    /// the controller does with `--no-remote-bases`.
    #[arg(long, default_value_t = false)]
    no_remote_bases: bool,
}

/// Arguments of `kustomize-controller decrypt`.
#[derive(Args, Debug)]
pub struct DecryptArgs {
    /// The sops-encrypted file; its format (YAML, JSON, dotenv, INI, else binary) comes from
    /// its name, as with sops.
    file: PathBuf,
    /// A SOPS key: an age identity file or an armored OpenPGP secret key (repeatable).
    /// Keys held by key services (AWS KMS, Vault transit, GCP KMS, Azure Key Vault) are
    /// opened with the credentials of the environment, as sops does.
    #[arg(long = "sops-key", value_name = "FILE")]
    sops_keys: Vec<PathBuf>,
}

/// Runs `decrypt`: the plaintext on stdout (MAC verified), or the error on stderr.
pub fn run_decrypt(args: &DecryptArgs) -> ExitCode {
    let result = sops_keys(&args.sops_keys, None).and_then(|keys| {
        let keys = match keys {
            Some(keys) => keys,
            None => with_key_services(Keyring::new())?,
        };
        let data = read_file(&args.file, sops::MAX_ENCRYPTED_FILE_SIZE as u64)?;
        let format = Format::for_path(&args.file);
        sops::decrypt(&data, format, format, &keys, true).map_err(|source| CommandError::Decrypt {
            file: shown(&args.file),
            source,
        })
    });
    match result {
        Ok(plain) => match std::io::stdout().write_all(&plain) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// kustomize's `--load-restrictor` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
#[value(rename_all = "verbatim")]
enum Restrictor {
    /// Files only under the kustomization's own directory.
    LoadRestrictionsRootOnly,
    /// Any file under --root.
    LoadRestrictionsNone,
}

/// Runs the subcommand: YAML on stdout, or the error on stderr and a non-zero exit.
pub fn run(args: &BuildArgs) -> ExitCode {
    match build_yaml(args) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn build_yaml(args: &BuildArgs) -> Result<String, CommandError> {
    let kustomization = args
        .kustomization
        .as_deref()
        .map(read_kustomization)
        .transpose()?;
    let spec = kustomization.as_ref().map(|ks| &ks.spec);
    let post_build = spec.and_then(|s| s.post_build.as_ref());
    let vars = variables(args, post_build.and_then(|p| p.substitute.as_ref()))?;
    // `--var` stands in for `substituteFrom`: given one, substitution runs as if the
    // Kustomization had a `postBuild`.
    let substitution = !vars.is_empty() || post_build.is_some();
    let keys = sops_keys(&args.sops_keys, spec)?;
    let dir = absolute(&args.dir)?;
    // Without --kustomization: a plain kustomize build with kustomize's load restrictor.
    let plain = kustomization
        .is_none()
        .then_some(match args.load_restrictor {
            Restrictor::LoadRestrictionsRootOnly => LoadRestrictions::RootOnly,
            Restrictor::LoadRestrictionsNone => LoadRestrictions::None,
        });
    let ks = kustomization.unwrap_or_else(|| Kustomization::new("", KustomizationSpec::default()));
    let inputs = render::Inputs {
        kustomization: &ks,
        root: &args.root,
        dir: &dir,
        plain,
    };
    let settings = render::Settings {
        // The controller's StrictPostBuildSubstitutions gate, as a flag.
        strict_substitution: args.strict_substitution,
        allow_remote_bases: !args.no_remote_bases,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(CommandError::Runtime)?;
    // As in the controller, no error quotes what decryption revealed.
    let rendered = runtime.block_on(render::render(
        inputs,
        render::LocalKeys(keys),
        render::LocalVariables(substitution.then_some(vars)),
        settings,
    ))?;
    let values: Vec<serde_json::Value> = rendered
        .objects
        .into_iter()
        .map(|o| serde_json::Value::Object(o.into_map()))
        .collect();
    Ok(yaml::to_yaml_stream(&values))
}

/// The keyring of an offline build: the `--sops-key` files (an armored OpenPGP block or
/// age identities, told apart by content), or an empty one when `--kustomization` asks for
/// decryption without keys; `None` when nothing asks for decryption.
fn sops_keys(
    files: &[PathBuf],
    spec: Option<&KustomizationSpec>,
) -> Result<Option<Keyring>, CommandError> {
    let wanted = spec.is_some_and(|s| s.decryption.is_some());
    if files.is_empty() && !wanted {
        return Ok(None);
    }
    let mut keys = Keyring::new();
    for file in files {
        let bytes = Zeroizing::new(read_file(file, MAX_KEY_FILE_SIZE)?);
        let imported = if is_armored_pgp(&bytes) {
            keys.import_pgp(&bytes)
        } else {
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| CommandError::NotAKey { file: shown(file) })?;
            keys.import_age(text)
        };
        imported.map_err(|source| CommandError::ImportKey {
            file: shown(file),
            source,
        })?;
    }
    with_key_services(keys).map(Some)
}

/// `keys`, able to ask key services for keys they hold, with the environment's credentials
/// (`AWS_*`, `VAULT_ADDR`/`VAULT_TOKEN`, `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_*`).
fn with_key_services(mut keys: Keyring) -> Result<Keyring, CommandError> {
    let services = KeyServices::standalone(Credentials::default(), Environment::from_process())
        .map_err(CommandError::KeyServices)?;
    keys.set_key_services(Arc::new(services));
    Ok(keys)
}

fn is_armored_pgp(bytes: &[u8]) -> bool {
    bytes
        .windows(b"-----BEGIN PGP".len())
        .any(|w| w == b"-----BEGIN PGP")
}

/// The variables of an offline build: `--var-file`s, then `--var`s, then the inline
/// `postBuild.substitute` of `--kustomization`; newlines are stripped as the controller does.
fn variables(
    args: &BuildArgs,
    inline: Option<&BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, CommandError> {
    let mut vars = BTreeMap::new();
    for file in &args.var_files {
        let text = read_text(file, MAX_SMALL_FILE_SIZE)?;
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = split_var(line).ok_or_else(|| CommandError::VarFileLine {
                file: shown(file),
                line: number + 1,
            })?;
            vars.insert(name, value);
        }
    }
    for var in &args.vars {
        let (name, value) = split_var(var).ok_or(CommandError::VarFlag)?;
        vars.insert(name, value);
    }
    for (name, value) in inline.into_iter().flatten() {
        vars.insert(name.clone(), value.clone());
    }
    Ok(vars
        .into_iter()
        .map(|(name, value)| (name, strip_newlines(&value)))
        .collect())
}

/// Splits `NAME=VALUE`; matching quotes around the value are removed. `None` without `=`.
fn split_var(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once('=')?;
    let value = value.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Some((name.trim().to_string(), unquoted.to_string()))
}

pub fn absolute(path: &Path) -> Result<PathBuf, CommandError> {
    std::path::absolute(path).map_err(|source| CommandError::Path {
        path: shown(path),
        source,
    })
}

/// The Kustomization object in `file`, refused as the API server would refuse it.
pub fn read_kustomization(file: &Path) -> Result<Kustomization, CommandError> {
    let text = read_text(file, MAX_SMALL_FILE_SIZE)?;
    let docs = yaml::parse_documents(&text).map_err(|source| CommandError::KustomizationYaml {
        file: shown(file),
        source,
    })?;
    let doc = docs
        .into_iter()
        .find(|d| d.get("kind").and_then(|k| k.as_str()) == Some("Kustomization"))
        .ok_or_else(|| CommandError::NoKustomization { file: shown(file) })?;
    validation::validate(&doc).map_err(|source| CommandError::InvalidKustomization {
        file: shown(file),
        source,
    })?;
    serde_json::from_value(doc).map_err(|source| CommandError::DecodeKustomization {
        file: shown(file),
        source,
    })
}

/// The most bytes read from a key file: armored OpenPGP keyrings of many keys stay far below.
const MAX_KEY_FILE_SIZE: u64 = 1 << 20;

/// The most bytes read from a Kustomization or a variables file.
const MAX_SMALL_FILE_SIZE: u64 = 4 << 20;

/// Reads the regular file `file` (never a FIFO or device), at most `limit` bytes.
fn read_file(file: &Path, limit: u64) -> Result<Vec<u8>, CommandError> {
    regular_file::read(file, limit).map_err(|source| CommandError::Read {
        file: shown(file),
        source,
    })
}

fn read_text(file: &Path, limit: u64) -> Result<String, CommandError> {
    regular_file::read_to_string(file, limit).map_err(|source| CommandError::Read {
        file: shown(file),
        source,
    })
}

/// A path for a message, control characters escaped so that they cannot drive the terminal.
pub fn shown(path: &Path) -> String {
    path.display()
        .to_string()
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
