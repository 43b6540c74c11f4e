//! Brittle fracture: fixed-corotated elasticity whose tensile principal stresses soften once
//! the largest principal stress reaches the tensile strength (the Rankine criterion),
//! exponentially in the equivalent strain, regularised by the crack band (Bazant and Oh 1983,
//! "Crack band theory for fracture of concrete", Materiaux et Constructions 16): the softening
//! strain is set from the fracture energy and the cell size, so that a band one cell wide
//! dissipates the fracture energy per unit area of crack whatever the cell size. Compression
//! keeps its stiffness, so cracked pieces still push on each other. The damage `d` is kept as
//! the integrity `1 - d` in the particle's `jp` (1: intact) and never heals.

use glam::Vec4;

use super::{Mat, Vec, DIM};
use crate::func;

/// The damage after an equivalent strain `kappa` (largest principal stress over Young's
/// modulus), with the strain at the strength `onset` and the softening strain `soft`: none up
/// to the onset, then `1 - (onset / kappa) exp(-(kappa - onset) / soft)`, so that the
/// stress `(1 - d) E kappa` falls from the strength as `exp(-(kappa - onset) / soft)`.
#[func]
pub fn rankine_damage(kappa: f32, onset: f32, soft: f32) -> f32 {
    let mut d = 0.0;
    if kappa > onset {
        d = 1.0 - onset / kappa * exp(-(kappa - onset) / soft);
    }
    d
}

/// A brittle particle's update: its displacement gradient `h = F - I`, unchanged, the
/// Kirchhoff stress with the tensile principal stresses degraded, and its integrity (from
/// `jp`: the damage only grows). `row` is `(strength, youngs, softening strain, -)`.
#[func]
pub fn brittle_update(h: Mat, jp: f32, mu: f32, lambda: f32, row: Vec4) -> (Mat, Mat, f32) {
    let f = Mat::IDENTITY + h;
    let (u, sig, _v) = svd(f);
    let j = determinant(f);
    // Fixed corotated's principal Kirchhoff stresses, along U's columns.
    let principal = 2.0 * mu * (sig - Vec::ONE) * sig + Vec::splat(lambda * (j - 1.0) * j);
    let mut largest = principal[0];
    for a in 1..DIM {
        largest = max(largest, principal[a]);
    }
    let kappa = largest / (max(j, 1e-6) * row.y);
    let damage = max(1.0 - jp, rankine_damage(kappa, row.x / row.y, row.z));
    let mut degraded = principal;
    for a in 0..DIM {
        if principal[a] > 0.0 {
            degraded[a] = (1.0 - damage) * principal[a];
        }
    }
    (h, u * Mat::from_diagonal(degraded) * transpose(u), 1.0 - damage)
}
