//! The material models in 3D, compiled from the sources they share with [`super::dim2`].

use crate::dim::d3::{Mat, Vec, DIM};

#[path = "elastic.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod elastic;
#[path = "sand.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod sand;
#[path = "snow.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod snow;
#[path = "water.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod water;

pub use elastic::{fixed_corotated, neo_hookean};
pub use sand::{drucker_prager_alpha, hencky_stress, sand_plasticity};
pub use snow::{snow_hardening, snow_plasticity};
pub use water::water_stress;
