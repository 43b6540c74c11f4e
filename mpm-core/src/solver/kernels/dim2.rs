//! The solver's kernels in 2D: what differs from 3D, and `mls_mpm.rs` compiled with it.

use glam::{Mat2, Vec4};

use super::bspline_weights;
use crate::dim::d2::{IVec, Mat, Vec, D, DIM};
use crate::func;
use crate::materials::dim2 as materials;

/// Stencil loop depths (the third axis): 2D runs the innermost loop once.
pub const QUADRATIC_DEPTH: i32 = 1;
pub const CUBIC_DEPTH: i32 = 1;
/// Corners of a box.
pub const CORNERS: i32 = 4;

#[path = "mls_mpm.rs"]
#[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
mod mls_mpm;
pub use mls_mpm::*;

/// The particle-relative node offsets `(i, k, l)` of a stencil as a grid offset.
#[func]
pub fn offset(i: i32, k: i32, _l: i32) -> IVec {
    ivec2(i, k)
}

/// The first components of a table row.
#[func]
pub fn row(r: Vec4) -> Vec {
    vec2(r.x, r.y)
}

/// The rotation whose columns are the first components of three table rows (in 2D the
/// upper left block: a rotation about z).
#[func]
pub fn frame(c0: Vec4, c1: Vec4, _c2: Vec4) -> Mat {
    Mat2::from_cols(vec2(c0.x, c0.y), vec2(c1.x, c1.y))
}

/// The velocity `omega x r` of a point `r` from the centre of a body spinning at `omega`
/// (in 2D about z: `omega.z`).
#[func]
pub fn spin(omega: Vec4, r: Vec) -> Vec {
    omega.z * vec2(-r.y, r.x)
}

/// A node's index as a position in cells.
#[func]
pub fn to_vec(cell: IVec) -> Vec {
    cell.as_vec2()
}

/// The stencil of a particle at `xp` (in cells): its base node, its offset from that node,
/// and its weights along each axis (`w[0][n]`: node `n` along x; in 2D `w[2]` is `(1, 0, 0, 0)`).
#[func]
// Always inlined: the support is then a constant (the cubic weights' branch goes) and the
// weights stay in registers; as a call, it took a twentieth of mpm3d's CPU samples.
#[inline(always)]
pub fn stencil(xp: Vec, support: i32) -> (IVec, Vec, [Vec4; 3]) {
    let shift = select(support == 3, 0.5, 1.0);
    let base = floor(xp - Vec::splat(shift)).as_ivec2();
    let fx = xp - base.as_vec2();
    (
        base,
        fx,
        [
            bspline_weights(fx.x, support),
            bspline_weights(fx.y, support),
            vec4(1.0, 0.0, 0.0, 0.0),
        ],
    )
}

/// Node `i` of the grid's planes across x from plane `first` on, y fastest (the nodes two
/// ranks share, see `halo_pack`).
#[func]
pub fn plane_cell(i: i32, first: i32, res: IVec) -> IVec {
    ivec2(first + i / res.y, i % res.y)
}
