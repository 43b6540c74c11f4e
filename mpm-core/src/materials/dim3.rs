//! The material models in 3D, compiled from the sources they share with [`super::dim2`].

use crate::dim::d3::{Mat, Vec, DIM};

super::compile_models!();
