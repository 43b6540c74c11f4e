//! Backend-agnostic core of the mpm engine: element types, the kernel IR and its tracer,
//! fields, the `Backend` trait and the host views used by the CPU lowering.

extern crate self as mpm_core;

pub mod abi;
pub mod backend;
pub mod binning;
pub mod bins;
pub mod builtins;
pub mod dim;
pub mod error;
pub mod field;
pub mod hash;
pub mod host;
pub mod ir;
pub mod kernel;
pub mod lang;
pub mod layout;
pub mod linalg;
pub mod materials;
pub mod rng;
pub mod scatter;
pub mod snapshot;
pub mod solver;
pub mod sparse;
pub mod trace;
pub mod types;

pub use backend::{batched, Backend, BackendKind, BackendRef, KernelDesc};
pub use error::{Error, Result};
pub use field::{Field, Memory, Tree};
pub use glam;
pub use kernel::only_loops;
pub use layout::Layout;
pub use mpm_macros::{func, kernel};
pub use types::{Elem, Value};
