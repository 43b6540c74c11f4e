//! Hyperelastic solids (jelly).
//!
//! * Neo-Hookean: `tau = mu (F F^T - I) + lambda ln(J) I` (Bonet and Wood, "Nonlinear
//!   Continuum Mechanics for Finite Element Analysis", 2008, eq. 5.29).
//! * Fixed corotated: `tau = 2 mu (F - R) F^T + lambda (J - 1) J I`, R the rotation of F's
//!   polar decomposition (Stomakhin et al. 2012, "Energetically consistent invertible
//!   elasticity"; the model of Taichi's mpm99).

use glam::{Mat2, Mat3, Vec2, Vec3};

use crate::func;

#[func]
pub fn neo_hookean_2d(f: Mat2, mu: f32, lambda: f32) -> Mat2 {
    let j = determinant(f);
    mu * (f * transpose(f) - Mat2::IDENTITY) + Mat2::from_diagonal(Vec2::splat(lambda * ln(j)))
}

#[func]
pub fn neo_hookean_3d(f: Mat3, mu: f32, lambda: f32) -> Mat3 {
    let j = determinant(f);
    mu * (f * transpose(f) - Mat3::IDENTITY) + Mat3::from_diagonal(Vec3::splat(lambda * ln(j)))
}

#[func]
pub fn fixed_corotated_2d(f: Mat2, mu: f32, lambda: f32) -> Mat2 {
    let (r, _s) = polar(f);
    let j = determinant(f);
    (2.0 * mu) * (f - r) * transpose(f) + Mat2::from_diagonal(Vec2::splat(lambda * (j - 1.0) * j))
}

#[func]
pub fn fixed_corotated_3d(f: Mat3, mu: f32, lambda: f32) -> Mat3 {
    let (r, _s) = polar(f);
    let j = determinant(f);
    (2.0 * mu) * (f - r) * transpose(f) + Mat3::from_diagonal(Vec3::splat(lambda * (j - 1.0) * j))
}
