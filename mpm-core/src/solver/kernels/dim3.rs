//! The solver's kernels in 3D: what differs from 2D, and `mls_mpm.rs` compiled with it.

use glam::{Mat3, Vec4};

use super::bspline_weights;
use crate::dim::d3::{IVec, Mat, Vec, D, DIM};
use crate::func;
use crate::materials::dim3 as materials;

/// Stencil loop depths (the third axis): as deep as the spline's support.
pub const QUADRATIC_DEPTH: i32 = 3;
pub const CUBIC_DEPTH: i32 = 4;
/// Corners of a box.
pub const CORNERS: i32 = 8;

#[path = "mls_mpm.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod mls_mpm;
pub use mls_mpm::*;

/// The particle-relative node offsets `(i, k, l)` of a stencil as a grid offset.
#[func]
pub fn offset(i: i32, k: i32, l: i32) -> IVec {
    ivec3(i, k, l)
}

/// The first components of a table row.
#[func]
pub fn row(r: Vec4) -> Vec {
    vec3(r.x, r.y, r.z)
}

/// The rotation whose columns are the first components of three table rows.
#[func]
pub fn frame(c0: Vec4, c1: Vec4, c2: Vec4) -> Mat {
    Mat3::from_cols(row(c0), row(c1), row(c2))
}

/// The velocity `omega x r` of a point `r` from the centre of a body spinning at `omega`.
#[func]
pub fn spin(omega: Vec4, r: Vec) -> Vec {
    cross(row(omega), r)
}

/// A node's index as a position in cells.
#[func]
pub fn to_vec(cell: IVec) -> Vec {
    cell.as_vec3()
}

/// The stencil of a particle at `xp` (in cells): its base node, its offset from that node,
/// and its weights along each axis (`w[0][n]`: node `n` along x).
#[func]
// Always inlined: the support is then a constant (the cubic weights' branch goes) and the
// weights stay in registers; as a call, it took a twentieth of mpm3d's CPU samples.
#[inline(always)]
pub fn stencil(xp: Vec, support: i32) -> (IVec, Vec, [Vec4; 3]) {
    let shift = select(support == 3, 0.5, 1.0);
    let base = floor(xp - Vec::splat(shift)).as_ivec3();
    let fx = xp - base.as_vec3();
    (
        base,
        fx,
        [
            bspline_weights(fx.x, support),
            bspline_weights(fx.y, support),
            bspline_weights(fx.z, support),
        ],
    )
}

/// Node `i` of the grid's planes across x from plane `first` on, z fastest (the nodes two
/// ranks share, see `halo_pack`).
#[func]
pub fn plane_cell(i: i32, first: i32, res: IVec) -> IVec {
    let plane = res.y * res.z;
    ivec3(first + i / plane, (i / res.z) % res.y, i % res.z)
}
