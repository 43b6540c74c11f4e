//! The material models in 2D, compiled from the sources they share with [`super::dim3`].

use crate::dim::d2::{Mat, Vec, DIM};

super::compile_models!();
