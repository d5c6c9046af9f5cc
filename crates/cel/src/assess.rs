//! Which rule judges an object, in the order Flux's status poller consults its readers: Flux's
//! Job reader (registered first), then the `spec.healthCheckExprs` reader, then kstatus' default
//! readers.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::HealthCheckExprs;
use apply::kstatus::{Assessment, compute, compute_flux_job, parse_group, top_level_string};

/// Judges one live object as Flux does: Flux's Job rule for batch/Job first, then a matching
/// healthCheckExprs entry, then kstatus' `compute`. An error from a rule becomes status Unknown with
/// `error` set (as kstatus' generic status reader does).
pub fn assess(object: &Value, exprs: &HealthCheckExprs, now: Timestamp) -> Assessment {
    let group = parse_group(top_level_string(object, "apiVersion")).unwrap_or("");
    let kind = top_level_string(object, "kind");
    if group == "batch" && kind == "Job" {
        return compute_flux_job(object).unwrap_or_else(|e| Assessment::unknown(&e));
    }
    if let Some(verdict) = exprs.evaluate(object) {
        return verdict.unwrap_or_else(|e| Assessment::unknown(&e));
    }
    compute(object, now).unwrap_or_else(|e| Assessment::unknown(&e))
}

/// The apply engine's health wait judges objects as [`assess`] does.
impl apply::wait::Assessor for HealthCheckExprs {
    fn assess(&self, object: &Value, now: Timestamp) -> Assessment {
        assess(object, self, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::check;
    use apply::kstatus::Status;
    use serde_json::json;

    fn verdict(status: Status, message: &str, error: Option<&str>) -> Assessment {
        Assessment {
            status,
            message: message.to_string(),
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn precedence() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        let with_exprs = HealthCheckExprs::new(&[
            check("batch/v1", Some("Job"), "true"),
            check("batch/v1", None, "status.lastScheduleTime != ''"),
            check("apps/v1", Some("Deployment"), "status.readyReplicas >= 1"),
            check("example.com/v1", Some("Widget"), "status.ready"),
            check("v1", Some("ConfigMap"), "data.missing == 'x'"),
        ])
        .unwrap();
        let none = HealthCheckExprs::new(&[]).unwrap();
        let unstarted_job = json!({"apiVersion": "batch/v1", "kind": "Job",
                                   "metadata": {"name": "migrate", "generation": 1},
                                   "spec": {"parallelism": 2}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "web", "generation": 1},
                                "spec": {"replicas": 2},
                                "status": {"observedGeneration": 1, "replicas": 2,
                                           "updatedReplicas": 2, "readyReplicas": 1,
                                           "availableReplicas": 2}});

        let cases: Vec<(&str, &HealthCheckExprs, Value, Assessment)> = vec![
            (
                "Flux's Job rule wins over an expression for batch/Job",
                &with_exprs,
                unstarted_job.clone(),
                verdict(Status::InProgress, "Job not started. active: 0/2", None),
            ),
            (
                "Flux's Job rule, not kstatus' (a started Job is not Current)",
                &none,
                json!({"apiVersion": "batch/v1", "kind": "Job",
                       "status": {"startTime": "2024-05-01T11:00:00Z", "active": 1}}),
                verdict(
                    Status::InProgress,
                    "Job in progress. success:0, active: 1, failed: 0",
                    None,
                ),
            ),
            (
                "Flux's Job rule error is Unknown",
                &with_exprs,
                json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": "x"}}),
                verdict(
                    Status::Unknown,
                    "",
                    Some(
                        "status.conditions is not a list of conditions (it is of the type \
                         string)",
                    ),
                ),
            ),
            (
                "a group-only expression covers the group's other kinds",
                &with_exprs,
                json!({"apiVersion": "batch/v1", "kind": "CronJob",
                       "status": {"lastScheduleTime": "2024-05-01T11:00:00Z"}}),
                verdict(Status::Current, "", None),
            ),
            (
                "an expression overrides kstatus' rule for its kind",
                &with_exprs,
                deployment.clone(),
                verdict(Status::Current, "", None),
            ),
            (
                "kstatus judges what no expression covers",
                &none,
                deployment,
                verdict(Status::InProgress, "Ready: 1/2", None),
            ),
            (
                "an expression's observedGeneration check",
                &with_exprs,
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"generation": 3},
                       "status": {"observedGeneration": 2, "ready": true}}),
                verdict(Status::InProgress, "", None),
            ),
            (
                "an expression ignores deletion, as Flux's reader does",
                &with_exprs,
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"},
                       "status": {"ready": true}}),
                verdict(Status::Current, "", None),
            ),
            (
                "kstatus sees the deletion",
                &none,
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"},
                       "status": {"ready": true}}),
                verdict(Status::Terminating, "Resource scheduled for deletion", None),
            ),
            (
                "an evaluation error is Unknown",
                &with_exprs,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
                verdict(
                    Status::Unknown,
                    "",
                    Some(
                        "failed to evaluate the CEL expression 'data.missing == 'x'': no such \
                         attribute(s): data.missing",
                    ),
                ),
            ),
            (
                "a non-boolean result is Unknown",
                &with_exprs,
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "status": {"ready": "yes"}}),
                verdict(
                    Status::Unknown,
                    "",
                    Some("failed to evaluate CEL expression as boolean: 'status.ready'"),
                ),
            ),
            (
                "a kstatus error is Unknown",
                &none,
                json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Foo"}}),
                verdict(Status::Unknown, "", Some("unknown phase Foo")),
            ),
            (
                "kstatus' Pod rule uses now",
                &none,
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"creationTimestamp": "2024-05-01T11:59:50Z"},
                       "status": {"phase": "Pending", "conditions": [
                           {"type": "PodScheduled", "status": "False",
                            "reason": "Unschedulable"}]}}),
                verdict(Status::InProgress, "Pod has not been scheduled", None),
            ),
            (
                "a custom resource without expressions",
                &none,
                json!({"apiVersion": "example.com/v1", "kind": "Widget",
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                verdict(Status::Current, "Resource is Ready", None),
            ),
        ];
        for (name, exprs, object, want) in cases {
            assert_eq!(assess(&object, exprs, now), want, "{name}");
        }
    }
}
