//! Weakly compressible water: pressure from the volume ratio `J` by Tait's equation of state,
//! `p = k (J^-gamma - 1)` (Becker and Teschner 2007, "Weakly compressible SPH for free
//! surface flows"; gamma = 7 for water), with optional viscosity `2 mu J D`, D the strain
//! rate from the APIC affine matrix C (the velocity gradient).

use super::{Mat, Vec};
use crate::func;

/// Kirchhoff stress of water, `-p J I + 2 mu J sym(C)`, from the volume change `dj = J - 1`.
#[func]
pub fn water_stress(dj: f32, c: Mat, bulk: f32, gamma: f32, viscosity: f32) -> Mat {
    let j = 1.0 + dj;
    // gamma = 1 (Taichi's J-fluid, the mpm88 and mpm3d scenes): `-p J = k (J - 1)`, from
    // `dj` itself, with one rounding; `1 / J - 1` would cancel f32's digits for small
    // changes (and `pow` was 3% of mpm88.toml's substep on the CPU).
    let mut pressure_j = -bulk * dj;
    if gamma != 1.0 {
        pressure_j = bulk * (pow(j, -gamma) - 1.0) * j;
    }
    let strain_rate = 0.5 * (c + transpose(c));
    Mat::from_diagonal(Vec::splat(-pressure_j)) + (2.0 * viscosity * j) * strain_rate
}
