//! The material models in 3D, compiled from the sources they share with [`super::dim2`].

use glam::Vec4;

use crate::dim::d3::{Mat, Vec, DIM, INV_DIM};

super::material_table!(super::compile_models);
