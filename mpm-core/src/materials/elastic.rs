//! Hyperelastic solids (jelly).
//!
//! * Neo-Hookean: `tau = mu (F F^T - I) + lambda ln(J) I` (Bonet and Wood, "Nonlinear
//!   Continuum Mechanics for Finite Element Analysis", 2008, eq. 5.29).
//! * Fixed corotated: `tau = 2 mu (F - R) F^T + lambda (J - 1) J I`, R the rotation of F's
//!   polar decomposition (Stomakhin et al. 2012, "Energetically consistent invertible
//!   elasticity"; the model of Taichi's mpm99).

use super::{Mat, Vec};
use crate::func;

#[func]
pub fn neo_hookean(f: Mat, mu: f32, lambda: f32) -> Mat {
    let j = determinant(f);
    mu * (f * transpose(f) - Mat::IDENTITY) + Mat::from_diagonal(Vec::splat(lambda * ln(j)))
}

#[func]
pub fn fixed_corotated(f: Mat, mu: f32, lambda: f32) -> Mat {
    let (r, _s) = polar(f);
    let j = determinant(f);
    (2.0 * mu) * (f - r) * transpose(f) + Mat::from_diagonal(Vec::splat(lambda * (j - 1.0) * j))
}
