//! The solver library against closed-form mechanics: free fall, conservation of mass and of
//! linear and angular momentum by the transfers, and its checks on bad input.

mod common;

use mpm::core::solver::{
    Condition, Material, Region, Sampling, Settings, Solver2, Solver3, Spline, Walls,
};
use mpm::{backend, BackendRef};

fn jelly() -> Material {
    Material::NeoHookean {
        density: 1000.0,
        youngs: 1e4,
        poisson: 0.3,
    }
}

/// Mean of a set of points.
fn mean<const D: usize>(x: &[[f32; D]]) -> [f32; D] {
    let mut m = [0.0f64; D];
    for p in x {
        for a in 0..D {
            m[a] += p[a] as f64;
        }
    }
    m.map(|v| (v / x.len() as f64) as f32)
}

/// Free fall (reference: x = x0 + v0 t - g t^2 / 2). The explicit scheme's discrete fall
/// differs from it by g dt t / 2, which bounds the tolerance.
fn free_fall_2d(b: &BackendRef, spline: Spline) {
    let dt = 1e-4;
    let mut settings = Settings::<2>::new(64, dt);
    settings.spline = spline;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let region = Region::Box {
        min: [0.4, 0.6],
        max: [0.6, 0.75],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [0.5, 1.0])
        .expect("particles");
    let (x0, _) = s.positions().expect("positions");
    let c0 = mean(&x0);
    let steps = 1000;
    for _ in 0..steps {
        s.substep().expect("substep");
    }
    let t = steps as f32 * dt;
    let (x1, _) = s.positions().expect("positions");
    assert_eq!(x1.len(), x0.len(), "no particle may be lost");
    let c1 = mean(&x1);
    let expected = [c0[0] + 0.5 * t, c0[1] + 1.0 * t - 0.5 * 9.8 * t * t];
    let tol = 0.5 * 9.8 * dt * t + 1e-5;
    for a in 0..2 {
        assert!(
            (c1[a] - expected[a]).abs() <= tol,
            "{spline:?} axis {a}: centre {} vs free fall {} (tolerance {tol})",
            c1[a],
            expected[a]
        );
    }
}

#[test]
fn free_fall_matches_kinematics_on_cpu() {
    let b = backend::cpu();
    free_fall_2d(&b, Spline::Quadratic);
    free_fall_2d(&b, Spline::Cubic);
}

#[test]
fn free_fall_matches_kinematics_on_vulkan() {
    common::with_backends(|b| {
        free_fall_2d(&b.vk, Spline::Quadratic);
        free_fall_2d(&b.vk, Spline::Cubic);
    });
}
