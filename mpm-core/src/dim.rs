//! The two worlds that code written once for 2D and 3D is compiled in.
//!
//! Kernels and funcs cannot be generic, so a dimension-independent source names the
//! dimension's glam types `Vec`, `Mat`, `IVec` and its dimension `DIM` (`D` in a field's type), and is compiled twice,
//! as a module of an instantiation that imports them from [`d2`] or [`d3`] (the way rapier
//! builds dim2 and dim3 from one source). `materials::dim2` / `materials::dim3` and
//! `solver::kernels::dim2` / `dim3` are such instantiations.

/// Two dimensions.
pub mod d2 {
    pub use glam::{IVec2 as IVec, Mat2 as Mat, Vec2 as Vec};
    /// The dimension, for arithmetic in kernels.
    pub const DIM: i32 = 2;
    /// The dimension as a const generic argument (`Field<Vec, D>`).
    pub const D: usize = 2;
    /// `1 / DIM`, rounded once (by Rust, not by the device).
    pub const INV_DIM: f32 = 0.5;
}

/// Three dimensions.
pub mod d3 {
    pub use glam::{IVec3 as IVec, Mat3 as Mat, Vec3 as Vec};
    /// The dimension, for arithmetic in kernels.
    pub const DIM: i32 = 3;
    /// The dimension as a const generic argument (`Field<Vec, D>`).
    pub const D: usize = 3;
    /// `1 / DIM`, rounded once (by Rust, not by the device).
    pub const INV_DIM: f32 = 1.0 / 3.0;
}
