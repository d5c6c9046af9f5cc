//! The command-line flags of Flux's kustomize-controller, with the same names and defaults.
//!
//! Every flag of Flux's Deployment is accepted. A flag whose behaviour this controller does
//! not have yet is refused at start-up by [`ControllerFlags::validate`], naming the flag,
//! rather than silently ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::{ArgAction, Args, ValueEnum};

use crate::api::duration;

/// Log output format (`--log-encoding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogEncoding {
    /// One JSON object per line, as Flux logs.
    Json,
    /// Human-readable text.
    Console,
}

/// Flags of the controller process, named and defaulted as in Flux.
#[derive(Args, Clone, Debug)]
pub struct ControllerFlags {
    /// Watch Kustomizations in all namespaces; if false, only in the runtime namespace.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub watch_all_namespaces: bool,

    /// Watch only Kustomizations (and sources) matching this label selector.
    #[arg(long, default_value = "")]
    pub watch_label_selector: String,

    /// Log verbosity: debug, info or error (trace also accepted).
    #[arg(long, default_value = "info")]
    pub log_level: String,

    /// Log encoding: json or console.
    #[arg(long, value_enum, default_value = "json")]
    pub log_encoding: LogEncoding,

    /// Elect a leader with a Lease before reconciling, so that replicas do not compete.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub enable_leader_election: bool,

    /// How long a leader's lease is valid.
    #[arg(long, default_value = "35s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,

    /// How long the leader keeps trying to renew before giving up leadership.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: Duration,

    /// How often candidates retry to acquire or renew the lease.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
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
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,

    /// Number of objects applied concurrently within one Kustomization.
    #[arg(long, default_value_t = 4)]
    pub concurrent_ssa: u16,

    /// How long to wait before re-checking a Kustomization's dependencies.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub requeue_dependency: Duration,

    /// Deny references to sources (and other objects) in other namespaces.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub no_cross_namespace_refs: bool,

    /// Refuse kustomize remote bases; only files inside the artifact are read.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
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
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub insecure_kubeconfig_exec: bool,

    /// Allow kubeconfigs provided for remote apply to disable TLS verification.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
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
    #[arg(long, default_value_t = 100)]
    pub token_cache_max_size: usize,

    /// The longest a token is cached (at most one hour).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub token_cache_max_duration: Duration,

    /// Retries of an artifact download.
    #[arg(long, default_value_t = 9)]
    pub http_retry: u32,

    /// Client-side request rate to the Kubernetes API.
    #[arg(long, default_value_t = 50.0)]
    pub kube_api_qps: f32,

    /// Client-side request burst to the Kubernetes API.
    #[arg(long, default_value_t = 300)]
    pub kube_api_burst: u32,

    /// Smallest delay before retrying a reconcile that returned an error.
    #[arg(long, default_value = "750ms", value_parser = parse_duration)]
    pub min_retry_delay: Duration,

    /// Largest delay before retrying a reconcile that returned an error.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    pub max_retry_delay: Duration,

    /// Jitter applied to `spec.interval`, in percent.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(0..100))]
    pub interval_jitter_percentage: u8,

    /// Field manager disallowed to perform changes on managed resources: its fields are
    /// taken over after the dry-run (repeatable; matched as a name prefix, as Flux does).
    #[arg(long)]
    pub override_manager: Vec<String>,

    /// Field manager whose fields are taken over before the dry-run, to recover objects a
    /// stale co-owner keeps from validating (repeatable; exact name). Remove it once the
    /// objects have recovered.
    #[arg(long)]
    pub override_manager_before_dry_run: Vec<String>,

    /// Kinds applied in their own stage, after Class kinds and before everything else.
    #[arg(long, value_delimiter = ',')]
    pub custom_apply_stage_kinds: Vec<String>,

    /// Feature gates, `Name=true|false` pairs separated by commas.
    #[arg(long, default_value = "", value_parser = FeatureGates::parse)]
    pub feature_gates: FeatureGates,
}

/// A flag given a value this controller cannot honour yet.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("flag --{flag} is not supported by this controller yet: {why}")]
pub struct UnsupportedFlag {
    /// The flag's name, without dashes.
    pub flag: &'static str,
    /// What is missing.
    pub why: &'static str,
}

impl ControllerFlags {
    /// Refuses flags whose behaviour is not built, so that nothing is silently ignored.
    pub fn validate(&self) -> Result<(), UnsupportedFlag> {
        let refuse = |flag, why| Err(UnsupportedFlag { flag, why });
        if let Some(gate) = self.feature_gates.enabled_unsupported().next() {
            return refuse("feature-gates", gate);
        }
        Ok(())
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    duration::parse(text).map_err(|e| e.to_string())
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

/// Gates whose non-default value asks for behaviour this controller does not have yet.
const UNSUPPORTED_WHEN_CHANGED: [(&str, &str); 2] = [
    (
        "DirectSourceFetch",
        "feature gate DirectSourceFetch (reading sources without a cache)",
    ),
    (
        "CacheSecretsAndConfigMaps",
        "feature gate CacheSecretsAndConfigMaps",
    ),
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
    /// Parses `Name=true,Other=false`; an unknown gate or a value other than a boolean is an
    /// error naming it.
    pub fn parse(text: &str) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("feature gate {pair:?} must be Name=true or Name=false"))?;
            let value = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(format!("feature gate {name:?} has invalid value {value:?}")),
            };
            let known = FEATURE_GATE_DEFAULTS
                .iter()
                .find(|(known, _)| *known == name.trim())
                .ok_or_else(|| format!("unknown feature gate {name:?}"))?;
            gates.0.insert(known.0, value);
        }
        Ok(gates)
    }

    /// Whether the named gate is on.
    pub fn enabled(&self, name: &str) -> bool {
        self.0.get(name).copied().unwrap_or(false)
    }

    fn enabled_unsupported(&self) -> impl Iterator<Item = &'static str> + '_ {
        UNSUPPORTED_WHEN_CHANGED.iter().filter_map(|(name, why)| {
            let default = FEATURE_GATE_DEFAULTS
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, d)| *d);
            (Some(self.enabled(name)) != default).then_some(*why)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: ControllerFlags,
    }

    fn parse(args: &[&str]) -> Result<ControllerFlags, clap::Error> {
        let mut argv = vec!["kustomize-controller"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|cli| cli.flags)
    }

    #[test]
    fn defaults_match_flux() {
        let flags = parse(&[]).unwrap();
        assert!(flags.watch_all_namespaces);
        assert_eq!(flags.concurrent, 4);
        assert_eq!(flags.http_retry, 9);
        assert_eq!(flags.requeue_dependency, Duration::from_secs(30));
        assert_eq!(flags.min_retry_delay, Duration::from_millis(750));
        assert_eq!(flags.max_retry_delay, Duration::from_secs(900));
        assert_eq!(
            flags.leader_election_lease_duration,
            Duration::from_secs(35)
        );
        assert_eq!(flags.metrics_addr, ":8080");
        assert_eq!(flags.health_addr, ":9440");
        assert_eq!(flags.log_encoding, LogEncoding::Json);
        assert!(flags.feature_gates.enabled("StrictPostBuildSubstitutions"));
        assert!(!flags.feature_gates.enabled("ExternalArtifact"));
        assert_eq!(flags.validate(), Ok(()));
    }

    #[test]
    fn accepts_the_flux_deployment_arguments() {
        let flags = parse(&[
            "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
            "--watch-all-namespaces=true",
            "--log-level=info",
            "--log-encoding=json",
            "--enable-leader-election",
        ])
        .unwrap();
        assert!(flags.enable_leader_election);
        assert_eq!(flags.validate(), Ok(()));
    }

    #[test]
    fn go_style_booleans() {
        assert!(
            !parse(&["--watch-all-namespaces=false"])
                .unwrap()
                .watch_all_namespaces
        );
        assert!(
            parse(&["--no-cross-namespace-refs"])
                .unwrap()
                .no_cross_namespace_refs
        );
    }

    #[test]
    fn feature_gates_are_checked() {
        let flags =
            parse(&["--feature-gates=ExternalArtifact=true,StrictPostBuildSubstitutions=false"])
                .unwrap();
        assert!(flags.feature_gates.enabled("ExternalArtifact"));
        assert!(!flags.feature_gates.enabled("StrictPostBuildSubstitutions"));
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).is_err());
        assert!(parse(&["--feature-gates=ExternalArtifact=maybe"]).is_err());
    }

    #[test]
    fn unbuilt_behaviour_is_refused_by_name() {
        let flags = parse(&[
            "--default-decryption-service-account=deployer",
            "--sops-vault-configmap=vault-instances",
        ])
        .unwrap();
        assert!(flags.validate().is_ok());
        assert_eq!(flags.sops_vault_configmap, "vault-instances");
        assert_eq!(flags.token_cache_max_size, 100);
        assert_eq!(flags.token_cache_max_duration, Duration::from_secs(3600));
        let flags = parse(&["--token-cache-max-size=0", "--token-cache-max-duration=10m"]).unwrap();
        assert_eq!(flags.token_cache_max_size, 0);
        assert_eq!(flags.token_cache_max_duration, Duration::from_secs(600));
        // Retired in Flux 2.10: accepted either way, object identity is always on.
        for value in ["true", "false"] {
            let gate = format!("--feature-gates=ObjectLevelWorkloadIdentity={value}");
            assert!(parse(&[gate.as_str()]).unwrap().validate().is_ok());
        }
        let flags = parse(&[
            "--default-service-account=deployer",
            "--default-kubeconfig-service-account=spoke",
            "--insecure-kubeconfig-exec",
            "--insecure-kubeconfig-tls=true",
        ])
        .unwrap();
        assert!(flags.validate().is_ok());
        assert!(flags.insecure_kubeconfig_exec && flags.insecure_kubeconfig_tls);
        let flags = parse(&[
            "--override-manager=kubectl-edit",
            "--override-manager=a,b",
            "--override-manager-before-dry-run=legacy",
        ])
        .unwrap();
        assert!(flags.validate().is_ok());
        assert_eq!(flags.override_manager, ["kubectl-edit", "a,b"]);
        assert_eq!(flags.override_manager_before_dry_run, ["legacy"]);
        assert!(
            parse(&["--sops-age-secret=age-keys"])
                .unwrap()
                .validate()
                .is_ok()
        );
        let flags = parse(&["--requeue-dependency=10s"]).unwrap();
        assert!(flags.validate().is_ok());
        assert_eq!(flags.requeue_dependency, Duration::from_secs(10));
        let flags = parse(&[
            "--feature-gates=DisableCommitStatusEvent=true,AdditiveCELDependencyCheck=true",
        ])
        .unwrap();
        assert!(flags.validate().is_ok());
        let flags = parse(&["--feature-gates=GroupChangeLog=true,MigrateAPIVersion=true"]).unwrap();
        assert!(flags.validate().is_ok());
        let flags = parse(&["--feature-gates=DirectSourceFetch=true"]).unwrap();
        assert_eq!(flags.validate().unwrap_err().flag, "feature-gates");
    }

    #[test]
    fn bad_durations_are_rejected() {
        assert!(parse(&["--requeue-dependency=soon"]).is_err());
    }
}
