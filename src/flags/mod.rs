//! The command-line flags of Flux's kustomize-controller v1.10.1, with the same names,
//! defaults and value syntax.
//!
//! Flux parses its flags with pflag, and so do patches of its Deployment expect: a flag
//! given twice takes its last value, `--feature-gates` given twice merges both lists, and
//! values are read as Go reads them (see [`go_values`]). A flag whose behaviour this
//! controller does not have yet is refused at start-up by [`ControllerFlags::validate`],
//! naming the flag, rather than silently ignored.

pub mod go_values;

pub use go_values::FlagValueError;

use std::collections::BTreeMap;
use std::time::Duration;

use clap::{ArgAction, Args, ValueEnum};

use labelselector::LabelSelector;

/// Log output format (`--log-encoding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogEncoding {
    /// One JSON object per line, as Flux logs.
    Json,
    /// Human-readable text.
    Console,
}

/// The label a ConfigMap or Secret carries for its changes to reconcile the Kustomizations
/// that read it (the default of `--watch-configs-label-selector`).
pub const WATCH_CONFIGS_DEFAULT_SELECTOR: &str = "reconcile.fluxcd.io/watch=Enabled";

/// Flags of the controller process, named and defaulted as in Flux.
///
/// Parse with `args_override_self` set on the command (as `main` does), so that a repeated
/// flag takes its last value as pflag does.
#[derive(Args, Clone, Debug)]
pub struct ControllerFlags {
    /// Watch Kustomizations in all namespaces; if false, only in the runtime namespace.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub watch_all_namespaces: bool,

    /// Watch only Kustomizations (and sources) matching this label selector.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub watch_label_selector: String,

    /// Watch for changes only the ConfigMaps and Secrets matching this label selector (empty:
    /// all of them).
    #[arg(long, default_value = WATCH_CONFIGS_DEFAULT_SELECTOR, allow_hyphen_values = true)]
    pub watch_configs_label_selector: String,

    /// Log verbosity: trace, debug, info or error.
    #[arg(long, default_value = "info")]
    pub log_level: String,

    /// Log encoding: json or console.
    #[arg(long, value_enum, default_value = "json")]
    pub log_encoding: LogEncoding,

    /// Elect a leader with a Lease before reconciling, so that replicas do not compete.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub enable_leader_election: bool,

    /// Give the Lease up when the process stops, so that a successor need not wait for it to
    /// expire.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub leader_election_release_on_cancel: bool,

    /// How long a leader's lease is valid.
    #[arg(long, default_value = "35s", value_parser = go_values::parse_duration)]
    pub leader_election_lease_duration: Duration,

    /// How long the leader keeps trying to renew before giving up leadership.
    #[arg(long, default_value = "30s", value_parser = go_values::parse_duration)]
    pub leader_election_renew_deadline: Duration,

    /// How often candidates retry to acquire or renew the lease.
    #[arg(long, default_value = "5s", value_parser = go_values::parse_duration)]
    pub leader_election_retry_period: Duration,

    /// Address the Prometheus metrics endpoint binds to.
    #[arg(long, default_value = ":8080")]
    pub metrics_addr: String,

    /// Address the /healthz and /readyz probes bind to.
    #[arg(long, default_value = ":9440")]
    pub health_addr: String,

    /// Address of the notification-controller's event webhook; empty disables forwarding.
    #[arg(long, default_value = "")]
    pub events_addr: String,

    /// Number of Kustomizations reconciled concurrently.
    #[arg(long, default_value = "4", value_parser = go_values::parse_int_in::<u16>)]
    pub concurrent: u16,

    /// Number of objects applied concurrently within one Kustomization.
    #[arg(long, default_value = "4", value_parser = go_values::parse_int_in::<u16>)]
    pub concurrent_ssa: u16,

    /// How long to wait before re-checking a Kustomization's dependencies.
    #[arg(long, default_value = "30s", value_parser = go_values::parse_duration)]
    pub requeue_dependency: Duration,

    /// Deny references to sources (and other objects) in other namespaces.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub no_cross_namespace_refs: bool,

    /// Refuse kustomize remote bases; only files inside the artifact are read.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub no_remote_bases: bool,

    /// Service account impersonated when a Kustomization names none.
    #[arg(long, default_value = "")]
    pub default_service_account: String,

    /// Service account used for KMS decryption when a Kustomization names none.
    #[arg(long, default_value = "")]
    pub default_decryption_service_account: String,

    /// Service account used for remote kubeconfigs when a Kustomization names none.
    #[arg(long, default_value = "")]
    pub default_kubeconfig_service_account: String,

    /// Allow the `user.exec` section in kubeconfigs provided for remote apply.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub insecure_kubeconfig_exec: bool,

    /// Allow kubeconfigs provided for remote apply to disable TLS verification.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = go_values::parse_bool)]
    pub insecure_kubeconfig_tls: bool,

    /// Secret holding age keys used when a Kustomization has no decryption secretRef.
    #[arg(long, default_value = "")]
    pub sops_age_secret: String,

    /// ConfigMap (in the controller's namespace) listing the OpenBao/Vault instances
    /// (address and login path) trusted for SOPS decryption with a ServiceAccount token.
    #[arg(long, default_value = "")]
    pub sops_vault_configmap: String,

    /// The most tokens the token cache holds (credentials obtained with a decryption
    /// ServiceAccount); 0 turns it off.
    #[arg(long, default_value = "100", value_parser = go_values::parse_int_in::<usize>)]
    pub token_cache_max_size: usize,

    /// The longest a token is cached (at most one hour).
    #[arg(long, default_value = "1h", value_parser = go_values::parse_duration)]
    pub token_cache_max_duration: Duration,

    /// Retries of an artifact download.
    #[arg(long, default_value = "9", value_parser = go_values::parse_int_in::<u32>)]
    pub http_retry: u32,

    /// Extracted artifact content kept between reconciles, each artifact digest downloaded and
    /// extracted once for every Kustomization that reads it: bytes, or with a `Ki`, `Mi` or `Gi`
    /// suffix. 0 keeps nothing between reconciles (concurrent ones still share a download).
    /// This controller's own flag; Flux's has none.
    #[arg(long, default_value = "256Mi", value_parser = go_values::parse_byte_size)]
    pub artifact_cache_max_size: u64,

    /// When drift of applied objects is corrected: `interval` (at the next `spec.interval`, as
    /// Flux does) or `prompt` (seconds after another manager writes or deletes an object a
    /// Kustomization applied). A Kustomization may choose for itself with the annotation
    /// `kustomize.toolkit.fluxcd.io/drift-correction: prompt|interval`. This controller's own
    /// flag; Flux's has none.
    #[arg(long, value_enum, default_value_t = DriftCorrection::Interval)]
    pub drift_correction: DriftCorrection,

    /// Client-side request rate to the Kubernetes API.
    #[arg(long, default_value = "50", value_parser = go_values::parse_float32)]
    pub kube_api_qps: f32,

    /// Client-side request burst to the Kubernetes API.
    #[arg(long, default_value = "300", value_parser = go_values::parse_int_in::<u32>)]
    pub kube_api_burst: u32,

    /// Smallest delay before retrying a reconcile that returned an error.
    #[arg(long, default_value = "750ms", value_parser = go_values::parse_duration)]
    pub min_retry_delay: Duration,

    /// Largest delay before retrying a reconcile that returned an error.
    #[arg(long, default_value = "15m", value_parser = go_values::parse_duration)]
    pub max_retry_delay: Duration,

    /// Jitter applied to `spec.interval`, in percent (less than 100).
    #[arg(long, default_value = "5", value_parser = go_values::parse_int_in::<u8>)]
    pub interval_jitter_percentage: u8,

    /// Field manager disallowed to perform changes on managed resources: its fields are
    /// taken over after the dry-run (repeatable; matched as a name prefix, as Flux does).
    #[arg(long, allow_hyphen_values = true)]
    pub override_manager: Vec<String>,

    /// Field manager whose fields are taken over before the dry-run, to recover objects a
    /// stale co-owner keeps from validating (repeatable; exact name). Remove it once the
    /// objects have recovered.
    #[arg(long, allow_hyphen_values = true)]
    pub override_manager_before_dry_run: Vec<String>,

    /// Kinds applied in their own stage, after Class kinds and before everything else: a
    /// comma-separated list of `group/Kind` (the last occurrence of the flag counts).
    #[arg(long, default_value = "")]
    pub custom_apply_stage_kinds: String,

    /// Feature gates, `Name=true|false` pairs separated by commas; repeated, the lists merge
    /// (a later value of a gate wins).
    #[arg(long = "feature-gates", value_name = "GATES", value_parser = GatePairs::parse, action = ArgAction::Append)]
    pub feature_gate_values: Vec<GatePairs>,

    /// SPIFFE ID of an artifact server authorized to serve artifacts; repeated. Artifacts
    /// are then fetched over mTLS with the X.509-SVID of the SPIFFE Workload API.
    #[arg(long, value_name = "SPIFFE_ID")]
    pub authorized_artifact_server_spiffe_id: Vec<String>,

    /// SPIFFE ID of an event server authorized to receive events; repeated. Events are then
    /// forwarded over mTLS with the X.509-SVID of the SPIFFE Workload API.
    #[arg(long, value_name = "SPIFFE_ID")]
    pub authorized_event_server_spiffe_id: Vec<String>,

    /// The gRPC URL of the SPIFFE Broker endpoint (`unix:///path` or `tcp://host:port`),
    /// which issues JWT-SVIDs for the `spiffe` credential provider.
    #[arg(long, default_value = "")]
    pub spiffe_broker_endpoint: String,

    /// SPIFFE ID of the SPIFFE Broker endpoint; repeated.
    #[arg(long, value_name = "SPIFFE_ID")]
    pub spiffe_broker_id: Vec<String>,
}

/// A flag this controller refuses at start-up: a value it cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlagError {
    /// The flag's value parses but cannot be used.
    #[error("flag --{flag} has an invalid value {value:?}: {why}")]
    Invalid {
        /// The flag's name, without dashes.
        flag: &'static str,
        /// The value given.
        value: String,
        /// Why it cannot be used.
        why: String,
    },
}

impl ControllerFlags {
    /// Refuses values that parse but cannot be used, and flags whose behaviour is not
    /// built, so that nothing is silently ignored.
    pub fn validate(&self) -> Result<(), FlagError> {
        for (flag, ids) in [
            (
                "authorized-artifact-server-spiffe-id",
                &self.authorized_artifact_server_spiffe_id,
            ),
            (
                "authorized-event-server-spiffe-id",
                &self.authorized_event_server_spiffe_id,
            ),
            ("spiffe-broker-id", &self.spiffe_broker_id),
        ] {
            for id in ids {
                if let Err(why) = spiffe::SpiffeId::parse(id) {
                    return Err(FlagError::Invalid {
                        flag,
                        value: id.clone(),
                        why: why.to_string(),
                    });
                }
            }
        }
        if !self.spiffe_broker_endpoint.is_empty()
            && let Err(why) = spiffe::Endpoint::parse(&self.spiffe_broker_endpoint)
        {
            return Err(FlagError::Invalid {
                flag: "spiffe-broker-endpoint",
                value: self.spiffe_broker_endpoint.clone(),
                why: why.to_string(),
            });
        }
        self.feature_gates()?;
        if self.interval_jitter_percentage >= 100 {
            return Err(FlagError::Invalid {
                flag: "interval-jitter-percentage",
                value: self.interval_jitter_percentage.to_string(),
                why: "the jitter must be less than 100 percent".into(),
            });
        }
        for (flag, selector) in [
            ("watch-label-selector", &self.watch_label_selector),
            (
                "watch-configs-label-selector",
                &self.watch_configs_label_selector,
            ),
        ] {
            if let Err(why) = LabelSelector::parse(selector) {
                return Err(FlagError::Invalid {
                    flag,
                    value: selector.clone(),
                    why: format!("it is not a label selector ({why})"),
                });
            }
        }
        if !matches!(
            self.log_level.as_str(),
            "trace" | "debug" | "info" | "error"
        ) {
            return Err(FlagError::Invalid {
                flag: "log-level",
                value: self.log_level.clone(),
                why: "expected trace, debug, info or error".into(),
            });
        }
        Ok(())
    }

    /// Every feature gate: Flux's defaults, then each `--feature-gates` value in order.
    pub fn feature_gates(&self) -> Result<FeatureGates, FlagError> {
        let mut gates = FeatureGates::default();
        for pair in self.feature_gate_values.iter().flat_map(|v| &v.0) {
            gates.set(&pair.0, pair.1)?;
        }
        Ok(gates)
    }

    /// The kinds of `--custom-apply-stage-kinds`, in order.
    pub fn custom_apply_stage_kinds(&self) -> Vec<String> {
        self.custom_apply_stage_kinds
            .split(',')
            .map(str::trim)
            .filter(|kind| !kind.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// When drift is corrected (`--drift-correction`, and the annotation of the same name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DriftCorrection {
    /// At the next interval, as Flux does.
    #[default]
    Interval,
    /// Seconds after another manager wrote or deleted an applied object.
    Prompt,
}

impl DriftCorrection {
    /// The annotation value (`interval`, `prompt`); `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "interval" => Some(DriftCorrection::Interval),
            "prompt" => Some(DriftCorrection::Prompt),
            _ => None,
        }
    }
}

/// One `--feature-gates` value: `Name=bool` pairs in order, as Kubernetes'
/// `cliflag.MapStringBool` reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatePairs(Vec<(String, bool)>);

impl GatePairs {
    /// Parses `A=true,B=0`: empty items are skipped, names and values trimmed, values read
    /// as Go's `strconv.ParseBool`.
    pub fn parse(text: &str) -> Result<GatePairs, FlagValueError> {
        let mut pairs = Vec::new();
        for item in text.split(',').filter(|item| !item.is_empty()) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| FlagValueError::NotGatePair(item.to_string()))?;
            let value =
                go_values::parse_bool(value.trim()).map_err(|why| FlagValueError::GateValue {
                    name: name.trim().to_string(),
                    source: Box::new(why),
                })?;
            pairs.push((name.trim().to_owned(), value));
        }
        Ok(GatePairs(pairs))
    }
}

/// Flux's feature gates and their defaults (kustomize-controller v1.10).
pub const FEATURE_GATE_DEFAULTS: [(&str, bool); 13] = [
    ("StrictPostBuildSubstitutions", true),
    ("DisableStatusPollerCache", true),
    ("CacheSecretsAndConfigMaps", false),
    ("DisableFailFastBehavior", false),
    ("GroupChangeLog", false),
    ("AdditiveCELDependencyCheck", false),
    ("ExternalArtifact", false),
    ("CancelHealthCheckOnNewRevision", false),
    ("DisableConfigWatchers", false),
    ("DirectSourceFetch", false),
    ("MigrateAPIVersion", false),
    // Retired in Flux 2.10 (object identity is always on): accepted, changes nothing.
    ("ObjectLevelWorkloadIdentity", false),
    ("DisableCommitStatusEvent", false),
];

/// The state of every feature gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates(BTreeMap<&'static str, bool>);

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates(FEATURE_GATE_DEFAULTS.into_iter().collect())
    }
}

impl FeatureGates {
    /// Sets the gate `name`; a gate Flux v1.10.1 does not know is refused, naming it.
    pub fn set(&mut self, name: &str, value: bool) -> Result<(), FlagError> {
        let known = FEATURE_GATE_DEFAULTS
            .iter()
            .find(|(known, _)| *known == name)
            .ok_or_else(|| FlagError::Invalid {
                flag: "feature-gates",
                value: format!("{name}={value}"),
                why: format!("{name} is not a feature gate of this controller"),
            })?;
        self.0.insert(known.0, value);
        Ok(())
    }

    /// Whether the named gate is on.
    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The controller's command line as `main` declares it: a repeated flag overrides.
    #[derive(Parser)]
    #[command(args_override_self = true)]
    struct Cli {
        #[command(flatten)]
        flags: ControllerFlags,
    }

    fn parse(args: &[&str]) -> Result<ControllerFlags, clap::Error> {
        let mut argv = vec!["kustomize-controller"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|cli| cli.flags)
    }

    fn gates(args: &[&str]) -> Result<FeatureGates, FlagError> {
        parse(args).unwrap().feature_gates()
    }

    #[test]
    fn defaults_match_flux() {
        let flags = parse(&[]).unwrap();
        assert!(flags.watch_all_namespaces);
        assert_eq!(flags.concurrent, 4);
        assert_eq!(flags.concurrent_ssa, 4);
        assert_eq!(flags.http_retry, 9);
        assert_eq!(flags.artifact_cache_max_size, 256 << 20);
        assert_eq!(flags.drift_correction, DriftCorrection::Interval);
        assert_eq!(flags.requeue_dependency, Duration::from_secs(30));
        assert_eq!(flags.min_retry_delay, Duration::from_millis(750));
        assert_eq!(flags.max_retry_delay, Duration::from_secs(900));
        assert_eq!(
            flags.leader_election_lease_duration,
            Duration::from_secs(35)
        );
        assert!(flags.leader_election_release_on_cancel);
        assert_eq!(flags.metrics_addr, ":8080");
        assert_eq!(flags.health_addr, ":9440");
        assert_eq!(flags.log_encoding, LogEncoding::Json);
        assert_eq!(flags.kube_api_qps, 50.0);
        assert_eq!(flags.kube_api_burst, 300);
        assert_eq!(flags.interval_jitter_percentage, 5);
        assert_eq!(flags.token_cache_max_size, 100);
        assert_eq!(flags.token_cache_max_duration, Duration::from_secs(3600));
        assert_eq!(
            flags.watch_configs_label_selector,
            "reconcile.fluxcd.io/watch=Enabled"
        );
        let gates = flags.feature_gates().unwrap();
        assert!(gates.enabled("StrictPostBuildSubstitutions"));
        assert!(gates.enabled("DisableStatusPollerCache"));
        assert!(!gates.enabled("ExternalArtifact"));
        assert_eq!(flags.validate(), Ok(()));
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        let flags = parse(&[
            "--log-level=info",
            "--concurrent=4",
            "--enable-leader-election",
            "--log-level=debug",
            "--concurrent=20",
            "--enable-leader-election=false",
            "--requeue-dependency=5s",
            "--requeue-dependency",
            "10s",
            "--custom-apply-stage-kinds=a/B",
            "--custom-apply-stage-kinds=rbac.authorization.k8s.io/Role,x.io/Y",
        ])
        .unwrap();
        assert_eq!(flags.log_level, "debug");
        assert_eq!(flags.concurrent, 20);
        assert!(!flags.enable_leader_election);
        assert_eq!(flags.requeue_dependency, Duration::from_secs(10));
        assert_eq!(
            flags.custom_apply_stage_kinds(),
            ["rbac.authorization.k8s.io/Role", "x.io/Y"]
        );
        assert_eq!(flags.validate(), Ok(()));
    }

    #[test]
    fn repeated_feature_gates_merge_and_a_later_value_wins() {
        let gates = gates(&[
            "--feature-gates=ExternalArtifact=true,CancelHealthCheckOnNewRevision=true",
            "--feature-gates=GroupChangeLog=1",
            "--feature-gates=ExternalArtifact=F,",
        ])
        .unwrap();
        assert!(!gates.enabled("ExternalArtifact"));
        assert!(gates.enabled("CancelHealthCheckOnNewRevision"));
        assert!(gates.enabled("GroupChangeLog"));
        assert!(
            gates.enabled("StrictPostBuildSubstitutions"),
            "defaults stay"
        );
    }

    #[test]
    fn repeatable_lists_accumulate_each_value_whole() {
        let flags = parse(&[
            "--override-manager=kubectl-edit",
            "--override-manager=a,b",
            "--override-manager-before-dry-run=legacy",
        ])
        .unwrap();
        assert_eq!(flags.override_manager, ["kubectl-edit", "a,b"]);
        assert_eq!(flags.override_manager_before_dry_run, ["legacy"]);
    }

    #[test]
    fn values_are_read_as_go_reads_them() {
        let flags = parse(&[
            "--enable-leader-election=1",
            "--watch-all-namespaces=F",
            "--no-remote-bases=TRUE",
            "--requeue-dependency=0",
            "--min-retry-delay=1.5s",
            "--max-retry-delay=1h30m",
            "--leader-election-retry-period=300ms",
            "--concurrent=0x10",
            "--kube-api-qps=7.5",
            "--kube-api-burst=1_000",
            "--interval-jitter-percentage=010",
        ])
        .unwrap();
        assert!(flags.enable_leader_election);
        assert!(!flags.watch_all_namespaces);
        assert!(flags.no_remote_bases);
        assert_eq!(flags.requeue_dependency, Duration::ZERO);
        assert_eq!(flags.min_retry_delay, Duration::from_millis(1500));
        assert_eq!(flags.max_retry_delay, Duration::from_secs(5400));
        assert_eq!(
            flags.leader_election_retry_period,
            Duration::from_millis(300)
        );
        assert_eq!(flags.concurrent, 16);
        assert_eq!(flags.kube_api_qps, 7.5);
        assert_eq!(flags.kube_api_burst, 1000);
        assert_eq!(flags.interval_jitter_percentage, 8);
        assert_eq!(flags.validate(), Ok(()));
    }

    #[test]
    fn a_boolean_flag_does_not_take_the_next_argument_as_its_value() {
        // pflag reads `--flag false` as the flag set to true and a positional `false`.
        assert!(parse(&["--enable-leader-election", "false"]).is_err());
        assert!(
            parse(&["--enable-leader-election", "--log-level=debug"])
                .unwrap()
                .enable_leader_election
        );
    }

    #[test]
    fn unparsable_values_name_the_flag() {
        for (arg, flag) in [
            ("--requeue-dependency=soon", "--requeue-dependency"),
            ("--concurrent=many", "--concurrent"),
            ("--enable-leader-election=yes", "--enable-leader-election"),
            ("--feature-gates=ExternalArtifact=maybe", "--feature-gates"),
            ("--feature-gates=ExternalArtifact", "--feature-gates"),
            (
                "--interval-jitter-percentage=300",
                "--interval-jitter-percentage",
            ),
            ("--log-encoding=xml", "--log-encoding"),
        ] {
            let error = parse(&[arg]).err().unwrap_or_else(|| panic!("{arg}"));
            assert!(error.to_string().contains(flag), "{arg}: {error}");
        }
    }

    #[test]
    fn values_that_parse_but_cannot_be_used_are_refused_by_name() {
        let refused = |args: &[&str]| parse(args).unwrap().validate().unwrap_err().to_string();
        assert!(refused(&["--feature-gates=NoSuchGate=true"]).contains("NoSuchGate"));
        assert!(refused(&["--interval-jitter-percentage=100"]).contains("--interval-jitter"));
        assert!(refused(&["--watch-label-selector=a=(b"]).contains("--watch-label-selector"));
        assert!(
            refused(&["--watch-configs-label-selector=in in"])
                .contains("--watch-configs-label-selector")
        );
        assert!(refused(&["--log-level=loud"]).contains("--log-level"));
    }

    #[test]
    fn gates_and_spiffe_flags_once_refused_are_accepted() {
        for gate in ["DirectSourceFetch", "CacheSecretsAndConfigMaps"] {
            assert!(
                parse(&[&format!("--feature-gates={gate}=true")])
                    .unwrap()
                    .validate()
                    .is_ok(),
                "{gate} is built"
            );
        }
        let spiffe = parse(&[
            "--authorized-artifact-server-spiffe-id=spiffe://cluster.local/ns/flux-system/sa/source-controller",
            "--authorized-artifact-server-spiffe-id=spiffe://cluster.local/ns/flux-system/sa/source-watcher",
            "--authorized-event-server-spiffe-id=spiffe://cluster.local/ns/flux-system/sa/notification-controller",
            "--spiffe-broker-endpoint=unix:///run/spire/broker.sock",
            "--spiffe-broker-id=spiffe://cluster.local/spire/broker",
        ])
        .unwrap();
        assert_eq!(spiffe.validate(), Ok(()));
        assert_eq!(spiffe.authorized_artifact_server_spiffe_id.len(), 2);
        for (arg, flag) in [
            (
                "--authorized-artifact-server-spiffe-id=source-controller",
                "--authorized-artifact-server-spiffe-id",
            ),
            (
                "--authorized-event-server-spiffe-id=spiffe://X/y",
                "--authorized-event-server-spiffe-id",
            ),
            (
                "--spiffe-broker-endpoint=/run/broker.sock",
                "--spiffe-broker-endpoint",
            ),
            (
                "--spiffe-broker-id=spiffe://x//broker",
                "--spiffe-broker-id",
            ),
        ] {
            let error = parse(&[arg]).unwrap().validate().unwrap_err().to_string();
            assert!(error.contains(flag), "{arg}: {error}");
        }
        // Retired in Flux 2.10: accepted either way, object identity is always on.
        for value in ["true", "false"] {
            let gate = format!("--feature-gates=ObjectLevelWorkloadIdentity={value}");
            assert_eq!(parse(&[gate.as_str()]).unwrap().validate(), Ok(()));
        }
    }

    #[test]
    fn every_argument_list_of_a_flux_system_deployment_is_accepted() {
        let corpus = include_str!("flux_deployment_args.txt");
        let lists: Vec<Vec<&str>> = corpus
            .split("\n\n")
            .map(|list| {
                list.lines()
                    .filter(|line| !line.starts_with('#') && !line.is_empty())
                    .collect()
            })
            .filter(|list: &Vec<&str>| !list.is_empty())
            .collect();
        for args in &lists {
            let flags = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(flags.validate(), Ok(()), "{args:?}");
        }
        assert_eq!(lists.len(), 48);
    }

    #[test]
    fn artifact_cache_sizes_are_bytes_with_binary_suffixes() {
        for (value, bytes) in [
            ("0", 0),
            ("1024", 1024),
            ("64Ki", 64 << 10),
            ("1Gi", 1 << 30),
        ] {
            let flags = parse(&[&format!("--artifact-cache-max-size={value}")]).unwrap();
            assert_eq!(flags.artifact_cache_max_size, bytes, "{value}");
        }
        for value in ["", "1G", "1.5Mi", "-1", "Mi", "99999999999999999999Gi"] {
            assert!(
                parse(&[&format!("--artifact-cache-max-size={value}")]).is_err(),
                "{value:?} is refused"
            );
        }
    }
}
