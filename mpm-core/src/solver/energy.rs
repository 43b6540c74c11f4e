//! The energy report: kinetic, strain and gravitational energy of the particles, summed on
//! the host in f64 (in 2D per metre of depth).
//!
//! The strain energy densities are the ones whose derivatives the kernels' stresses are, per
//! unit reference volume, evaluated from the displacement gradient `h = F - I` in f64 (2D
//! gradients are padded with `F_zz = 1`, which adds nothing to any of them). The material
//! table (`materials::material_table!`) says which material has which; the densities here:
//! * neo-Hookean: `mu/2 (tr(F^T F) - 3) - mu ln J + lambda/2 ln(J)^2` (Bonet and Wood 2008,
//!   eq. 6.27);
//! * fixed corotated: `mu sum (sigma_i - 1)^2 + lambda/2 (J - 1)^2` (Stomakhin et al. 2012),
//!   snow the same with the hardened moduli of its `Jp`;
//! * sand: `mu sum ln(sigma_i)^2 + lambda/2 (sum ln sigma_i)^2` (Klar et al. 2016, eq. 26);
//! * Tait water: `bulk ((J - 1) + (J^(1 - gamma) - 1) / (gamma - 1))`, whose `-dpsi/dJ` is the
//!   pressure `bulk (J^-gamma - 1)`.
//!
//! User materials have no energy the solver knows; their particles are counted instead.

use glam::{DMat3, DVec3};

use super::material::Material;

/// Energies of all live particles, in J (J per metre of depth in 2D).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Energy {
    /// `sum m |v|^2 / 2`, the particles' translational motion.
    pub kinetic: f64,
    /// `sum m tr(C D C^T) / 2`, the kinetic energy of APIC's affine velocity field about each
    /// particle (`D = dx^2 / 4` for quadratic, `dx^2 / 3` for cubic splines; Jiang et al.
    /// 2015, "The affine particle-in-cell method", section 5: the grid's kinetic energy after
    /// P2G never exceeds kinetic plus affine).
    pub affine: f64,
    /// `sum V0 psi(F)` over the materials with a known energy density.
    pub strain: f64,
    /// `-sum m g . x`, zero at the origin.
    pub gravity: f64,
    /// Live particles of user materials, whose strain energy is not included.
    pub unmodelled: usize,
}

impl Energy {
    /// Kinetic (translational and affine) plus strain plus gravitational energy.
    pub fn total(&self) -> f64 {
        self.kinetic + self.affine + self.strain + self.gravity
    }
}

/// One particle's state as the energy sum needs it.
pub(crate) struct ParticleState {
    pub x: DVec3,
    pub v: DVec3,
    /// APIC's affine velocity, padded with zeros in 2D.
    pub c: DMat3,
    /// Displacement gradient `F - I`, padded with zeros in 2D.
    pub grad_u: DMat3,
    pub jp: f64,
    pub mass: f64,
    pub vol: f64,
}

/// Adds one particle of `material` to `energy`.
/// `inertia` is APIC's `D` (a multiple of the identity).
pub(crate) fn add(
    energy: &mut Energy,
    material: &Material,
    p: &ParticleState,
    gravity: DVec3,
    inertia: f64,
) {
    energy.kinetic += 0.5 * p.mass * p.v.length_squared();
    // tr(C D C^T) = D |C|^2 for D a multiple of the identity.
    let c2 =
        p.c.x_axis.length_squared() + p.c.y_axis.length_squared() + p.c.z_axis.length_squared();
    energy.affine += 0.5 * p.mass * inertia * c2;
    energy.gravity -= p.mass * gravity.dot(p.x);
    match material.energy_density(p.grad_u, p.jp) {
        Some(psi) => energy.strain += p.vol * psi,
        None => energy.unmodelled += 1,
    }
}

/// Tait water's `bulk ((J - 1) + (J^(1 - gamma) - 1) / (gamma - 1))`.
pub(crate) fn tait(j: f64, bulk: f64, gamma: f64) -> f64 {
    bulk * ((j - 1.0) + (j.powf(1.0 - gamma) - 1.0) / (gamma - 1.0))
}

/// Neo-Hookean: `mu/2 (tr(F^T F) - 3) - mu ln J + lambda/2 ln(J)^2`.
pub(crate) fn neo_hookean(f: DMat3, j: f64, mu: f64, lambda: f64) -> f64 {
    let ln_j = j.ln();
    // tr(F^T F) is the sum of F's squared entries.
    let tr_c = f.x_axis.length_squared() + f.y_axis.length_squared() + f.z_axis.length_squared();
    0.5 * mu * (tr_c - 3.0) - mu * ln_j + 0.5 * lambda * ln_j * ln_j
}

/// Fixed corotated: `mu sum (sigma_i - 1)^2 + lambda/2 (J - 1)^2`.
pub(crate) fn fixed_corotated(f: DMat3, j: f64, mu: f64, lambda: f64) -> f64 {
    let s = singular_values(f);
    mu * (s - DVec3::ONE).length_squared() + 0.5 * lambda * (j - 1.0).powi(2)
}

/// St. Venant-Kirchhoff in Hencky strain: `mu sum ln(sigma_i)^2 + lambda/2 (sum ln sigma_i)^2`.
pub(crate) fn hencky(f: DMat3, mu: f64, lambda: f64) -> f64 {
    let s = singular_values(f);
    let eps = DVec3::new(s.x.abs().ln(), s.y.abs().ln(), s.z.abs().ln());
    mu * eps.length_squared() + 0.5 * lambda * eps.element_sum().powi(2)
}

/// Singular values of `f`, the smallest carrying the sign of `det f` (the convention of the
/// kernels' SVD), as square roots of the eigenvalues of `f^T f`.
fn singular_values(f: DMat3) -> DVec3 {
    let e = symmetric_eigenvalues(f.transpose() * f);
    let mut s = DVec3::new(
        e.x.max(0.0).sqrt(),
        e.y.max(0.0).sqrt(),
        e.z.max(0.0).sqrt(),
    );
    if f.determinant() < 0.0 {
        s.z = -s.z;
    }
    s
}

/// Eigenvalues of a symmetric 3x3 matrix, largest first, by the closed-form trigonometric
/// solution of its characteristic cubic (Smith 1961, "Eigenvalues of a symmetric 3 x 3
/// matrix", Communications of the ACM 4(4)).
fn symmetric_eigenvalues(a: DMat3) -> DVec3 {
    let off = a.y_axis.x.powi(2) + a.z_axis.x.powi(2) + a.z_axis.y.powi(2);
    let diag = DVec3::new(a.x_axis.x, a.y_axis.y, a.z_axis.z);
    if off == 0.0 {
        let mut d = diag.to_array();
        d.sort_by(|p, q| q.total_cmp(p));
        return DVec3::from_array(d);
    }
    let q = diag.element_sum() / 3.0;
    let p = (((diag - DVec3::splat(q)).length_squared() + 2.0 * off) / 6.0).sqrt();
    let b = (a - DMat3::from_diagonal(DVec3::splat(q))) * (1.0 / p);
    let r = (0.5 * b.determinant()).clamp(-1.0, 1.0);
    let phi = r.acos() / 3.0;
    let largest = q + 2.0 * p * phi.cos();
    let smallest = q + 2.0 * p * (phi + 2.0 * std::f64::consts::FRAC_PI_3).cos();
    DVec3::new(largest, 3.0 * q - largest - smallest, smallest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigenvalues_of_a_rotated_diagonal() {
        let r = DMat3::from_rotation_y(0.7) * DMat3::from_rotation_x(-0.3);
        let a = r * DMat3::from_diagonal(DVec3::new(2.0, 0.5, 1.25)) * r.transpose();
        let e = symmetric_eigenvalues(a);
        assert!(
            (e - DVec3::new(2.0, 1.25, 0.5)).abs().max_element() < 1e-12,
            "{e}"
        );
    }

    #[test]
    fn densities_match_their_closed_forms() {
        let stretch = 1e-5;
        let h = DMat3::from_diagonal(DVec3::new(stretch, 0.0, 0.0));
        let (youngs, poisson) = (1e3f32, 0.0f32);
        let solid = Material::FixedCorotated {
            density: 1.0,
            youngs,
            poisson,
        };
        // Uniaxial small strain with nu = 0: psi = E eps^2 / 2 (mu = E / 2, lambda = 0).
        let psi = solid.energy_density(h, 1.0).expect("modelled");
        let expected = 0.5 * youngs as f64 * stretch * stretch;
        assert!((psi / expected - 1.0).abs() < 1e-6, "{psi} vs {expected}");
        // A rotation stores no energy.
        let rot = DMat3::from_rotation_z(0.4) - DMat3::IDENTITY;
        for m in [solid.clone(), Material::sand(), Material::snow()] {
            let psi = m.energy_density(rot, 1.0).expect("modelled");
            assert!(psi.abs() < 1e-9, "{}: {psi}", m.name());
        }
        // Water: psi'(J) = -p(J), checked by a central difference.
        let water = Material::water();
        let j = 0.99f64;
        let at = |j: f64| {
            let dj = j.cbrt() - 1.0;
            water
                .energy_density(DMat3::from_diagonal(DVec3::splat(dj)), 1.0)
                .expect("modelled")
        };
        let slope = (at(j + 1e-6) - at(j - 1e-6)) / 2e-6;
        let pressure = 1e5 * (j.powf(-7.0) - 1.0);
        assert!(
            (slope + pressure).abs() < 1e-3 * pressure,
            "{slope} vs {pressure}"
        );
    }
}
