//! Sand: Drucker-Prager plasticity by return mapping in Hencky (logarithmic) strain
//! (Klar et al. 2016, "Drucker-Prager elastoplasticity for sand animation", section 7.3,
//! their Algorithm 2), with the elastic response of St. Venant-Kirchhoff in Hencky strain.
//!
//! `alpha = sqrt(2/3) * 2 sin(phi) / (3 - sin(phi))` for friction angle `phi`. Cohesion `c`
//! shifts the yield surface's apex to tension `ln(1 + c)` per axis (a common extension:
//! the strain is shifted by the cohesion before the cone test and back after it).

use glam::{Mat2, Mat3, Vec2, Vec3};

use crate::func;

/// The plane (2D) cone coefficient for a friction angle in radians: `sin(phi) / sqrt(2)`.
/// In 2D the return map's yield surface `|dev eps| + alpha tr(eps) (2 lambda + 2 mu) / (2 mu)`
/// is, in principal stresses, `|s1 - s2| = -sqrt(2) alpha (s1 + s2)`: Mohr-Coulomb with
/// `sin(phi) = sqrt(2) alpha`. The 3D coefficient would make 30 degrees act as 27.5.
#[func]
pub fn drucker_prager_alpha_2d(friction_angle: f32) -> f32 {
    0.70710677 * sin(friction_angle)
}

/// Drucker-Prager's cone coefficient for a friction angle in radians (3D).
#[func]
pub fn drucker_prager_alpha(friction_angle: f32) -> f32 {
    let s = sin(friction_angle);
    0.8164966 * 2.0 * s / (3.0 - s)
}

/// The projected elastic deformation of a 2D sand particle, as the displacement gradient
/// `F - I` (see `Particles::grad_u`); inside the cone `h` comes back untouched, since
/// rebuilding it from the SVD would round away strains below f32's resolution.
#[func]
pub fn sand_plasticity_2d(h: Mat2, mu: f32, lambda: f32, alpha: f32, cohesion: f32) -> Mat2 {
    let (u, sig, v) = svd(Mat2::IDENTITY + h);
    let shift = ln(1.0 + cohesion);
    let eps = vec2(ln(max(abs(sig.x), 1e-6)), ln(max(abs(sig.y), 1e-6))) - Vec2::splat(shift);
    let tr = eps.x + eps.y;
    let dev = eps - Vec2::splat(tr / 2.0);
    let dev_norm = length(dev);
    let mut projected = eps;
    let mut yielded = true;
    if tr >= 0.0 {
        // Tension beyond the apex: no elastic strain left.
        projected = Vec2::ZERO;
    } else if dev_norm > 1e-12 {
        let dgamma = dev_norm + (2.0 * lambda + 2.0 * mu) / (2.0 * mu) * tr * alpha;
        if dgamma > 0.0 {
            projected = eps - (dgamma / dev_norm) * dev;
        } else {
            yielded = false;
        }
    } else {
        yielded = false;
    }
    let mut h_new = h;
    if yielded {
        let e = projected + Vec2::splat(shift);
        h_new = u * Mat2::from_diagonal(vec2(exp(e.x), exp(e.y))) * transpose(v) - Mat2::IDENTITY;
    }
    h_new
}

/// The projected elastic deformation of a 3D sand particle, as in 2D.
#[func]
pub fn sand_plasticity_3d(h: Mat3, mu: f32, lambda: f32, alpha: f32, cohesion: f32) -> Mat3 {
    let (u, sig, v) = svd(Mat3::IDENTITY + h);
    let shift = ln(1.0 + cohesion);
    let eps = vec3(
        ln(max(abs(sig.x), 1e-6)),
        ln(max(abs(sig.y), 1e-6)),
        ln(max(abs(sig.z), 1e-6)),
    ) - Vec3::splat(shift);
    let tr = eps.x + eps.y + eps.z;
    let dev = eps - Vec3::splat(tr / 3.0);
    let dev_norm = length(dev);
    let mut projected = eps;
    let mut yielded = true;
    if tr >= 0.0 {
        projected = Vec3::ZERO;
    } else if dev_norm > 1e-12 {
        let dgamma = dev_norm + (3.0 * lambda + 2.0 * mu) / (2.0 * mu) * tr * alpha;
        if dgamma > 0.0 {
            projected = eps - (dgamma / dev_norm) * dev;
        } else {
            yielded = false;
        }
    } else {
        yielded = false;
    }
    let mut h_new = h;
    if yielded {
        let e = projected + Vec3::splat(shift);
        h_new = u * Mat3::from_diagonal(vec3(exp(e.x), exp(e.y), exp(e.z))) * transpose(v)
            - Mat3::IDENTITY;
    }
    h_new
}

/// Kirchhoff stress of St. Venant-Kirchhoff in Hencky strain, the elastic law under sand's
/// plasticity: `tau = U (2 mu ln(S) + lambda tr(ln S) I) U^T` (Klar et al. 2016, eq. 26).
#[func]
pub fn hencky_stress_2d(f: Mat2, mu: f32, lambda: f32) -> Mat2 {
    let (u, sig, _v) = svd(f);
    let eps = vec2(ln(max(abs(sig.x), 1e-6)), ln(max(abs(sig.y), 1e-6)));
    let s = 2.0 * mu * eps + Vec2::splat(lambda * (eps.x + eps.y));
    u * Mat2::from_diagonal(s) * transpose(u)
}

#[func]
pub fn hencky_stress_3d(f: Mat3, mu: f32, lambda: f32) -> Mat3 {
    let (u, sig, _v) = svd(f);
    let eps = vec3(
        ln(max(abs(sig.x), 1e-6)),
        ln(max(abs(sig.y), 1e-6)),
        ln(max(abs(sig.z), 1e-6)),
    );
    let s = 2.0 * mu * eps + Vec3::splat(lambda * (eps.x + eps.y + eps.z));
    u * Mat3::from_diagonal(s) * transpose(u)
}
