//! Strain measures the models share, in forms that keep f32's precision near the identity.

use super::{Mat, Vec, DIM, INV_DIM};
use crate::func;

/// `det(I + h) - 1`, the volume change of a displacement gradient `h = F - I`, from
/// `h`'s invariants: `tr h + det h` in 2D, plus the sum of the principal 2x2 minors,
/// `(tr(h)^2 - tr(h h)) / 2`, in 3D. Forming `det(F) - 1` instead would round changes
/// below f32's 6e-8 at 1 away.
#[func]
pub fn volume_change(h: Mat) -> f32 {
    let t = trace(h);
    let mut minors = 0.0;
    if DIM == 3 {
        // tr(h h) from the diagonal of the product alone: row i of h against its column i.
        let rows = transpose(h);
        let mut tr_hh = 0.0;
        for i in 0..DIM {
            tr_hh += dot(rows.col(i), h.col(i));
        }
        minors = 0.5 * (t * t - tr_hh);
    }
    t + minors + determinant(h)
}

/// The displacement gradient of a state that keeps only its volume change `dj`: `F = diag(J,
/// 1, ..)`, whose `h = F - I` is `dj` in one entry, so that [`volume_change`] gives `dj` back
/// exactly. A fluid's stress sees only `J`; the isotropic `J^(1/d) I` took a root and a
/// division per particle (6% of `scenes/mpm88.toml`'s CPU time) and rounded `dj` twice.
#[func]
pub fn volume_only(dj: f32) -> Mat {
    let mut d = Vec::ZERO;
    d[0] = dj;
    Mat::from_diagonal(d)
}

/// `J^(1/d) - 1` for `J = 1 + dj`, without cancellation: `(r - 1)(1 + r [+ r^2]) = dj`.
#[func]
pub fn root_change(dj: f32) -> f32 {
    // In 2D a square root: correctly rounded, and faster than `pow` on both backends.
    let j = max(1.0 + dj, 0.0);
    let r = if DIM == 2 { sqrt(j) } else { pow(j, INV_DIM) };
    let is_3d = DIM as f32 - 2.0;
    dj / (1.0 + r + is_3d * r * r)
}

/// Bounds `(lo, hi)` on the eigenvalues of a symmetric matrix by Gershgorin's circle theorem:
/// each eigenvalue lies within `sum_j!=i |m_ij|` of some `m_ii`. Exact for a diagonal matrix,
/// and no eigen-decomposition: the wave moduli (`wave_modulus`) need only a bound.
#[func]
pub fn eigen_bounds(m: Mat) -> (f32, f32) {
    let mut lo = 0.0;
    let mut hi = 0.0;
    for i in 0..DIM {
        let column = m.col(i);
        let diagonal = dot(column, Mat::IDENTITY.col(i));
        let radius = dot(abs(column), Vec::ONE) - abs(diagonal);
        if i == 0 {
            lo = diagonal - radius;
            hi = diagonal + radius;
        } else {
            lo = min(lo, diagonal - radius);
            hi = max(hi, diagonal + radius);
        }
    }
    (lo, hi)
}

/// `ln(1 + x)`, accurate for small `x`: below 1e-2 by its series to x^4 (relative error
/// under x^4 / 5, 2e-9), above by `ln`. GLSL's `log` near 1 is good only to an absolute
/// 5e-7, coarser than the volume changes of stiff solids.
#[func]
pub fn ln_1p(x: f32) -> f32 {
    let mut out = ln(1.0 + x);
    if abs(x) < 1e-2 {
        out = x * (1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25)));
    }
    out
}
