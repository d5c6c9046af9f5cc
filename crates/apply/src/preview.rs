//! What applying a build would change, without changing anything: each object is read and
//! dry-run as the apply stage would, and the objects the prune stage would delete are
//! listed. The `diff` command shows these.

use serde_json::Value;

use super::Object;
use super::drift::Drift;
use super::{Applier, ApplyError, ObjectId, plan, sort_for_apply};

/// What applying one object would do.
#[derive(Debug, Clone, PartialEq)]
pub enum Preview {
    /// It does not exist: it would be created as `desired`.
    Create {
        /// The object.
        id: ObjectId,
        /// What the dry-run returned (or the configuration, when its namespace is new).
        desired: Value,
    },
    /// It exists and drifted from the build: `live` would become `desired`.
    Configure {
        /// The object.
        id: ObjectId,
        /// The object as it is.
        live: Box<Value>,
        /// The object as the dry-run of the build's configuration returned it.
        desired: Box<Value>,
        /// The fields the apply would change, and the managers that wrote them.
        drift: Drift,
    },
    /// It left the build and would be pruned.
    Delete {
        /// The object.
        id: ObjectId,
        /// The object as it is.
        live: Box<Value>,
    },
}

impl Preview {
    /// The object this is about.
    pub fn id(&self) -> &ObjectId {
        match self {
            Preview::Create { id, .. }
            | Preview::Configure { id, .. }
            | Preview::Delete { id, .. } => id,
        }
    }
}

impl Applier {
    /// Every change applying `objects` would make, in apply order, then the objects of
    /// `inventory` (the Kustomization's last one) that the build dropped and a prune would
    /// delete. Unchanged and skipped objects are left out. Nothing is written.
    pub async fn preview(
        &self,
        mut objects: Vec<Object>,
        inventory: &[ObjectId],
    ) -> Result<Vec<Preview>, ApplyError> {
        sort_for_apply(&mut objects, &self.options.custom_stage_kinds);
        // Namespaces the build creates: their objects cannot be dry-run before they exist.
        let created_namespaces: Vec<String> = objects
            .iter()
            .filter(|o| o.kind() == "Namespace" && o.group().is_empty())
            .map(|o| o.name().to_string())
            .collect();
        let mut previews = Vec::new();
        let mut built = Vec::new();
        for object in &objects {
            let target = self.target(object).await?;
            built.push(target.id.clone());
            if let Some(preview) = self.preview_one(target, &created_namespaces).await? {
                previews.push(preview);
            }
        }
        let built: std::collections::HashSet<String> =
            built.iter().map(ObjectId::inventory_id).collect();
        for id in inventory
            .iter()
            .filter(|id| !built.contains(&id.inventory_id()))
        {
            if let Some((_, live, true)) = self.prune_candidate(id).await? {
                let live = serde_json::to_value(live).unwrap_or_default();
                previews.push(Preview::Delete {
                    id: id.clone(),
                    live: Box::new(live),
                });
            }
        }
        Ok(previews)
    }

    async fn preview_one(
        &self,
        target: plan::Target,
        created_namespaces: &[String],
    ) -> Result<Option<Preview>, ApplyError> {
        let object = target.id.describe();
        let live = target
            .api
            .get_opt(&target.name)
            .await
            .map_err(|source| ApplyError::DryRun {
                object: object.clone(),
                source,
            })?
            .and_then(|o| serde_json::to_value(o).ok());
        if plan::skipped(&target.configuration, live.as_ref()) {
            return Ok(None);
        }
        let dry_run = match self.dry_run(&target).await {
            Ok(dry_run) => dry_run,
            Err(kube::Error::Api(status))
                if status.code == 404
                    && live.is_none()
                    && created_namespaces.contains(&target.id.namespace) =>
            {
                return Ok(Some(Preview::Create {
                    id: target.id,
                    desired: target.configuration,
                }));
            }
            Err(source) => return Err(ApplyError::DryRun { object, source }),
        };
        let Some(live) = live else {
            return Ok(Some(Preview::Create {
                id: target.id,
                desired: dry_run,
            }));
        };
        let drift = self
            .drift_between(&target.configuration, &live, &dry_run)
            .map_err(|source| ApplyError::Ignore { object, source })?;
        Ok((!drift.is_empty()).then(|| Preview::Configure {
            id: target.id,
            live: Box::new(live),
            desired: Box::new(dry_run),
            drift,
        }))
    }
}
