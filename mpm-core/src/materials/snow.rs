//! Snow plasticity (Stomakhin et al. 2013, "A material point method for snow simulation"):
//! singular values of the elastic deformation are clamped to `[1 - theta_c, 1 + theta_s]`;
//! what is clamped away moves into the plastic volume ratio `Jp`, which hardens the material
//! by `h = exp(xi (1 - Jp))` (their eq. 7; the paper's values: theta_c = 2.5e-2,
//! theta_s = 7.5e-3, xi = 10; Taichi's mpm99 uses theta_s = 4.5e-3).

use glam::{Mat2, Mat3, Vec2, Vec3};

use crate::func;

/// The projected elastic deformation gradient and the new plastic volume ratio.
#[func]
pub fn snow_plasticity_2d(f: Mat2, jp: f32, theta_c: f32, theta_s: f32) -> (Mat2, f32) {
    let (u, sig, v) = svd(f);
    let clamped = clamp(sig, Vec2::splat(1.0 - theta_c), Vec2::splat(1.0 + theta_s));
    let new_jp = jp * (sig.x * sig.y) / (clamped.x * clamped.y);
    (u * Mat2::from_diagonal(clamped) * transpose(v), new_jp)
}

#[func]
pub fn snow_plasticity_3d(f: Mat3, jp: f32, theta_c: f32, theta_s: f32) -> (Mat3, f32) {
    let (u, sig, v) = svd(f);
    let clamped = clamp(sig, Vec3::splat(1.0 - theta_c), Vec3::splat(1.0 + theta_s));
    let new_jp = jp * (sig.x * sig.y * sig.z) / (clamped.x * clamped.y * clamped.z);
    (u * Mat3::from_diagonal(clamped) * transpose(v), new_jp)
}

/// The hardening factor applied to the Lamé parameters.
#[func]
pub fn snow_hardening(jp: f32, xi: f32) -> f32 {
    exp(xi * (1.0 - jp))
}
