//! The material models in 3D, compiled from the sources they share with [`super::dim2`].

#[allow(unused_imports)]
use crate::dim::d3::{IVec, Mat, Vec, DIM};

#[path = "elastic.rs"]
mod elastic;
#[path = "sand.rs"]
mod sand;
#[path = "snow.rs"]
mod snow;
#[path = "water.rs"]
mod water;

pub use elastic::{fixed_corotated, neo_hookean};
pub use sand::{drucker_prager_alpha, hencky_stress, sand_plasticity};
pub use snow::{snow_hardening, snow_plasticity};
pub use water::water_stress;
