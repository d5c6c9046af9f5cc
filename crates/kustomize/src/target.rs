//! Building one kustomization directory: resources (sub-kustomizations built first),
//! configurations, generators, components, then the builtin transformers in kustomize's
//! fixed order; and, at the top level only, hash suffixes, name-reference fixing, vars,
//! dropping local-config objects and sorting.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::config::TransformerConfig;
use super::json_numbers;
use super::kustfile::{KUSTOMIZATION_FILE_NAMES, Kustomization, KustomizationKind, Var};
use super::loader::{Entry, LoadError, LoadRestrictions, Loader};
use super::openapi::OpenApiChoice;
use super::remote::{self, RemoteError, RemoteFetcher, RepoSpec, RepoSpecError};
use super::resource::{Object, Origin, PluginId, ResMap, Resource, scalar_text};
use super::{
    budget, generators, gojson, kustfile, namereference, patch, replacements, sort, transformers,
    vars,
};
use goyaml as yaml;

/// Options of a build.
#[derive(Clone, Default)]
pub struct BuildOptions {
    /// Which files kustomizations may read (the loader is always confined to the root).
    pub load_restrictions: LoadRestrictions,
    /// Reads remote resources (git repositories and http(s) files named by URL) as kustomize
    /// does. `None`, the default, refuses every remote entry by name.
    pub remote_fetcher: Option<Arc<dyn RemoteFetcher>>,
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("load_restrictions", &self.load_restrictions)
            .field(
                "remote_fetcher",
                &self.remote_fetcher.as_ref().map(|_| "RemoteFetcher"),
            )
            .finish()
    }
}

/// Why a build failed. Messages name the kustomization (directory relative to the root)
/// and the file or entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A file or directory could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A directory has no kustomization file, or more than one.
    #[error("{0}")]
    Kustomization(String),
    /// The kustomization file is not valid.
    #[error(transparent)]
    Kustfile(#[from] super::kustfile::KustfileError),
    /// A feature Flux builds without (helm, exec plugins; remote bases when no fetcher is
    /// given).
    #[error("{dir}: {message}")]
    Unsupported {
        /// The kustomization directory.
        dir: String,
        /// What was refused.
        message: String,
    },
    /// A resource file is not valid.
    #[error("{file}: {message}")]
    Resource {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A kustomization includes itself, directly or through other directories.
    #[error(
        "cycle detected: {chain} (candidate root '{candidate}' contains visited root '{visited}')"
    )]
    Cycle {
        /// The directories being accumulated, top-level first, ending with the repeated one.
        chain: String,
        /// The directory that would be accumulated again.
        candidate: String,
        /// The directory being accumulated that lies in (or is) the candidate.
        visited: String,
    },
    /// Kustomization directories nest deeper than a build follows.
    #[error(
        "{dir}: kustomization directories nest more than {limit} deep (bases of bases or components of components)"
    )]
    TooDeep {
        /// The kustomization whose entry would go one level deeper.
        dir: String,
        /// The bound.
        limit: usize,
    },
    /// A `resources` entry is neither a file nor a base: why it is not a file, then why it
    /// is not a base (kustomize's wording, `accumulation err='...'`).
    #[error("{dir}: accumulation err='{file_error}': {source}")]
    Accumulation {
        /// The kustomization directory.
        dir: String,
        /// Why the entry is not a file (naming it).
        file_error: String,
        /// Why it is not a base either.
        source: Box<BuildError>,
    },
    /// A name that looks like a URL does not parse as a repository URL.
    #[error("'{url}' is not a repository URL kustomize can clone: {source}")]
    NotRepository {
        /// The entry as written (escaped).
        url: String,
        /// Why.
        source: RepoSpecError,
    },
    /// A remote base names a repository URL already being built (kustomize's wording).
    #[error("{dir}: cycle detected: URI '{url}' referenced by previous URI '{previous}'")]
    RepoCycle {
        /// The kustomization directory (inside its clone).
        dir: String,
        /// The URL that would be cloned again (escaped).
        url: String,
        /// The URL of the remote base being built that starts with it (escaped).
        previous: String,
    },
    /// Building a cloned remote base or component failed.
    #[error("{dir}: in remote {kind} '{url}': {source}")]
    InRemote {
        /// The kustomization that names the remote entry.
        dir: String,
        /// `base` or `component`.
        kind: &'static str,
        /// The entry as written (escaped).
        url: String,
        /// The error, with paths relative to the root of the clone.
        source: Box<BuildError>,
    },
    /// A step of the build failed.
    #[error("{context}: {source}")]
    Step {
        /// The kustomization directory and the step.
        context: String,
        /// The underlying error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn step<E: std::error::Error + Send + Sync + 'static>(
    context: impl FnOnce() -> String,
) -> impl FnOnce(E) -> BuildError {
    move |source| BuildError::Step {
        context: context(),
        source: Box::new(source),
    }
}

/// Builds the kustomization in `dir`, reading files only under `root`, and returns the
/// objects in kustomize's order (FIFO unless the kustomization sets `sortOptions`).
///
/// With [`BuildOptions::remote_fetcher`], remote `resources` and `components` are fetched
/// through it (see [`crate::remote`]).
pub fn build(root: &Path, dir: &Path, options: &BuildOptions) -> Result<Vec<Object>, BuildError> {
    let mut loader = Loader::new(root, options.load_restrictions)?;
    if let Some(fetcher) = &options.remote_fetcher {
        loader = loader.with_remote_fetcher(Arc::clone(fetcher));
    }
    let dir = resolve_dir(&loader, dir)?;
    let kustomization = load_kustomization(&loader, &dir)?;
    build_kustomization(&loader, &dir, kustomization)
}

/// Builds `dir` with an already loaded (and possibly amended) top-level `kustomization`.
/// Remote entries are fetched when `loader` has a fetcher
/// ([`Loader::with_remote_fetcher`]), and refused otherwise.
pub fn build_kustomization(
    loader: &Loader,
    dir: &Path,
    kustomization: Kustomization,
) -> Result<Vec<Object>, BuildError> {
    let here = loader.display(dir);
    let mut acc = Accumulator::default();
    let metadata = BuildMetadata::from(&kustomization.build_metadata);
    let openapi = OpenApiChoice::new();
    let target = Target {
        loader,
        dir: dir.to_path_buf(),
        kustfile: kustomization_file_name(dir).to_string(),
        kustomization,
        frame: OriginFrame::default(),
        record: metadata.any(),
        openapi: &openapi,
        visiting: vec![dir.to_path_buf()],
        repos: Vec::new(),
    };
    target.consider_openapi()?;
    target.accumulate(&mut acc)?;

    let resmap = &mut acc.resmap;
    generators::apply_hash_suffixes(resmap).map_err(step(|| format!("{here}: hash suffixes")))?;
    namereference::fix_name_references(resmap, &acc.config.name_reference)
        .map_err(step(|| format!("{here}: name references")))?;
    vars::resolve_vars(resmap, &acc.vars, &acc.config.var_reference)
        .map_err(step(|| format!("{here}: vars")))?;
    drop_local_config(resmap);
    metadata.annotate(resmap);
    if let Some(sort_options) = &target.kustomization.sort_options {
        sort::sort(resmap, sort_options).map_err(step(|| format!("{here}: sortOptions")))?;
    }
    let mut objects: Vec<Object> = acc.resmap.into_vec().into_iter().map(|r| r.obj).collect();
    for obj in &mut objects {
        rewrite_annotations(obj);
        let mut value = Value::Object(std::mem::take(obj));
        json_numbers::whole_floats_to_integers(&mut value);
        yaml::sort_keys(&mut value);
        if let Value::Object(sorted) = value {
            *obj = sorted;
        }
    }
    Ok(objects)
}

/// Which `buildMetadata` annotations the top-level kustomization asks for.
#[derive(Clone, Copy, Debug, Default)]
struct BuildMetadata {
    origins: bool,
    transformations: bool,
}

const ORIGIN_ANNOTATION: &str = "config.kubernetes.io/origin";
const TRANSFORMATIONS_ANNOTATION: &str = "alpha.config.kubernetes.io/transformations";

impl BuildMetadata {
    fn from(options: &[String]) -> Self {
        BuildMetadata {
            origins: options.iter().any(|o| o == "originAnnotations"),
            transformations: options.iter().any(|o| o == "transformerAnnotations"),
        }
    }

    /// Whether origins and transformations are tracked at all (kustomize tracks both as
    /// soon as any build metadata is asked for).
    fn any(&self) -> bool {
        self.origins || self.transformations
    }

    /// Writes the asked-for annotations.
    fn annotate(&self, resmap: &mut ResMap) {
        for resource in resmap.iter_mut() {
            if let Some(origin) = resource.origin.clone().filter(|_| self.origins) {
                let text = yaml::to_yaml(&origin.to_value());
                resource.set_metadata_entry("annotations", ORIGIN_ANNOTATION, &text);
            }
            if self.transformations && !resource.transformations.is_empty() {
                let list = Value::Array(
                    resource
                        .transformations
                        .iter()
                        .map(Origin::to_value)
                        .collect(),
                );
                let text = yaml::to_yaml(&list);
                resource.set_metadata_entry("annotations", TRANSFORMATIONS_ANNOTATION, &text);
            }
        }
    }
}

/// The name of the kustomization file in `dir` (`kustomization.yaml` for a generated one).
fn kustomization_file_name(dir: &Path) -> &'static str {
    KUSTOMIZATION_FILE_NAMES
        .iter()
        .copied()
        .find(|name| names_something(&dir.join(name)))
        .unwrap_or(KUSTOMIZATION_FILE_NAMES[0])
}

/// Whether `path` names anything at all, without following it or opening it: a kustomization
/// file that turns out to be a FIFO, a device or a symlink leaving the root is then refused
/// by name when it is read, rather than silently skipped.
fn names_something(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// What a kustomization and everything below it has accumulated.
#[derive(Debug, Default)]
struct Accumulator {
    resmap: ResMap,
    config: TransformerConfig,
    vars: Vec<Var>,
}

impl Accumulator {
    /// Absorbs a sub-kustomization's result.
    fn merge(&mut self, other: Accumulator, context: &str) -> Result<(), BuildError> {
        self.resmap
            .append_all(other.resmap)
            .map_err(step(|| context.to_string()))?;
        self.config
            .merge(other.config)
            .map_err(step(|| context.to_string()))?;
        self.merge_vars(other.vars, context)
    }

    fn merge_vars(&mut self, incoming: Vec<Var>, context: &str) -> Result<(), BuildError> {
        for var in incoming {
            if self.vars.iter().any(|v| v.name == var.name) {
                return Err(BuildError::Kustomization(format!(
                    "{context}: var '{}' already encountered",
                    var.name
                )));
            }
            self.vars.push(var);
        }
        Ok(())
    }
}

/// Resolves the directory to build and checks that it is one.
fn resolve_dir(loader: &Loader, dir: &Path) -> Result<PathBuf, BuildError> {
    let name = dir.to_string_lossy();
    match loader.entry(loader.root(), &name)? {
        Entry::Dir(path) => Ok(path),
        Entry::File(path) => Err(BuildError::Kustomization(format!(
            "{}: must build at directory: not a directory",
            loader.display(&path)
        ))),
    }
}

/// Loads the one kustomization file of `dir`.
pub fn load_kustomization(loader: &Loader, dir: &Path) -> Result<Kustomization, BuildError> {
    let (text, file) = read_kustomization(loader, dir)?;
    Ok(Kustomization::parse(&text, &file)?)
}

/// Loads the kustomization file of `dir` as Flux reads the one at the root of its build (see
/// [`Kustomization::parse_as_flux`]).
pub fn load_kustomization_as_flux(
    loader: &Loader,
    dir: &Path,
) -> Result<Kustomization, BuildError> {
    let (text, file) = read_kustomization(loader, dir)?;
    Ok(Kustomization::parse_as_flux(&text, &file)?)
}

/// The text of the one kustomization file of `dir`, and the name it is shown by.
fn read_kustomization(loader: &Loader, dir: &Path) -> Result<(String, String), BuildError> {
    let found: Vec<&str> = KUSTOMIZATION_FILE_NAMES
        .iter()
        .copied()
        .filter(|name| names_something(&dir.join(name)))
        .collect();
    let here = loader.display(dir);
    let name = match found.as_slice() {
        [] => {
            return Err(BuildError::Kustomization(format!(
                "unable to find one of 'kustomization.yaml', 'kustomization.yml' or 'Kustomization' in directory '{here}'"
            )));
        }
        [one] => *one,
        _ => {
            return Err(BuildError::Kustomization(format!(
                "found multiple kustomization files under '{here}': {}",
                found.join(", ")
            )));
        }
    };
    let text = loader.read_text(dir, name)?;
    Ok((text, loader.display(&dir.join(name))))
}

/// Whether a `resources`/`components` entry names a remote base.
fn is_remote(entry: &str) -> bool {
    let lower = entry.to_ascii_lowercase();
    [
        "http://",
        "https://",
        "git@",
        "git::",
        "ssh://",
        "github.com/",
        "gitlab.com/",
        "bitbucket.org/",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
        || lower.contains("?ref=")
        || lower.contains(".git//")
}

/// One kustomization being accumulated.
struct Target<'a> {
    loader: &'a Loader,
    dir: PathBuf,
    /// File name of the kustomization file in `dir`.
    kustfile: String,
    kustomization: Kustomization,
    /// How origins of this kustomization's files are recorded.
    frame: OriginFrame,
    /// Whether origins and transformations are recorded (`buildMetadata`).
    record: bool,
    /// The build's OpenAPI choice (the first kustomization with `openapi` sets it).
    openapi: &'a OpenApiChoice,
    /// The directories being accumulated, from the top-level kustomization down to `dir`
    /// (for cycle detection and the nesting bound).
    visiting: Vec<PathBuf>,
    /// The URLs of the remote bases and components being accumulated, outermost first (for
    /// kustomize's repository cycle check).
    repos: Vec<String>,
}

/// How kustomize records origins in one kustomization tree (its running `Origin`): the
/// repository and ref of the remote base the files come from (empty for local files), and
/// the path recorded for the kustomization's directory. Paths are joined lexically from the
/// entries as written (a symlinked directory is recorded by its link's name), relative to
/// the top-level kustomization or to the root of the repository.
#[derive(Clone, Debug, Default)]
struct OriginFrame {
    repo: String,
    git_ref: String,
    dir: String,
}

impl OriginFrame {
    /// The frame of a remote base or component cloned for `spec`.
    fn remote(spec: &RepoSpec) -> Self {
        OriginFrame {
            repo: spec.clone_url(),
            git_ref: spec.git_ref.clone(),
            dir: spec.origin_path(),
        }
    }

    /// The frame of the directory `entry` names in this frame's directory.
    fn enter(&self, entry: &str) -> Self {
        OriginFrame {
            dir: remote::go_join(&self.dir, entry),
            ..self.clone()
        }
    }

    /// The origin of `entry`, named in this frame's directory.
    fn origin(&self, entry: &str) -> Origin {
        Origin {
            path: remote::go_join(&self.dir, entry),
            repo: self.repo.clone(),
            git_ref: self.git_ref.clone(),
            ..Origin::default()
        }
    }
}

/// Why a `resources` entry could not be read as a file, kept while it is tried as a base.
struct FileAttempt {
    /// The reason, naming the entry.
    message: String,
    /// The error itself when the file was read but is not YAML: kustomize then reports only
    /// it if the entry is not a base either (unless cloning timed out).
    malformed: Option<BuildError>,
}

/// The most kustomization directories nested inside one another (bases of bases, components
/// of components). Real trees nest a handful deep; the bound keeps a generated chain of
/// thousands of directories from exhausting the stack of the thread that builds.
pub const MAX_KUSTOMIZATION_DEPTH: usize = 32;

impl Target<'_> {
    /// The origin of a resource read from the local file `entry`.
    fn file_origin(&self, entry: &str) -> Origin {
        self.frame.origin(entry)
    }

    /// The origin of a resource fetched from the http(s) URL `url`: kustomize records a URL
    /// that parses as a repository URL as one, any other joined onto this directory's path.
    fn url_origin(&self, url: &str) -> Origin {
        match RepoSpec::parse(url) {
            Ok(spec) => OriginFrame::remote(&spec).origin(""),
            Err(_) => self.frame.origin(url),
        }
    }

    /// The origin of what this kustomization file configures: its path and repository.
    fn kustfile_origin(&self) -> Origin {
        self.frame.origin(&self.kustfile)
    }

    /// The origin kustomize records for the builtin `kind` configured by this kustomization.
    fn builtin_origin(&self, kind: &str) -> Origin {
        let file = self.kustfile_origin();
        Origin {
            repo: file.repo,
            git_ref: file.git_ref,
            ..Origin::builtin(file.path, kind)
        }
    }

    /// Records that the builtin transformer `kind`, configured by this kustomization, ran
    /// over every resource (`times` for transformers configured once per entry).
    fn record_builtin(&self, resmap: &mut ResMap, kind: &str, times: usize) {
        if self.record && times > 0 {
            let origin = self.builtin_origin(kind);
            record_transformation(resmap, &origin, times);
        }
    }

    fn here(&self) -> String {
        self.loader.display(&self.dir)
    }

    fn ctx(&self, what: &str) -> String {
        format!("{}: {what}", self.here())
    }

    /// Lets this kustomization's `openapi` field choose the build's schema.
    fn consider_openapi(&self) -> Result<(), BuildError> {
        self.openapi
            .consider(&self.kustomization.openapi, self.loader, &self.dir)
            .map_err(step(|| self.ctx("openapi")))
    }

    fn refuse_unsupported(&self) -> Result<(), BuildError> {
        let k = &self.kustomization;
        let unsupported = |message: String| BuildError::Unsupported {
            dir: self.here(),
            message,
        };
        if k.helm_globals.is_some()
            || !k.helm_charts.is_empty()
            || !k.helm_chart_inflation_generator.is_empty()
        {
            return Err(unsupported(
                "helm charts are not supported (Flux builds kustomizations without helm)".into(),
            ));
        }
        if let Some(entry) = k
            .resources
            .iter()
            .chain(&k.components)
            .find(|e| is_remote(e))
            .filter(|_| self.loader.remote_fetcher().is_none())
        {
            return Err(unsupported(format!(
                "remote resource '{}' is not supported: only files inside the source artifact can be built",
                super::loader::escape_name(entry)
            )));
        }
        if !k.validators.is_empty() {
            return Err(unsupported(
                "validators are plugins, and plugins are disabled".into(),
            ));
        }
        Ok(())
    }

    /// kustomize's accumulateTarget: everything this kustomization contributes, applied to
    /// `acc` (a fresh accumulator for a Kustomization, the parent's for a Component).
    fn accumulate(&self, acc: &mut Accumulator) -> Result<(), BuildError> {
        self.refuse_unsupported()?;
        self.accumulate_resources(acc, &self.kustomization.resources)?;
        let config = self.transformer_config()?;
        acc.config
            .merge(config)
            .map_err(step(|| self.ctx("configurations")))?;
        let crds =
            super::crds::config_from_crd_files(self.loader, &self.dir, &self.kustomization.crds)
                .map_err(step(|| self.ctx("crds")))?;
        acc.config.merge(crds).map_err(step(|| self.ctx("crds")))?;
        self.run_generators(acc)?;
        for component in &self.kustomization.components {
            self.refuse_empty(component, "components")?;
            self.accumulate_directory(acc, component, KustomizationKind::Component)?;
        }
        self.run_transformers(acc)?;
        self.check_total_size(&acc.resmap)?;
        let here = self.here();
        vars::bind_vars(&mut acc.resmap, &self.kustomization.vars)
            .map_err(step(|| format!("{here}: vars")))?;
        acc.merge_vars(self.kustomization.vars.clone(), &here)
    }

    fn accumulate_resources(
        &self,
        acc: &mut Accumulator,
        entries: &[String],
    ) -> Result<(), BuildError> {
        for entry in entries {
            self.refuse_empty(entry, "resources")?;
            if self.loader.remote_fetcher().is_some() {
                self.accumulate_resource_or_remote(acc, entry)?;
                continue;
            }
            match self.loader.entry(&self.dir, entry)? {
                Entry::File(_) => self.accumulate_file(acc, entry)?,
                Entry::Dir(_) => {
                    self.accumulate_directory(acc, entry, KustomizationKind::Kustomization)?
                }
            }
        }
        Ok(())
    }

    /// Appends the resources of the local file `entry`.
    fn accumulate_file(&self, acc: &mut Accumulator, entry: &str) -> Result<(), BuildError> {
        let text = self.loader.read_text(&self.dir, entry)?;
        let file = self.loader.display(&self.dir.join(entry));
        let origin = self.record.then(|| self.file_origin(entry));
        append_resources(acc, parse_resources(&text, &file)?, origin, &file)
    }

    /// kustomize's reading of a `resources` entry when remote resources may be fetched: the
    /// entry is tried as a file first (an http(s) URL is fetched), then as a base (a URL
    /// that parses as a repository URL is cloned, even if a local directory has its name;
    /// anything else is a local directory).
    fn accumulate_resource_or_remote(
        &self,
        acc: &mut Accumulator,
        entry: &str,
    ) -> Result<(), BuildError> {
        if remote::is_remote_file(entry) {
            return self.accumulate_url(acc, entry);
        }
        let local = self.loader.entry(&self.dir, entry);
        let as_file = |reason: String| FileAttempt {
            message: format!("accumulating resources from '{}': {reason}", escape(entry)),
            malformed: None,
        };
        match (local, RepoSpec::parse(entry)) {
            (Ok(Entry::File(_)), _) => self.accumulate_file(acc, entry),
            (Ok(Entry::Dir(path)), Ok(spec)) => {
                let reason = format!("{}: is a directory", self.loader.display(&path));
                let attempt = as_file(reason);
                self.accumulate_remote(acc, spec, KustomizationKind::Kustomization, Some(attempt))
            }
            (Err(error), Ok(spec)) => {
                let attempt = as_file(error.to_string());
                self.accumulate_remote(acc, spec, KustomizationKind::Kustomization, Some(attempt))
            }
            (Ok(Entry::Dir(_)), Err(_)) => {
                self.accumulate_directory(acc, entry, KustomizationKind::Kustomization)
            }
            (Err(error), Err(not_repository)) if is_remote(entry) => {
                Err(BuildError::Accumulation {
                    dir: self.here(),
                    file_error: as_file(error.to_string()).message,
                    source: Box::new(BuildError::NotRepository {
                        url: escape(entry),
                        source: not_repository,
                    }),
                })
            }
            (Err(error), Err(_)) => Err(error.into()),
        }
    }

    /// A `resources` entry that is an http(s) URL: the file it names, unless the server
    /// says it has none (kustomize's `ErrHTTP`: the build stops) or what it answers is not
    /// YAML; then the repository it names, when it parses as a repository URL.
    fn accumulate_url(&self, acc: &mut Accumulator, url: &str) -> Result<(), BuildError> {
        let shown = escape(url);
        let context = || format!("{}: accumulating resources from '{shown}'", self.here());
        let as_repository = RepoSpec::parse(url);
        let attempt = match self.loader.fetch(url, crate::loader::MAX_FILE_SIZE) {
            Ok(bytes) => match resources_from_bytes(bytes, &shown) {
                Ok(resources) => {
                    let origin = self.record.then(|| self.url_origin(url));
                    return append_resources(acc, resources, origin, &shown);
                }
                Err((error, malformed)) => FileAttempt {
                    message: format!("accumulating resources from '{shown}': {error}"),
                    malformed: malformed.then_some(error),
                },
            },
            Err(LoadError::Fetch {
                source: source @ RemoteError::Http { .. },
                ..
            }) => {
                if as_repository.is_err() {
                    return Err(BuildError::Step {
                        context: context(),
                        source: Box::new(source),
                    });
                }
                FileAttempt {
                    message: format!(
                        "accumulating resources from '{shown}': URL is a git repository"
                    ),
                    malformed: None,
                }
            }
            Err(error @ LoadError::TooManyFetches { .. }) => return Err(error.into()),
            // The fetcher refuses the URL outright (remote bases disabled, say): as a
            // repository it would refuse it again.
            Err(LoadError::Fetch {
                source: source @ RemoteError::Refused(_),
                ..
            }) => {
                return Err(BuildError::Step {
                    context: context(),
                    source: Box::new(source),
                });
            }
            Err(error) => FileAttempt {
                message: format!("accumulating resources from '{shown}': {error}"),
                malformed: None,
            },
        };
        match as_repository {
            Ok(spec) => {
                self.accumulate_remote(acc, spec, KustomizationKind::Kustomization, Some(attempt))
            }
            Err(not_repository) => Err(match attempt.malformed {
                Some(error) => error,
                None => BuildError::Accumulation {
                    dir: self.here(),
                    file_error: attempt.message,
                    source: Box::new(BuildError::NotRepository {
                        url: shown,
                        source: not_repository,
                    }),
                },
            }),
        }
    }

    /// Clones the repository of `spec` and accumulates the kustomization at its path, with
    /// a loader confined to the clone (kustomize's `newLoaderAtGitClone`). `attempt` is why
    /// a `resources` entry was not a file (`None` for components).
    fn accumulate_remote(
        &self,
        acc: &mut Accumulator,
        spec: RepoSpec,
        expected: KustomizationKind,
        attempt: Option<FileAttempt>,
    ) -> Result<(), BuildError> {
        let url = escape(&spec.raw);
        if let Some(previous) = self.repos.iter().rev().find(|p| p.starts_with(&spec.raw)) {
            return Err(BuildError::RepoCycle {
                dir: self.here(),
                url,
                previous: escape(previous),
            });
        }
        if self.visiting.len() >= MAX_KUSTOMIZATION_DEPTH {
            return Err(BuildError::TooDeep {
                dir: self.here(),
                limit: MAX_KUSTOMIZATION_DEPTH,
            });
        }
        let clone = match self.loader.clone_repo(&spec) {
            Ok(clone) => clone,
            Err(error) => {
                let timed_out = matches!(
                    error,
                    LoadError::Fetch {
                        source: RemoteError::Timeout { .. },
                        ..
                    }
                );
                return Err(match attempt {
                    Some(FileAttempt {
                        malformed: Some(malformed),
                        ..
                    }) if !timed_out => malformed,
                    Some(attempt) => BuildError::Accumulation {
                        dir: self.here(),
                        file_error: attempt.message,
                        source: Box::new(error.into()),
                    },
                    None => BuildError::Step {
                        context: self.ctx("components"),
                        source: Box::new(error),
                    },
                });
            }
        };
        let kind = match expected {
            KustomizationKind::Component => "component",
            KustomizationKind::Kustomization => "base",
        };
        let in_remote = |source: BuildError| BuildError::InRemote {
            dir: self.here(),
            kind,
            url: url.clone(),
            source: Box::new(source),
        };
        let loader = self
            .loader
            .for_clone(&clone.dir)
            .map_err(|e| in_remote(e.into()))?;
        // The path inside the repository is relative to its root even when written `//`-
        // rooted; symlinks leaving the clone are refused by the loader.
        let inside = spec.kust_root_path.trim_start_matches('/');
        let dir = match loader.entry(loader.root(), inside) {
            Ok(Entry::Dir(dir)) => dir,
            Ok(Entry::File(file)) => {
                return Err(in_remote(BuildError::Kustomization(format!(
                    "{}: is a file; a remote {kind} must be a directory holding a kustomization",
                    loader.display(&file)
                ))));
            }
            Err(error) => return Err(in_remote(error.into())),
        };
        let kustomization = load_kustomization(&loader, &dir).map_err(in_remote)?;
        let frame = OriginFrame::remote(&spec);
        let mut repos = self.repos.clone();
        repos.push(spec.raw.clone());
        let built = self.accumulate_sub(acc, &loader, dir, kustomization, expected, frame, repos);
        // The checkout is removed once everything in it has been read.
        drop(clone);
        built.map_err(in_remote)
    }

    /// Refuses to accumulate `candidate` when it is, or contains, a directory already being
    /// accumulated (kustomize's "candidate root contains visited root": an entry naming the
    /// kustomization's own directory or an ancestor of any kustomization on the way), and
    /// when the nesting would exceed [`MAX_KUSTOMIZATION_DEPTH`]. As kustomize's loaders,
    /// the innermost such directory is named.
    fn refuse_cycle(&self, candidate: &Path) -> Result<(), BuildError> {
        let chain = || {
            self.visiting
                .iter()
                .chain(std::iter::once(&candidate.to_path_buf()))
                .map(|d| self.loader.display(d))
                .collect::<Vec<_>>()
                .join(" -> ")
        };
        if let Some(visited) = self
            .visiting
            .iter()
            .rev()
            .find(|v| v.starts_with(candidate))
        {
            return Err(BuildError::Cycle {
                chain: chain(),
                candidate: self.loader.display(candidate),
                visited: self.loader.display(visited),
            });
        }
        if self.visiting.len() >= MAX_KUSTOMIZATION_DEPTH {
            return Err(BuildError::TooDeep {
                dir: self.here(),
                limit: MAX_KUSTOMIZATION_DEPTH,
            });
        }
        Ok(())
    }

    /// An empty entry would name the kustomization's own directory.
    fn refuse_empty(&self, entry: &str, field: &str) -> Result<(), BuildError> {
        if entry.trim().is_empty() {
            return Err(BuildError::Kustomization(format!(
                "{}: {field}: an entry is empty (new root cannot be empty)",
                self.here()
            )));
        }
        Ok(())
    }

    fn accumulate_directory(
        &self,
        acc: &mut Accumulator,
        entry: &str,
        expected: KustomizationKind,
    ) -> Result<(), BuildError> {
        // kustomize's loader takes anything that parses as a repository URL for one.
        if self.loader.remote_fetcher().is_some()
            && let Ok(spec) = RepoSpec::parse(entry)
        {
            return self.accumulate_remote(acc, spec, expected, None);
        }
        let dir = match self.loader.entry(&self.dir, entry)? {
            Entry::Dir(dir) => dir,
            Entry::File(file) => {
                return Err(BuildError::Kustomization(format!(
                    "{}: component '{}' must be a directory holding a Component",
                    self.here(),
                    self.loader.display(&file)
                )));
            }
        };
        self.refuse_cycle(&dir)?;
        let kustomization = load_kustomization(self.loader, &dir)?;
        let (frame, repos) = (self.frame.enter(entry), self.repos.clone());
        self.accumulate_sub(acc, self.loader, dir, kustomization, expected, frame, repos)
    }

    /// Accumulates the kustomization of `dir`, read through `loader`, as a base (merged
    /// into `acc`) or a component (applied to `acc`).
    #[allow(clippy::too_many_arguments)]
    fn accumulate_sub(
        &self,
        acc: &mut Accumulator,
        loader: &Loader,
        dir: PathBuf,
        kustomization: Kustomization,
        expected: KustomizationKind,
        frame: OriginFrame,
        repos: Vec<String>,
    ) -> Result<(), BuildError> {
        let mut visiting = self.visiting.clone();
        visiting.push(dir.clone());
        let sub = Target {
            loader,
            kustfile: kustomization_file_name(&dir).to_string(),
            dir,
            kustomization,
            frame,
            record: self.record,
            openapi: self.openapi,
            visiting,
            repos,
        };
        sub.consider_openapi()?;
        let kind = sub.kustomization.kustomization_kind();
        match (expected, kind) {
            (KustomizationKind::Component, KustomizationKind::Kustomization) => {
                return Err(BuildError::Kustomization(format!(
                    "{}: expected kind 'Component' for path '{}' but got 'Kustomization'",
                    self.here(),
                    sub.here()
                )));
            }
            (KustomizationKind::Kustomization, KustomizationKind::Component) => {
                return Err(BuildError::Kustomization(format!(
                    "{}: expected kind != 'Component' for path '{}' (list components under `components`)",
                    self.here(),
                    sub.here()
                )));
            }
            _ => {}
        }
        if kind == KustomizationKind::Component {
            sub.accumulate(acc)
        } else {
            let mut sub_acc = Accumulator::default();
            sub.accumulate(&mut sub_acc)?;
            acc.merge(
                sub_acc,
                &format!("{}: merging from '{}'", self.here(), sub.here()),
            )
        }
    }

    /// The builtin configuration plus this kustomization's `configurations` files.
    fn transformer_config(&self) -> Result<TransformerConfig, BuildError> {
        let mut config = TransformerConfig::builtin();
        let mut files = TransformerConfig::default();
        for file in &self.kustomization.configurations {
            let text = self
                .loader
                .read_text(&self.dir, file)
                .map_err(step(|| self.ctx("configurations")))?;
            let shown = self.loader.display(&self.dir.join(file));
            // As kustomize reads it: the first document, with go-yaml v2 (YAML 1.1
            // booleans), decoded strictly but with Go's name matching and conversions.
            let docs = yaml::parse_documents_yaml11(kustfile::first_document(&text))
                .map_err(step(|| shown.clone()))?;
            if let Some(doc) = docs.into_iter().next() {
                let mut extra: TransformerConfig = gojson::from_value(&doc, gojson::Mode::STRICT)
                    .map_err(step(|| shown.clone()))?;
                extra.sort();
                files.merge(extra).map_err(step(|| shown.clone()))?;
            }
        }
        if !self.kustomization.configurations.is_empty() {
            config
                .merge(files)
                .map_err(step(|| self.ctx("configurations")))?;
        }
        Ok(config)
    }

    fn run_generators(&self, acc: &mut Accumulator) -> Result<(), BuildError> {
        let k = &self.kustomization;
        let defaults = k.generator_options.as_ref();
        let builtin = |kind: &str| self.record.then(|| self.builtin_origin(kind));
        for args in &k.config_map_generator {
            let ctx = || self.ctx(&format!("configMapGenerator '{}'", args.name));
            let mut generated =
                generators::generate_config_map(args, defaults, self.loader, &self.dir)
                    .map_err(step(ctx))?;
            generated.origin = builtin("ConfigMapGenerator");
            generators::add_generated(&mut acc.resmap, generated).map_err(step(ctx))?;
        }
        for args in &k.secret_generator {
            let ctx = || self.ctx(&format!("secretGenerator '{}'", args.name));
            let mut generated = generators::generate_secret(args, defaults, self.loader, &self.dir)
                .map_err(step(ctx))?;
            generated.origin = builtin("SecretGenerator");
            generators::add_generated(&mut acc.resmap, generated).map_err(step(ctx))?;
        }
        for (config, origin) in self.plugin_configs(&k.generators, "generators")? {
            let kind = plugin_kind(&config, &self.here())?;
            let ctx = || self.ctx(&format!("generator {kind}"));
            let mut generated =
                generators::generate_builtin(&kind, &config, self.loader, &self.dir)
                    .map_err(step(ctx))?;
            generated.origin = origin;
            generators::add_generated(&mut acc.resmap, generated).map_err(step(ctx))?;
        }
        Ok(())
    }

    fn run_transformers(&self, acc: &mut Accumulator) -> Result<(), BuildError> {
        let k = &self.kustomization;
        // Transformer directories are loaded (and may choose the OpenAPI schema) before any
        // transformer runs, as in kustomize.
        let plugins = self.plugin_configs(&k.transformers, "transformers")?;
        let schemas = self.openapi.schemas();
        let config = acc.config.clone();
        let resmap = &mut acc.resmap;
        let (loader, dir) = (self.loader, self.dir.as_path());
        let smp = &k.patches_strategic_merge;
        patch::apply_strategic_merge_patches(resmap, smp, loader, dir, schemas)
            .map_err(step(|| self.ctx("patchesStrategicMerge")))?;
        let psm = usize::from(!k.patches_strategic_merge.is_empty());
        self.record_builtin(resmap, "PatchStrategicMergeTransformer", psm);
        patch::apply_patches(resmap, &k.patches, loader, dir, schemas)
            .map_err(step(|| self.ctx("patches")))?;
        self.record_builtin(resmap, "PatchTransformer", k.patches.len());
        if !k.namespace.is_empty() {
            let options = transformers::NamespaceOptions::default();
            transformers::set_namespace(resmap, &k.namespace, &options, &config.name_space)
                .map_err(step(|| self.ctx("namespace")))?;
            self.record_builtin(resmap, "NamespaceTransformer", 1);
        }
        if !k.name_prefix.is_empty() {
            transformers::add_name_prefix(resmap, &k.name_prefix, &config.name_prefix)
                .map_err(step(|| self.ctx("namePrefix")))?;
            self.record_builtin(resmap, "PrefixTransformer", 1);
        }
        if !k.name_suffix.is_empty() {
            transformers::add_name_suffix(resmap, &k.name_suffix, &config.name_suffix)
                .map_err(step(|| self.ctx("nameSuffix")))?;
            self.record_builtin(resmap, "SuffixTransformer", 1);
        }
        self.check_metadata_copies(resmap.len())?;
        transformers::apply_kustomization_labels(resmap, &k.labels, &k.common_labels, &config)
            .map_err(step(|| self.ctx("labels")))?;
        let label_transformers = k.labels.len() + usize::from(!k.common_labels.is_empty());
        self.record_builtin(resmap, "LabelTransformer", label_transformers);
        if !k.common_annotations.is_empty() {
            transformers::add_annotations(
                resmap,
                &k.common_annotations,
                &config.common_annotations,
            )
            .map_err(step(|| self.ctx("commonAnnotations")))?;
            self.record_builtin(resmap, "AnnotationsTransformer", 1);
        }
        patch::apply_json6902_patches(resmap, &k.patches_json6902, loader, dir)
            .map_err(step(|| self.ctx("patchesJson6902")))?;
        self.record_builtin(resmap, "PatchJson6902Transformer", k.patches_json6902.len());
        if !k.replicas.is_empty() {
            transformers::set_all_replicas(resmap, &k.replicas, &config.replicas)
                .map_err(step(|| self.ctx("replicas")))?;
            self.record_builtin(resmap, "ReplicaCountTransformer", k.replicas.len());
        }
        if !k.images.is_empty() {
            transformers::set_images(resmap, &k.images, &config.images)
                .map_err(step(|| self.ctx("images")))?;
            self.record_builtin(resmap, "ImageTagTransformer", k.images.len());
        }
        replacements::apply_replacements(resmap, &k.replacements, loader, dir)
            .map_err(step(|| self.ctx("replacements")))?;
        let replacement = usize::from(!k.replacements.is_empty());
        self.record_builtin(resmap, "ReplacementTransformer", replacement);
        for (plugin, origin) in &plugins {
            self.run_builtin_transformer(resmap, plugin)?;
            if let Some(origin) = origin {
                record_transformation(resmap, origin, 1);
            }
        }
        Ok(())
    }

    /// Refuses objects that add up to more than [`budget::MAX_OBJECT_BYTES`] (estimated).
    fn check_total_size(&self, resmap: &ResMap) -> Result<(), BuildError> {
        let total = resmap.iter().fold(0usize, |acc, r| {
            acc.saturating_add(budget::extent_map(&r.obj))
        });
        if total > budget::MAX_OBJECT_BYTES {
            return Err(BuildError::Kustomization(format!(
                "{}: the objects built hold more than {} MiB (refusing an amplifying input)",
                self.here(),
                budget::MAX_OBJECT_BYTES >> 20
            )));
        }
        Ok(())
    }

    /// Refuses labels and annotations that, written into every object (and its selectors and
    /// templates), would copy more than [`budget::MAX_COPIED_BYTES`].
    fn check_metadata_copies(&self, objects: usize) -> Result<(), BuildError> {
        let k = &self.kustomization;
        let pairs = |map: &std::collections::BTreeMap<String, String>| {
            map.iter()
                .map(|(key, value)| key.len() + value.len() + 96)
                .sum::<usize>()
        };
        let per_object = pairs(&k.common_labels)
            .saturating_mul(4)
            .saturating_add(
                k.labels
                    .iter()
                    .map(|l| pairs(&l.pairs))
                    .sum::<usize>()
                    .saturating_mul(4),
            )
            .saturating_add(pairs(&k.common_annotations).saturating_mul(2));
        let mut budget = budget::Budget::new();
        budget
            .charge(per_object.saturating_mul(objects), || {
                self.ctx(&format!(
                    "labels and annotations ({per_object} bytes) on {objects} objects"
                ))
            })
            .map_err(|e| BuildError::Kustomization(e.to_string()))
    }

    fn run_builtin_transformer(
        &self,
        resmap: &mut ResMap,
        config: &Object,
    ) -> Result<(), BuildError> {
        let kind = plugin_kind(config, &self.here())?;
        let ctx = || self.ctx(&format!("transformer {kind}"));
        match kind.as_str() {
            "PatchTransformer" | "PatchStrategicMergeTransformer" | "PatchJson6902Transformer" => {
                patch::apply_builtin_patch_transformer(
                    resmap,
                    &kind,
                    config,
                    self.loader,
                    &self.dir,
                    self.openapi.schemas(),
                )
                .map_err(step(ctx))
            }
            "ReplacementTransformer" => replacements::apply_builtin_replacement_transformer(
                resmap,
                config,
                self.loader,
                &self.dir,
            )
            .map_err(step(ctx)),
            _ => match transformers::apply_builtin(resmap, &kind, config).map_err(step(ctx))? {
                true => Ok(()),
                false => Err(BuildError::Unsupported {
                    dir: self.here(),
                    message: format!(
                        "transformer kind '{kind}' is not a builtin transformer (plugins are disabled)"
                    ),
                }),
            },
        }
    }

    /// The plugin configuration objects of a `generators:`/`transformers:` list: each entry
    /// is inline YAML, a file, or a kustomization directory whose output are the configs.
    /// The plugin configuration objects of a `generators:`/`transformers:` list: each entry
    /// is inline YAML, a file, or a kustomization directory whose output are the configs.
    /// Each comes with the origin kustomize records for what the plugin does (when
    /// build metadata is tracked).
    fn plugin_configs(
        &self,
        entries: &[String],
        field: &str,
    ) -> Result<Vec<(Object, Option<Origin>)>, BuildError> {
        let mut configs: Vec<(Object, Option<Origin>)> = Vec::new();
        let plugin_origin = |config: &Object, source: &Origin| {
            let meta = |key: &str| {
                config
                    .get("metadata")
                    .and_then(|m| m.get(key))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let text = |key: &str| {
                config
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let plugin = PluginId {
                api_version: text("apiVersion"),
                kind: text("kind"),
                name: meta("name"),
                namespace: meta("namespace"),
            };
            Origin {
                repo: source.repo.clone(),
                git_ref: source.git_ref.clone(),
                ..Origin::plugin(source.path.clone(), plugin)
            }
        };
        // As kustomize: the inline configurations first, in order, then those of the files
        // and directories, in order.
        let mut paths: Vec<String> = Vec::new();
        for entry in entries {
            let inline = yaml::parse_documents(entry)
                .ok()
                .filter(|docs| !docs.is_empty() && docs.iter().all(Value::is_object));
            let Some(docs) = inline else {
                paths.push(entry.clone());
                continue;
            };
            let shown = self.ctx(&format!("inline entry of {field}"));
            for resource in objects_to_resources(docs, &shown)? {
                let origin = self
                    .record
                    .then(|| plugin_origin(&resource.obj, &self.kustfile_origin()));
                configs.push((resource.obj, origin));
            }
        }
        let mut acc = Accumulator::default();
        self.accumulate_resources(&mut acc, &paths)?;
        for resource in acc.resmap.into_vec() {
            let origin = resource
                .origin
                .as_ref()
                .map(|o| plugin_origin(&resource.obj, o));
            configs.push((resource.obj, origin));
        }
        for (config, _) in &configs {
            let api_version = config
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or("");
            if api_version != "builtin" {
                return Err(BuildError::Unsupported {
                    dir: self.here(),
                    message: format!(
                        "{field} entry of apiVersion '{api_version}' is an external plugin; plugins are disabled (only apiVersion: builtin is supported)"
                    ),
                });
            }
        }
        Ok(configs)
    }
}

fn plugin_kind(config: &Object, here: &str) -> Result<String, BuildError> {
    config
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            BuildError::Kustomization(format!("{here}: plugin configuration without kind"))
        })
}

/// An entry as shown in messages: a URL's password redacted, control characters escaped
/// (see [`super::loader::shown_url`]).
fn escape(name: &str) -> String {
    super::loader::shown_url(name)
}

/// Appends `resources` read from `file` to `acc`, each with `origin`.
fn append_resources(
    acc: &mut Accumulator,
    resources: Vec<Resource>,
    origin: Option<Origin>,
    file: &str,
) -> Result<(), BuildError> {
    for mut resource in resources {
        resource.origin = origin.clone();
        acc.resmap
            .append(resource)
            .map_err(step(|| format!("{file}: merging resources")))?;
    }
    Ok(())
}

/// The resources of a fetched file shown as `file`, or the error and whether it is one of
/// the bytes not being YAML at all (rather than of documents that are not objects).
fn resources_from_bytes(bytes: Vec<u8>, file: &str) -> Result<Vec<Resource>, (BuildError, bool)> {
    let malformed = |message: String| {
        (
            BuildError::Resource {
                file: file.to_string(),
                message,
            },
            true,
        )
    };
    let text = String::from_utf8(bytes).map_err(|_| malformed("not valid UTF-8".into()))?;
    let docs =
        yaml::parse_documents_with_plain_texts(&text).map_err(|e| malformed(e.to_string()))?;
    written_objects_to_resources(docs, file).map_err(|e| (e, false))
}

/// Parses a resource file: every document must be an object with a kind and a name; List
/// kinds are expanded into their items.
pub fn parse_resources(text: &str, file: &str) -> Result<Vec<Resource>, BuildError> {
    let docs = yaml::parse_documents_with_plain_texts(text).map_err(|e| BuildError::Resource {
        file: file.to_string(),
        message: e.to_string(),
    })?;
    written_objects_to_resources(docs, file)
}

fn objects_to_resources(docs: Vec<Value>, file: &str) -> Result<Vec<Resource>, BuildError> {
    let docs = docs.into_iter().map(|doc| (doc, Vec::new())).collect();
    written_objects_to_resources(docs, file)
}

/// Resources of documents read with the text of their plain scalars (see
/// [`yaml::PlainText`]): kustomize keeps an annotation's text as written (`0x1F`, `~`, an
/// empty value) and drops fields written with no value when it merges a patch.
fn written_objects_to_resources(
    docs: Vec<(Value, Vec<yaml::PlainText>)>,
    file: &str,
) -> Result<Vec<Resource>, BuildError> {
    let invalid = |message: String| BuildError::Resource {
        file: file.to_string(),
        message,
    };
    let mut out = Vec::new();
    for (index, (doc, texts)) in docs.into_iter().enumerate() {
        let Value::Object(obj) = doc else {
            return Err(invalid(format!("document {index} is not a map of fields")));
        };
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if kind.ends_with("List") && obj.get("items").is_some_and(Value::is_array) {
            let items = obj
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let items = items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (item, texts_under(&texts, i)))
                .collect();
            out.extend(written_objects_to_resources(items, file)?);
            continue;
        }
        if kind.is_empty() {
            return Err(invalid(format!("missing kind in document {index}")));
        }
        let mut resource = Resource::new(obj);
        keep_written_texts(&mut resource, texts);
        stringify_annotations(&mut resource);
        if resource.name().is_empty() {
            return Err(invalid(format!(
                "missing metadata.name in {kind} (document {index})"
            )));
        }
        out.push(resource);
    }
    Ok(out)
}

/// The texts of the `index`th element of a List's `items`, from that element.
fn texts_under(texts: &[yaml::PlainText], index: usize) -> Vec<yaml::PlainText> {
    let prefix = [
        yaml::PathStep::Key("items".to_string()),
        yaml::PathStep::Index(index),
    ];
    texts
        .iter()
        .filter(|t| t.path.starts_with(&prefix))
        .map(|t| yaml::PlainText {
            path: t.path[prefix.len()..].to_vec(),
            text: t.text.clone(),
        })
        .collect()
}

/// Annotations written as non-strings take their text as written (`0x1F` stays "0x1F"), and
/// fields written with no value are remembered for the merge, which drops them (annotations
/// too: one that survives comes out "").
fn keep_written_texts(resource: &mut Resource, texts: Vec<yaml::PlainText>) {
    for written in texts {
        if written.text.is_empty() {
            resource.empty_nulls.push(written.path);
        } else if let [
            yaml::PathStep::Key(metadata),
            yaml::PathStep::Key(annotations),
            yaml::PathStep::Key(key),
        ] = written.path.as_slice()
            && metadata == "metadata"
            && annotations == "annotations"
        {
            let key = key.clone();
            resource.set_metadata_entry("annotations", &key, &written.text);
        }
    }
}

/// Annotation values are strings: kustomize reads `port: 8080` or `happy: true` under
/// `metadata.annotations` as the strings "8080" and "true" (it re-writes the map from its text
/// when it clears its build annotations). Labels keep their types, as kustomize leaves them.
fn stringify_annotations(resource: &mut Resource) {
    let Some(Value::Object(meta)) = resource.obj.get_mut("metadata") else {
        return;
    };
    if let Some(Value::Object(map)) = meta.get_mut("annotations") {
        for value in map.values_mut().filter(|v| !v.is_string() && !v.is_null()) {
            *value = Value::String(scalar_text(value));
        }
    }
}

/// Appends `origin` to the transformations of every resource, `times` times.
fn record_transformation(resmap: &mut ResMap, origin: &Origin, times: usize) {
    for resource in resmap.iter_mut() {
        for _ in 0..times {
            resource.transformations.push(origin.clone());
        }
    }
}

/// Drops objects annotated `config.kubernetes.io/local-config: "true"`.
/// kustomize clears its internal annotations from every object on output by writing
/// `metadata.annotations` anew from their text, so every value comes out a string (a patch's
/// `true` is "true") and an object written with `annotations: {}` or `annotations: null`
/// comes out without the field. Nested metadata (a pod template's) and `labels` are left as
/// written.
fn rewrite_annotations(obj: &mut Object) {
    let Some(Value::Object(metadata)) = obj.get_mut("metadata") else {
        return;
    };
    let empty = match metadata.get_mut("annotations") {
        Some(Value::Null) => true,
        Some(Value::Object(annotations)) => {
            for value in annotations.values_mut().filter(|v| !v.is_string()) {
                let text = if value.is_null() {
                    String::new()
                } else {
                    scalar_text(value)
                };
                *value = Value::String(text);
            }
            annotations.is_empty()
        }
        _ => false,
    };
    if empty {
        metadata.remove("annotations");
    }
}

fn drop_local_config(resmap: &mut ResMap) {
    resmap
        .as_mut_vec()
        .retain(|r| r.annotation("config.kubernetes.io/local-config") != Some("true"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Object {
        match value {
            Value::Object(map) => map,
            _ => Object::new(),
        }
    }

    #[test]
    fn empty_or_null_annotations_are_dropped_and_the_rest_kept() {
        for annotations in [serde_json::json!({}), Value::Null] {
            let mut obj = object(serde_json::json!({
                "metadata": {"name": "a", "annotations": annotations, "labels": {}},
                "spec": {"template": {"metadata": {"annotations": {}}}}
            }));
            rewrite_annotations(&mut obj);
            assert_eq!(
                Value::Object(obj),
                serde_json::json!({
                    "metadata": {"name": "a", "labels": {}},
                    "spec": {"template": {"metadata": {"annotations": {}}}}
                })
            );
        }
        let mut kept = object(serde_json::json!({"metadata": {"annotations": {"a": "b"}}}));
        rewrite_annotations(&mut kept);
        assert_eq!(kept["metadata"]["annotations"]["a"], "b");
    }

    #[test]
    fn annotation_values_come_out_as_strings_and_label_values_keep_their_type() {
        let mut obj = object(serde_json::json!({"metadata": {
            "annotations": {"flag": true, "port": 8080, "ratio": 1.5, "none": null, "s": "x"},
            "labels": {"zero": 0, "flag": true}
        }}));
        rewrite_annotations(&mut obj);
        assert_eq!(
            obj["metadata"]["annotations"],
            serde_json::json!({"flag": "true", "port": "8080", "ratio": "1.5", "none": "", "s": "x"})
        );
        assert_eq!(
            obj["metadata"]["labels"],
            serde_json::json!({"zero": 0, "flag": true})
        );
    }
}
