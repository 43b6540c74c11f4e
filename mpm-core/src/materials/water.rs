//! Weakly compressible water: pressure from the volume ratio `J` by Tait's equation of state,
//! `p = k (J^-gamma - 1)` (Becker and Teschner 2007, "Weakly compressible SPH for free
//! surface flows"; gamma = 7 for water), with optional viscosity `2 mu J D`, D the strain
//! rate from the APIC affine matrix C (the velocity gradient).

use super::{Mat, Vec};
use crate::func;

/// Kirchhoff stress of water: `-p J I + 2 mu J sym(C)`.
#[func]
pub fn water_stress(j: f32, c: Mat, bulk: f32, gamma: f32, viscosity: f32) -> Mat {
    // gamma = 1 (Taichi's J-fluid, the mpm88 and mpm3d scenes) is a reciprocal: correctly
    // rounded, where `pow` was 3% of mpm88.toml's substep on the CPU.
    let compression = if gamma == 1.0 { 1.0 / j } else { pow(j, -gamma) };
    let p = bulk * (compression - 1.0);
    let strain_rate = 0.5 * (c + transpose(c));
    Mat::from_diagonal(Vec::splat(-p * j)) + (2.0 * viscosity * j) * strain_rate
}
