//! The binning kernels in 2D: `by_block.rs` compiled with the 2D types.

use crate::dim::d2::{Vec, DIM};

#[path = "by_block.rs"]
mod by_block;
pub use by_block::*;
