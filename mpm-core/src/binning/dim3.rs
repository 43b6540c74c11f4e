//! The binning kernels in 3D: `by_block.rs` compiled with the 3D types.

use crate::dim::d3::{Vec, DIM};

#[path = "by_block.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod by_block;
pub use by_block::*;
