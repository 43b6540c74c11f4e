//! Strain measures the models share, in forms that keep f32's precision near the identity.

use super::{Mat, DIM, INV_DIM};
use crate::func;

/// `det(I + h) - 1`, the volume change of a displacement gradient `h = F - I`, from
/// `h`'s invariants: `tr h + det h` in 2D, plus the sum of the principal 2x2 minors,
/// `(tr(h)^2 - tr(h h)) / 2`, in 3D. Forming `det(F) - 1` instead would round changes
/// below f32's 6e-8 at 1 away.
#[func]
pub fn volume_change(h: Mat) -> f32 {
    let t = trace(h);
    let is_3d = DIM as f32 - 2.0;
    t + is_3d * 0.5 * (t * t - trace(h * h)) + determinant(h)
}

/// `J^(1/d) - 1` for `J = 1 + dj`, without cancellation: `(r - 1)(1 + r [+ r^2]) = dj`.
#[func]
pub fn root_change(dj: f32) -> f32 {
    let r = pow(max(1.0 + dj, 0.0), INV_DIM);
    let is_3d = DIM as f32 - 2.0;
    dj / (1.0 + r + is_3d * r * r)
}
