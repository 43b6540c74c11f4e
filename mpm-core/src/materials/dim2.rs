//! The material models in 2D, compiled from the sources they share with [`super::dim3`].

use glam::Vec4;

use crate::dim::d2::{Mat, Vec, DIM, INV_DIM};

super::material_table!(super::compile_models);
