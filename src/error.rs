//! The errors of programs built on the engine: each layer's own, and bad command-line values.

use mpm_core::solver::SolverError;

use crate::mesh::MeshError;
use crate::scene_file::SceneError;

/// What the `mpm` program, the demos and the examples can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Fields and kernels: no device, out of memory, a failed launch, ...
    #[error(transparent)]
    Runtime(#[from] mpm_core::Error),
    /// The solver: a parameter out of range, a diverged simulation.
    #[error(transparent)]
    Solver(#[from] SolverError),
    #[error(transparent)]
    Scene(#[from] SceneError),
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// A value given on the command line or in the environment that is not one of the choices.
    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
