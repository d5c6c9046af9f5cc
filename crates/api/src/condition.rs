//! `metav1.Condition`, with the schema validation Kubernetes gives it, and the operations the
//! controller needs on a list of conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status of a condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It is not known whether the condition holds.
    Unknown,
}

/// Condition contains details for one aspect of the current state of this API Resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// lastTransitionTime is the last time the condition transitioned from one status to
    /// another. This should be when the underlying condition changed. If that is not known,
    /// then using the time when the API field changed is acceptable.
    pub last_transition_time: Time,
    /// message is a human readable message indicating details about the transition. This
    /// may be an empty string.
    #[schemars(length(max = 32768))]
    pub message: String,
    /// observedGeneration represents the .metadata.generation that the condition was set
    /// based upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// reason contains a programmatic identifier indicating the reason for the condition's
    /// last transition.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// status of the condition, one of True, False, Unknown.
    pub status: ConditionStatus,
    /// type of condition in CamelCase or in foo.example.com/CamelCase.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
}

/// The largest message a condition may carry (the CRD's `maxLength`).
const MAX_MESSAGE_LEN: usize = 32768;

/// Sets a condition in `conditions` the way Flux's `conditions.Set` does: the transition
/// time (whole seconds) moves when the status, reason or message changes, and the list is kept
/// in Flux's order - Stalled, Reconciling, Ready, then the others by newest generation and
/// type - so that `kubectl` shows the same as with Flux.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let message = truncate_message(message);
    let now =
        || Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::now()));
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            if existing.status != status || existing.reason != reason || existing.message != message
            {
                existing.last_transition_time = now();
            }
            existing.status = status;
            existing.reason = reason.to_string();
            existing.message = message;
            existing.observed_generation = generation;
        }
        None => conditions.push(Condition {
            last_transition_time: now(),
            message,
            observed_generation: generation,
            reason: reason.to_string(),
            status,
            type_: type_.to_string(),
        }),
    }
    conditions.sort_by(|a, b| {
        let weight = |c: &Condition| match c.type_.as_str() {
            "Stalled" => 0,
            "Reconciling" => 1,
            "Ready" => 2,
            _ => 3,
        };
        weight(a)
            .cmp(&weight(b))
            .then_with(|| b.observed_generation.cmp(&a.observed_generation))
            .then_with(|| a.type_.cmp(&b.type_))
    });
}

/// Removes the condition of the given type, if present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) {
    conditions.retain(|c| c.type_ != type_);
}

/// Finds the condition of the given type.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn truncate_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_LEN {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE_LEN - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_when_the_state_changes() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "A",
            "a",
            Some(1),
        );
        let first = conditions[0].last_transition_time.clone();
        conditions[0].last_transition_time = Time(Timestamp::UNIX_EPOCH);
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "A",
            "a",
            Some(2),
        );
        assert_eq!(
            conditions[0].last_transition_time,
            Time(Timestamp::UNIX_EPOCH),
            "a new generation alone keeps the transition time"
        );
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "B",
            "b",
            Some(2),
        );
        assert!(conditions[0].last_transition_time >= first);
        assert_eq!(conditions[0].reason, "B");
        assert_eq!(conditions[0].observed_generation, Some(2));
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "C",
            "c",
            Some(2),
        );
        assert!(conditions[0].last_transition_time >= first);
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn conditions_are_kept_in_flux_order() {
        let mut conditions = Vec::new();
        for type_ in ["Healthy", "Ready", "Reconciling", "Stalled"] {
            set_condition(
                &mut conditions,
                type_,
                ConditionStatus::True,
                "R",
                "m",
                Some(1),
            );
        }
        let order: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(order, ["Stalled", "Reconciling", "Ready", "Healthy"]);
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let mut conditions = Vec::new();
        let long = "é".repeat(MAX_MESSAGE_LEN);
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::False,
            "A",
            &long,
            None,
        );
        assert!(conditions[0].message.len() <= MAX_MESSAGE_LEN);
        assert!(conditions[0].message.ends_with("..."));
    }

    #[test]
    fn remove_and_find() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            "Ready",
            ConditionStatus::True,
            "A",
            "a",
            None,
        );
        set_condition(
            &mut conditions,
            "Reconciling",
            ConditionStatus::True,
            "P",
            "p",
            None,
        );
        remove_condition(&mut conditions, "Reconciling");
        assert!(find_condition(&conditions, "Reconciling").is_none());
        assert_eq!(
            find_condition(&conditions, "Ready").map(|c| c.status),
            Some(ConditionStatus::True)
        );
    }
}
