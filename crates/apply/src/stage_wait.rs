//! The wait that ends the first two apply stages, as fluxcd/pkg ssa `ApplyAllStaged` waits:
//! once the CustomResourceDefinitions, Namespaces and ClusterRoles are applied, and again once
//! the `*Class` kinds are, every object of the stage is polled until kstatus finds all of them
//! Current. Flux gives up after 60 s (`WaitTimeout` of its default apply options, which the
//! controller keeps), or as soon as every object is either Current or Failed.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::kstatus::{self, Assessment, Status};
use super::resolve::ResolveError;
use super::{Applier, ApplyError, Change, ObjectId};

/// Why a live object could not be read for its status.
#[derive(Debug, thiserror::Error)]
enum ReadLiveError {
    /// Its kind is not served.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The API server refused the read (its message, or the client's error).
    #[error("{}", super::api_message(.0))]
    Get(#[source] kube::Error),
}

/// How long a stage's objects are waited for (Flux's `DefaultApplyOptions().WaitTimeout`).
pub(super) const STAGE_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the objects are read again. Flux polls every 2 s; reading sooner only shortens
/// the wait for a CRD to be established.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// What one round of assessments decides.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Every object is Current.
    Ready,
    /// Every object is Current or Failed, some Failed: waiting longer cannot help. Holds
    /// the Failed objects as Flux lists them.
    Stalled(Vec<String>),
    /// Some object is on its way.
    Waiting,
}

fn judge(assessed: &[(ObjectId, Assessment)]) -> Verdict {
    if assessed.iter().all(|(_, a)| a.status == Status::Current) {
        return Verdict::Ready;
    }
    let terminal = assessed
        .iter()
        .all(|(_, a)| matches!(a.status, Status::Current | Status::Failed));
    if terminal {
        return Verdict::Stalled(listed(assessed, |a| a.status == Status::Failed));
    }
    Verdict::Waiting
}

/// `Kind/namespace/name status: 'Status'`, with `: error` when the status could not be
/// computed, for each object `keep` selects.
fn listed(assessed: &[(ObjectId, Assessment)], keep: impl Fn(&Assessment) -> bool) -> Vec<String> {
    assessed
        .iter()
        .filter(|(_, a)| keep(a))
        .map(|(id, a)| {
            let mut line = format!("{} status: '{}'", id.describe(), a.status);
            if let Some(error) = &a.error {
                line.push_str(": ");
                line.push_str(error);
            }
            line
        })
        .collect()
}

impl Applier {
    /// Waits until every object of a stage's change set is Current, as Flux does after its
    /// cluster definition and class stages; an object left deleted (drift reported, not
    /// corrected) is not waited for.
    pub(super) async fn wait_for_stage(&self, changes: &[Change]) -> Result<(), ApplyError> {
        let present: Vec<Change> = changes
            .iter()
            .filter(|c| !c.left_deleted())
            .cloned()
            .collect();
        self.wait_for_stage_within(&present, STAGE_WAIT_TIMEOUT)
            .await
    }

    async fn wait_for_stage_within(
        &self,
        changes: &[Change],
        timeout: Duration,
    ) -> Result<(), ApplyError> {
        if changes.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let pending: Vec<_> = changes.iter().map(|c| self.assess_live(&c.id)).collect();
            let assessed: Vec<(ObjectId, Assessment)> = futures::stream::iter(pending)
                .buffered(self.concurrency)
                .collect()
                .await;
            match judge(&assessed) {
                Verdict::Ready => return Ok(()),
                Verdict::Stalled(objects) => return Err(ApplyError::StageStalled { objects }),
                Verdict::Waiting => {}
            }
            if tokio::time::Instant::now() + POLL_INTERVAL > deadline {
                return Err(ApplyError::StageTimeout {
                    objects: listed(&assessed, |a| a.status != Status::Current),
                });
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// kstatus' verdict on the live object; `NotFound` when it does not exist, `Unknown`
    /// with the error when it cannot be read.
    async fn assess_live(&self, id: &ObjectId) -> (ObjectId, Assessment) {
        let assessment = match self.read_live(id).await {
            Ok(Some(live)) => kstatus::compute(&live, Timestamp::now())
                .unwrap_or_else(|e| Assessment::unknown(&e)),
            Ok(None) => Assessment::new(Status::NotFound, "Resource not found"),
            Err(error) => Assessment {
                status: Status::Unknown,
                message: String::new(),
                error: Some(error.to_string()),
            },
        };
        (id.clone(), assessment)
    }

    async fn read_live(&self, id: &ObjectId) -> Result<Option<Value>, ReadLiveError> {
        let resource = self.resolver.resolve(&id.api_version(), &id.kind).await?;
        let namespace = (!id.namespace.is_empty()).then_some(id.namespace.as_str());
        let found = self
            .api(namespace, &resource.api_resource)
            .get_opt(&id.name)
            .await
            .map_err(ReadLiveError::Get)?;
        Ok(found.and_then(|o| serde_json::to_value(o).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assessed(kind: &str, status: Status, error: Option<&str>) -> (ObjectId, Assessment) {
        (
            ObjectId {
                namespace: String::new(),
                name: "x".into(),
                group: String::new(),
                kind: kind.into(),
                version: "v1".into(),
            },
            Assessment {
                status,
                message: String::new(),
                error: error.map(str::to_string),
            },
        )
    }

    #[test]
    fn ready_only_when_every_object_is_current() {
        let current = assessed("Namespace", Status::Current, None);
        assert_eq!(judge(std::slice::from_ref(&current)), Verdict::Ready);
        let pending = assessed("CustomResourceDefinition", Status::InProgress, None);
        assert_eq!(judge(&[current.clone(), pending]), Verdict::Waiting);
        let missing = assessed("ClusterRole", Status::NotFound, None);
        assert_eq!(judge(&[current, missing]), Verdict::Waiting);
    }

    #[test]
    fn current_and_failed_alone_stop_the_wait_early() {
        let set = [
            assessed("Namespace", Status::Current, None),
            assessed("CustomResourceDefinition", Status::Failed, None),
        ];
        let Verdict::Stalled(objects) = judge(&set) else {
            panic!("a Failed object among Current ones ends the wait");
        };
        let error = ApplyError::StageStalled { objects };
        assert_eq!(
            error.to_string(),
            "failed early due to stalled resources: [CustomResourceDefinition/x status: 'Failed']"
        );
    }

    #[test]
    fn a_timeout_lists_every_object_not_current_with_its_error() {
        let set = [
            assessed("Namespace", Status::Current, None),
            assessed("CustomResourceDefinition", Status::InProgress, None),
            assessed("StorageClass", Status::Unknown, Some("forbidden")),
        ];
        let error = ApplyError::StageTimeout {
            objects: listed(&set, |a| a.status != Status::Current),
        };
        assert_eq!(
            error.to_string(),
            "timeout waiting for: [CustomResourceDefinition/x status: 'InProgress', \
             StorageClass/x status: 'Unknown': forbidden]"
        );
    }
}
