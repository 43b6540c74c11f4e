//! Sand: Drucker-Prager plasticity by return mapping in Hencky (logarithmic) strain
//! (Klar et al. 2016, "Drucker-Prager elastoplasticity for sand animation", section 7.3,
//! their Algorithm 2), with the elastic response of St. Venant-Kirchhoff in Hencky strain.
//!
//! `alpha = sqrt(2/3) * 2 sin(phi) / (3 - sin(phi))` for friction angle `phi`. Cohesion `c`
//! shifts the yield surface's apex to tension `ln(1 + c)` per axis (a common extension:
//! the strain is shifted by the cohesion before the cone test and back after it).

use super::{Mat, Vec, DIM};
use crate::func;

/// The cone coefficient for a friction angle in radians.
///
/// 3D: Drucker-Prager's `sqrt(2/3) 2 sin(phi) / (3 - sin(phi))`. 2D (plane): `sin(phi) /
/// sqrt(2)`: there the return map's yield surface `|dev eps| + alpha tr(eps) (2 lambda +
/// 2 mu) / (2 mu)` is, in principal stresses, `|s1 - s2| = -sqrt(2) alpha (s1 + s2)`:
/// Mohr-Coulomb with `sin(phi) = sqrt(2) alpha`. The 3D coefficient would make 30 degrees act
/// as 27.5.
#[func]
pub fn drucker_prager_alpha(friction_angle: f32) -> f32 {
    let s = sin(friction_angle);
    select(DIM == 2, 0.70710677 * s, 0.8164966 * 2.0 * s / (3.0 - s))
}

/// The Hencky (logarithmic) strain of singular values, kept finite for collapsed ones.
#[func]
pub fn hencky_strain(sig: Vec) -> Vec {
    ln(max(abs(sig), Vec::splat(1e-6)))
}

/// The projected elastic deformation of a sand particle, as the displacement gradient
/// `F - I` (see `Particles::grad_u`); inside the cone `h` comes back untouched, since
/// rebuilding it from the SVD would round away strains below f32's resolution.
#[func]
pub fn sand_plasticity(h: Mat, mu: f32, lambda: f32, alpha: f32, cohesion: f32) -> Mat {
    let (h_new, _u, _sig) = sand_return(h, mu, lambda, alpha, cohesion);
    h_new
}

/// [`sand_plasticity`], with the new `F`'s left singular vectors and singular values, which
/// its stress needs (see [`hencky_stress_of`]): one SVD a particle instead of two.
#[func]
pub fn sand_return(h: Mat, mu: f32, lambda: f32, alpha: f32, cohesion: f32) -> (Mat, Mat, Vec) {
    let (u, sig, v) = svd(Mat::IDENTITY + h);
    let shift = ln(1.0 + cohesion);
    let eps = hencky_strain(sig) - Vec::splat(shift);
    let d = DIM as f32;
    let tr = sum(eps);
    let dev = eps - Vec::splat(tr / d);
    let dev_norm = length(dev);
    let mut projected = eps;
    let mut yielded = true;
    if tr >= 0.0 {
        // Tension beyond the apex: no elastic strain left.
        projected = Vec::ZERO;
    } else if dev_norm > 1e-12 {
        let dgamma = dev_norm + (d * lambda + 2.0 * mu) / (2.0 * mu) * tr * alpha;
        if dgamma > 0.0 {
            projected = eps - (dgamma / dev_norm) * dev;
        } else {
            yielded = false;
        }
    } else {
        yielded = false;
    }
    let mut h_new = h;
    let mut sig_new = sig;
    if yielded {
        sig_new = exp(projected + Vec::splat(shift));
        h_new = u * Mat::from_diagonal(sig_new) * transpose(v) - Mat::IDENTITY;
    }
    (h_new, u, sig_new)
}

/// Kirchhoff stress of St. Venant-Kirchhoff in Hencky strain, the elastic law under sand's
/// plasticity: `tau = U (2 mu ln(S) + lambda tr(ln S) I) U^T` (Klar et al. 2016, eq. 26).
#[func]
pub fn hencky_stress(f: Mat, mu: f32, lambda: f32) -> Mat {
    let (u, sig, _v) = svd(f);
    hencky_stress_of(u, sig, mu, lambda)
}

/// [`hencky_stress`] of the `F` with left singular vectors `u` and singular values `sig`.
#[func]
pub fn hencky_stress_of(u: Mat, sig: Vec, mu: f32, lambda: f32) -> Mat {
    let eps = hencky_strain(sig);
    let s = 2.0 * mu * eps + Vec::splat(lambda * sum(eps));
    u * Mat::from_diagonal(s) * transpose(u)
}
