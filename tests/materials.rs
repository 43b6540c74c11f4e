//! The material models give the same stresses and projections on both backends.
//! Tolerance: relative 1e-3 of the largest entry (SVDs, logarithms and powers are computed
//! by different math libraries, and the GPU may fuse multiply-adds).

use mpm::core::materials::{dim2, dim3};
use mpm::core::rng::rand_f32;
use mpm::glam::{IVec2, Mat2, Mat3, Vec2, Vec3};
use mpm::{backend, kernel, BackendRef, Field, VulkanOptions};

/// Every model on every 2D deformation gradient: six results per input.
#[kernel]
fn models_2d(f: &Field<Mat2>, out: &mut Field<Mat2, 2>, mu: f32, lambda: f32, alpha: f32) {
    for p in f.indices() {
        let fp = f[p];
        let row = p as i32;
        out[IVec2::new(row, 0)] = dim2::neo_hookean(fp - Mat2::IDENTITY, mu, lambda);
        out[IVec2::new(row, 1)] = dim2::fixed_corotated(fp, mu, lambda);
        out[IVec2::new(row, 2)] =
            dim2::water_stress(determinant(fp) - 1.0, fp - Mat2::IDENTITY, 1e3, 7.0, 0.1);
        // The plasticity models take and return the displacement gradient F - I.
        let (fe, jp) = dim2::snow_plasticity(fp - Mat2::IDENTITY, 1.0, 2.5e-2, 4.5e-3);
        out[IVec2::new(row, 3)] = fe;
        out[IVec2::new(row, 4)] = Mat2::from_diagonal(Vec2::splat(jp));
        out[IVec2::new(row, 5)] =
            dim2::sand_plasticity(fp - Mat2::IDENTITY, mu, lambda, alpha, 0.0);
    }
}

#[kernel]
fn models_3d(f: &Field<Mat3>, out: &mut Field<Mat3, 2>, mu: f32, lambda: f32, alpha: f32) {
    for p in f.indices() {
        let fp = f[p];
        let row = p as i32;
        out[IVec2::new(row, 0)] = dim3::neo_hookean(fp - Mat3::IDENTITY, mu, lambda);
        out[IVec2::new(row, 1)] = dim3::fixed_corotated(fp, mu, lambda);
        out[IVec2::new(row, 2)] =
            dim3::water_stress(determinant(fp) - 1.0, fp - Mat3::IDENTITY, 1e3, 7.0, 0.1);
        // The plasticity models take and return the displacement gradient F - I.
        let (fe, jp) = dim3::snow_plasticity(fp - Mat3::IDENTITY, 1.0, 2.5e-2, 4.5e-3);
        out[IVec2::new(row, 3)] = fe;
        out[IVec2::new(row, 4)] = Mat3::from_diagonal(Vec3::splat(jp));
        out[IVec2::new(row, 5)] =
            dim3::sand_plasticity(fp - Mat3::IDENTITY, mu, lambda, alpha, 0.0);
    }
}

/// Deformation gradients near the identity (stretches up to 20%, rotations, shear).
fn gradients(n: u32) -> (Vec<Mat2>, Vec<Mat3>) {
    let r = |k: u32| rand_f32(11, k) * 0.4 - 0.2;
    let f2 = (0..n)
        .map(|i| {
            Mat2::IDENTITY
                + Mat2::from_cols_array(&[r(9 * i), r(9 * i + 1), r(9 * i + 2), r(9 * i + 3)])
        })
        .collect();
    let f3 = (0..n)
        .map(|i| {
            Mat3::IDENTITY + Mat3::from_cols_array(&std::array::from_fn(|k| r(9 * i + k as u32)))
        })
        .collect();
    (f2, f3)
}

fn run(b: &BackendRef, f2: &[Mat2], f3: &[Mat3]) -> (Vec<Mat2>, Vec<Mat3>) {
    let n = f2.len() as u32;
    let (mu, la) = mpm::core::materials::lame(1e3, 0.3);
    let alpha = dim3::drucker_prager_alpha(30f32.to_radians());
    let mut out2 = Field::<Mat2, 2>::new(b, [n, 6]).expect("field");
    let mut out3 = Field::<Mat3, 2>::new(b, [n, 6]).expect("field");
    models_2d(
        &Field::from_slice(b, [n], f2).expect("field"),
        &mut out2,
        mu,
        la,
        alpha,
    )
    .expect("kernel");
    models_3d(
        &Field::from_slice(b, [n], f3).expect("field"),
        &mut out3,
        mu,
        la,
        alpha,
    )
    .expect("kernel");
    (
        out2.download().expect("download"),
        out3.download().expect("download"),
    )
}

fn agree(a: &[f32], b: &[f32], what: &str) {
    let scale = a.iter().chain(b).fold(1.0f32, |m, x| m.max(x.abs()));
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-3 * scale,
            "{what} entry {k}: cpu {x}, vulkan {y}"
        );
    }
}

#[test]
fn materials_agree_on_both_backends() {
    let (f2, f3) = gradients(256);
    let (c2, c3) = run(&backend::cpu(), &f2, &f3);
    // The CPU kernel gives what the funcs give when called as plain Rust.
    let (mu, la) = mpm::core::materials::lame(1e3, 0.3);
    assert_eq!(c2[0], dim2::neo_hookean(f2[0] - Mat2::IDENTITY, mu, la));
    let vk = match mpm_vulkan::backend_for_tests(VulkanOptions::from_env(), "materials on Vulkan") {
        Ok(Some(b)) => std::sync::Arc::new(b) as BackendRef,
        Ok(None) => return,
        Err(e) => panic!("creating the Vulkan backend failed: {e}"),
    };
    let (g2, g3) = run(&vk, &f2, &f3);
    for (row, (c, g)) in c2.chunks(6).zip(g2.chunks(6)).enumerate() {
        for (m, (a, b)) in c.iter().zip(g).enumerate() {
            agree(
                &a.to_cols_array(),
                &b.to_cols_array(),
                &format!("2D model {m}, gradient {row}"),
            );
        }
    }
    for (row, (c, g)) in c3.chunks(6).zip(g3.chunks(6)).enumerate() {
        for (m, (a, b)) in c.iter().zip(g).enumerate() {
            agree(
                &a.to_cols_array(),
                &b.to_cols_array(),
                &format!("3D model {m}, gradient {row}"),
            );
        }
    }
}
