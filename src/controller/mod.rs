//! The reconcile loop.

use crate::flags::ControllerFlags;

/// Error that stops the controller process.
#[derive(Debug, thiserror::Error)]
pub enum RunError {}

/// Runs the controller until it is told to stop.
pub async fn run(_flags: ControllerFlags) -> Result<(), RunError> {
    Ok(())
}
