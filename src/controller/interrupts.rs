//! Cancelling a running health check when a new reconcile of the same Kustomization is
//! requested (Flux's `CancelHealthCheckOnNewRevision` feature gate).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::oneshot;

use crate::api::Kustomization;

/// The Kustomizations whose health checks may be interrupted right now.
#[derive(Default)]
pub struct Interrupts {
    enabled: bool,
    waiting: Mutex<HashMap<ObjectRef<Kustomization>, oneshot::Sender<String>>>,
}

/// A registration; dropping it ends the interest.
pub struct Interruptible<'a> {
    interrupts: &'a Interrupts,
    object: ObjectRef<Kustomization>,
    receiver: Option<oneshot::Receiver<String>>,
}

impl Interrupts {
    /// Interrupts that fire only when `enabled` (the feature gate).
    pub fn new(enabled: bool) -> Self {
        Interrupts {
            enabled,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Registers `object` as interruptible until the returned value is dropped.
    pub fn register(&self, object: ObjectRef<Kustomization>) -> Interruptible<'_> {
        let receiver = self.enabled.then(|| {
            let (sender, receiver) = oneshot::channel();
            if let Ok(mut waiting) = self.waiting.lock() {
                waiting.insert(object.clone(), sender);
            }
            receiver
        });
        Interruptible {
            interrupts: self,
            object,
            receiver,
        }
    }

    /// A new reconcile of `object` was requested by `trigger` (`Kind/namespace/name`).
    pub fn interrupt(&self, object: &ObjectRef<Kustomization>, trigger: &str) {
        if !self.enabled {
            return;
        }
        let sender = self.waiting.lock().ok().and_then(|mut w| w.remove(object));
        if let Some(sender) = sender {
            let _ = sender.send(trigger.to_string());
        }
    }
}

impl Interruptible<'_> {
    /// Resolves with the trigger when interrupted; never, when the gate is off.
    pub async fn interrupted(&mut self) -> String {
        match self.receiver.as_mut() {
            Some(receiver) => match receiver.await {
                Ok(trigger) => trigger,
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }
}

impl Drop for Interruptible<'_> {
    fn drop(&mut self) {
        if self.receiver.is_some()
            && let Ok(mut waiting) = self.interrupts.waiting.lock()
        {
            waiting.remove(&self.object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> ObjectRef<Kustomization> {
        ObjectRef::new("apps").within("flux-system")
    }

    #[tokio::test]
    async fn an_interrupt_reaches_the_registered_wait() {
        let interrupts = Interrupts::new(true);
        let mut registration = interrupts.register(object());
        interrupts.interrupt(&object(), "GitRepository/flux-system/repo");
        assert_eq!(
            registration.interrupted().await,
            "GitRepository/flux-system/repo"
        );
    }

    #[tokio::test]
    async fn nothing_is_interrupted_when_the_gate_is_off() {
        let interrupts = Interrupts::new(false);
        let mut registration = interrupts.register(object());
        interrupts.interrupt(&object(), "GitRepository/flux-system/repo");
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            registration.interrupted(),
        )
        .await;
        assert!(waited.is_err());
    }

    #[test]
    fn a_dropped_registration_is_forgotten() {
        let interrupts = Interrupts::new(true);
        drop(interrupts.register(object()));
        assert!(interrupts.waiting.lock().unwrap().is_empty());
    }
}
