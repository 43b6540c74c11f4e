//! Hyperelastic solids (jelly).
//!
//! * Neo-Hookean: `tau = mu (F F^T - I) + lambda ln(J) I` (Bonet and Wood, "Nonlinear
//!   Continuum Mechanics for Finite Element Analysis", 2008, eq. 5.29), of the displacement
//!   gradient `h = F - I` (see `neo_hookean`).
//! * Fixed corotated: `tau = 2 mu (F - R) F^T + lambda (J - 1) J I`, R the rotation of F's
//!   polar decomposition (Stomakhin et al. 2012, "Energetically consistent invertible
//!   elasticity"; the model of Taichi's mpm99).

use super::{eigen_bounds, ln_1p, volume_change, Mat, Vec};
use crate::func;

/// Neo-Hookean Kirchhoff stress of the displacement gradient `h = F - I`, in forms that keep
/// f32's precision near the identity: `F F^T - I = h + h^T + h h^T` and
/// `ln J = ln_1p(volume_change(h))`. Formed from F, `ln(det F)` rounds to about 1e-7, which
/// `lambda` multiplies: in a nearly incompressible solid that is the whole averaged stress
/// of small strains.
#[func]
pub fn neo_hookean(h: Mat, mu: f32, lambda: f32) -> Mat {
    let stretch = h + transpose(h) + h * transpose(h);
    mu * stretch + Mat::from_diagonal(Vec::splat(lambda * ln_1p(volume_change(h))))
}

#[func]
pub fn fixed_corotated(f: Mat, mu: f32, lambda: f32) -> Mat {
    let (r, _s) = polar(f);
    fixed_corotated_of(f, r, mu, lambda)
}

/// [`fixed_corotated`] of `F` with the rotation `r` of its polar decomposition.
#[func]
pub fn fixed_corotated_of(f: Mat, r: Mat, mu: f32, lambda: f32) -> Mat {
    let j = determinant(f);
    (2.0 * mu) * (f - r) * transpose(f) + Mat::from_diagonal(Vec::splat(lambda * (j - 1.0) * j))
}

/// The largest squared principal stretch of `F = I + h` can be, `s^2 <= max eig(F F^T)`,
/// by Gershgorin's bound (exact for a diagonal F).
#[func]
pub fn stretch_bound(h: Mat) -> f32 {
    let f = Mat::IDENTITY + h;
    let (_lo, hi) = eigen_bounds(f * transpose(f));
    hi
}

/// Neo-Hookean's P-wave modulus along a principal stretch `s` (see `wave_modulus`):
/// `mu (s^2 + 1) + lambda (1 - ln J)`, stiffer in stretch and compression.
#[func]
pub fn neo_hookean_modulus(h: Mat, mu: f32, lambda: f32) -> f32 {
    let j = max(determinant(Mat::IDENTITY + h), 1e-6);
    mu * (stretch_bound(h) + 1.0) + lambda * (1.0 - ln(j))
}

/// Fixed corotated's P-wave modulus along a principal stretch `s`: `2 mu s^2 + lambda J^2`.
#[func]
pub fn fixed_corotated_modulus(h: Mat, mu: f32, lambda: f32) -> f32 {
    let j = determinant(Mat::IDENTITY + h);
    2.0 * mu * stretch_bound(h) + lambda * j * j
}
