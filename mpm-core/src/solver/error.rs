//! The solver's errors: its own (bad parameters, divergence) above the runtime's.

/// What can go wrong while setting up or stepping a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SolverError {
    /// Creating fields or running kernels failed (no device, out of memory, ...).
    #[error(transparent)]
    Runtime(#[from] crate::Error),
    /// A setting, material, region, collider or emitter out of its range; the message names
    /// it.
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A particle's state became non-finite or it moved too far in one substep.
    #[error(
        "the simulation diverged at substep {step}: particle {particle} ({material}) {reason}"
    )]
    Diverged {
        step: u64,
        particle: u32,
        /// The material's model (a program may add the name its scene gave it).
        material: String,
        material_id: crate::solver::MaterialId,
        reason: String,
    },
}

pub type Result<T, E = SolverError> = std::result::Result<T, E>;
