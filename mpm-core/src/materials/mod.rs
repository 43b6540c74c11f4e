//! Constitutive models as `#[func]`s, so that both backends and user kernels share them.
//!
//! Every elastic model returns the Kirchhoff stress `tau = P F^T` (P the first
//! Piola-Kirchhoff stress), which MLS-MPM's P2G uses directly:
//! `affine = -dt * V0 * (4 / dx^2) * tau + m C` (Hu et al. 2018, eq. 29).
//! Plasticity models return the projected deformation gradient.
//!
//! Each model is written once (`elastic.rs`, `water.rs`, `snow.rs`, `sand.rs`, in terms of
//! the dimension's `Vec`, `Mat` and `DIM`) and compiled for each dimension as [`dim2`] and
//! [`dim3`] (see [`crate::dim`]): `materials::dim2::neo_hookean`, `materials::dim3::neo_hookean`.

pub mod dim2;
pub mod dim3;

/// The model sources, each compiled once per dimension in `dim2.rs` and `dim3.rs`, with
/// their public funcs re-exported there (a new model is its file and one line here).
macro_rules! compile_models {
    () => {
        $crate::materials::compile_models!(
            elastic = "elastic.rs",
            sand = "sand.rs",
            snow = "snow.rs",
            water = "water.rs"
        );
    };
    ($($model:ident = $file:literal),*) => {$(
        #[path = $file]
        #[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
        mod $model;
        pub use $model::*;
    )*};
}
pub(crate) use compile_models;

/// Lamé parameters from Young's modulus and Poisson's ratio: `(mu, lambda)`.
pub fn lame(youngs: f32, poisson: f32) -> (f32, f32) {
    (
        youngs / (2.0 * (1.0 + poisson)),
        youngs * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson)),
    )
}

#[cfg(test)]
mod tests {
    use glam::{Mat2, Mat3, Vec2, Vec3};

    use super::{dim2, dim3, lame};

    fn close2(a: Mat2, b: Mat2, tol: f32) -> bool {
        (a - b).to_cols_array().iter().all(|x| x.abs() <= tol)
    }
    fn close3(a: Mat3, b: Mat3, tol: f32) -> bool {
        (a - b).to_cols_array().iter().all(|x| x.abs() <= tol)
    }

    #[test]
    fn rest_state_is_stress_free() {
        let (mu, la) = lame(1e3, 0.2);
        assert!(close2(
            dim2::neo_hookean(Mat2::IDENTITY, mu, la),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::neo_hookean(Mat3::IDENTITY, mu, la),
            Mat3::ZERO,
            1e-4
        ));
        assert!(close2(
            dim2::fixed_corotated(Mat2::IDENTITY, mu, la),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::fixed_corotated(Mat3::IDENTITY, mu, la),
            Mat3::ZERO,
            1e-4
        ));
        assert!(close2(
            dim2::water_stress(1.0, Mat2::ZERO, 1e3, 7.0, 0.1),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::water_stress(1.0, Mat3::ZERO, 1e3, 7.0, 0.1),
            Mat3::ZERO,
            1e-4
        ));
    }

    #[test]
    fn elastic_stress_is_frame_indifferent() {
        // tau(R F) = R tau(F) R^T for a rotation R.
        let (mu, la) = lame(1e3, 0.3);
        let f = Mat3::from_cols(
            Vec3::new(1.1, 0.05, -0.02),
            Vec3::new(0.1, 0.9, 0.03),
            Vec3::new(0.0, 0.04, 1.05),
        );
        let r = Mat3::from_rotation_y(0.7) * Mat3::from_rotation_x(-0.3);
        for model in [dim3::neo_hookean, dim3::fixed_corotated] {
            let lhs = model(r * f, mu, la);
            let rhs = r * model(f, mu, la) * r.transpose();
            assert!(close3(lhs, rhs, 1e-2), "{lhs:?} vs {rhs:?}");
        }
        let f2 = Mat2::from_cols(Vec2::new(1.2, 0.1), Vec2::new(-0.05, 0.8));
        let r2 = Mat2::from_angle(0.4);
        for model in [dim2::neo_hookean, dim2::fixed_corotated] {
            assert!(close2(
                model(r2 * f2, mu, la),
                r2 * model(f2, mu, la) * r2.transpose(),
                1e-2
            ));
        }
    }

    #[test]
    fn uniaxial_stretch_pulls_back() {
        // A bar stretched along x is under tension along x (positive tau_xx).
        let (mu, la) = lame(1e3, 0.2);
        let f = Mat2::from_diagonal(Vec2::new(1.1, 1.0));
        assert!(dim2::neo_hookean(f, mu, la).x_axis.x > 0.0);
        assert!(dim2::fixed_corotated(f, mu, la).x_axis.x > 0.0);
        // Compressed water pushes out: negative (compressive) Kirchhoff stress is -p J < 0.
        assert!(dim2::water_stress(0.9, Mat2::ZERO, 1e3, 7.0, 0.0).x_axis.x < 0.0);
    }

    #[test]
    fn snow_clamps_and_hardens() {
        let f = Mat3::from_diagonal(Vec3::new(1.2, 0.9, 1.0));
        let (he, jp) = dim3::snow_plasticity(f - Mat3::IDENTITY, 1.0, 2.5e-2, 4.5e-3);
        let fe = he + Mat3::IDENTITY;
        let d = Vec3::new(fe.x_axis.x, fe.y_axis.y, fe.z_axis.z);
        assert!(
            (d - Vec3::new(1.0045, 0.975, 1.0)).abs().max_element() < 1e-4,
            "{fe:?}"
        );
        // Plastic volume change: det(F) / det(Fe).
        assert!((jp - 1.2 * 0.9 / (1.0045 * 0.975)).abs() < 1e-4, "{jp}");
        assert!(dim3::snow_hardening(jp, 10.0) < 1.0);
        let (he2, jp2) = dim2::snow_plasticity(Mat2::ZERO, 1.0, 2.5e-2, 4.5e-3);
        assert!(close2(he2, Mat2::ZERO, 1e-5) && (jp2 - 1.0).abs() < 1e-6);
        // Inside the bounds the displacement gradient comes back exactly, however small.
        let tiny = Mat3::from_diagonal(Vec3::new(3e-8, -2e-8, 0.0));
        assert_eq!(
            dim3::snow_plasticity(tiny, 1.0, 2.5e-2, 4.5e-3),
            (tiny, 1.0)
        );
    }

    #[test]
    fn sand_projects_onto_the_cone() {
        let (mu, la) = lame(3.537e5, 0.3);
        let alpha = dim3::drucker_prager_alpha(30f32.to_radians());
        // Pure hydrostatic compression is inside the cone: unchanged.
        // (The models take and return the displacement gradient h = F - I.)
        let h = Mat3::from_diagonal(Vec3::splat(-0.02));
        assert_eq!(dim3::sand_plasticity(h, mu, la, alpha, 0.0), h);
        // Expansion without cohesion: the sand falls apart (F becomes a rotation).
        let h = Mat3::from_diagonal(Vec3::new(0.05, 0.02, 0.0));
        assert!(close3(
            dim3::sand_plasticity(h, mu, la, alpha, 0.0),
            Mat3::ZERO,
            1e-4
        ));
        // Strong shear under light compression yields: the deviatoric strain shrinks.
        let h = Mat2::from_diagonal(Vec2::new(0.1, -0.12));
        let fp = dim2::sand_plasticity(h, mu, la, alpha, 0.0) + Mat2::IDENTITY;
        let (sx, sy) = (fp.x_axis.x.ln(), fp.y_axis.y.ln());
        assert!(
            (sx - sy).abs() < (1.1f32.ln() - 0.88f32.ln()).abs(),
            "{fp:?}"
        );
    }
}
