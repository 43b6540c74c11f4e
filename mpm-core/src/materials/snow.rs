//! Snow plasticity (Stomakhin et al. 2013, "A material point method for snow simulation"):
//! singular values of the elastic deformation are clamped to `[1 - theta_c, 1 + theta_s]`;
//! what is clamped away moves into the plastic volume ratio `Jp`, which hardens the material
//! by `h = exp(xi (1 - Jp))` (their eq. 7; the paper's values: theta_c = 2.5e-2,
//! theta_s = 7.5e-3, xi = 10; Taichi's mpm99 uses theta_s = 4.5e-3).

use super::{Mat, Vec};
use crate::func;

/// The projected elastic deformation, both as the displacement gradient `F - I` (see
/// `Particles::grad_u`), and the new plastic volume ratio. A step that clamps nothing returns
/// `h` itself: rebuilding it from the SVD would round away strains below f32's resolution.
#[func]
pub fn snow_plasticity(h: Mat, jp: f32, theta_c: f32, theta_s: f32) -> (Mat, f32) {
    let (h_new, jp_new, _r) = snow_return(h, jp, theta_c, theta_s);
    (h_new, jp_new)
}

/// [`snow_plasticity`], with the rotation of the new `F`'s polar decomposition, which its
/// stress needs (see `fixed_corotated_of`): one SVD a particle instead of two.
#[func]
pub fn snow_return(h: Mat, jp: f32, theta_c: f32, theta_s: f32) -> (Mat, f32, Mat) {
    let (u, sig, v) = svd(Mat::IDENTITY + h);
    let clamped = clamp(sig, Vec::splat(1.0 - theta_c), Vec::splat(1.0 + theta_s));
    let mut h_new = h;
    let mut jp_new = jp;
    if clamped != sig {
        jp_new = jp * product(sig) / product(clamped);
        h_new = u * Mat::from_diagonal(clamped) * transpose(v) - Mat::IDENTITY;
    }
    (h_new, jp_new, u * transpose(v))
}

/// The hardening factor applied to the Lamé parameters.
#[func]
pub fn snow_hardening(jp: f32, xi: f32) -> f32 {
    exp(xi * (1.0 - jp))
}
