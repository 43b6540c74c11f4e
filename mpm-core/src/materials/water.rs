//! Weakly compressible water: pressure from the volume ratio `J` by Tait's equation of state,
//! `p = k (J^-gamma - 1)` (Becker and Teschner 2007, "Weakly compressible SPH for free
//! surface flows"; gamma = 7 for water), with optional viscosity `2 mu J D`, D the strain
//! rate from the APIC affine matrix C (the velocity gradient).

use glam::{Mat2, Mat3, Vec2, Vec3};

use crate::func;

/// Kirchhoff stress of water in 2D: `-p J I + 2 mu J sym(C)`.
#[func]
pub fn water_stress_2d(j: f32, c: Mat2, bulk: f32, gamma: f32, viscosity: f32) -> Mat2 {
    let p = bulk * (pow(j, -gamma) - 1.0);
    let strain_rate = 0.5 * (c + transpose(c));
    Mat2::from_diagonal(Vec2::splat(-p * j)) + (2.0 * viscosity * j) * strain_rate
}

/// Kirchhoff stress of water in 3D: `-p J I + 2 mu J sym(C)`.
#[func]
pub fn water_stress_3d(j: f32, c: Mat3, bulk: f32, gamma: f32, viscosity: f32) -> Mat3 {
    let p = bulk * (pow(j, -gamma) - 1.0);
    let strain_rate = 0.5 * (c + transpose(c));
    Mat3::from_diagonal(Vec3::splat(-p * j)) + (2.0 * viscosity * j) * strain_rate
}
