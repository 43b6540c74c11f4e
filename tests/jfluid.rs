//! Taichi's J-fluid scenes (mpm88 in 2D, mpm3d in 3D) agree on both backends and fall as
//! free fall predicts before they reach the floor.

use mpm::demos::jfluid::{Mpm3d, Mpm88};
use mpm::{backend, BackendRef, VulkanBackend, VulkanOptions};

fn vulkan() -> Option<BackendRef> {
    let options = VulkanOptions {
        validation: true,
        ..VulkanOptions::from_env()
    };
    mpm_vulkan::backend_for_tests(options, "the J-fluid scenes on Vulkan")
        .unwrap_or_else(|e| panic!("creating the Vulkan backend failed: {e}"))
        .map(|b| std::sync::Arc::new(b) as BackendRef)
}

/// Largest and mean distance between two position sets.
fn distance<T: Copy, F: Fn(T, T) -> f32>(a: &[T], b: &[T], d: F) -> (f32, f32) {
    let all: Vec<f32> = a.iter().zip(b).map(|(p, q)| d(*p, *q)).collect();
    (
        all.iter().cloned().fold(0.0, f32::max),
        all.iter().sum::<f32>() / all.len() as f32,
    )
}

#[test]
fn mpm88_falls_and_backends_agree() {
    let run = |b: &BackendRef| {
        let mut s = Mpm88::new(b, 5).expect("scene");
        let y0: f32 = s.x.download().expect("x").iter().map(|p| p.y).sum::<f32>() / 8192.0;
        for _ in 0..100 {
            s.substep().expect("substep");
        }
        let x = s.x.download().expect("x");
        (y0, x)
    };
    let (y0, cpu) = run(&backend::cpu());
    // Free fall from v0 = -1 under symplectic Euler: after N = 100 steps of dt = 2e-4 the
    // drop is v0 N dt + g dt^2 N (N + 1) / 2 = 0.02 + 0.0019796 (the blob is 0.2 above the
    // floor, nothing touches a wall yet).
    let y1 = cpu.iter().map(|p| p.y).sum::<f32>() / cpu.len() as f32;
    assert!(
        ((y1 - y0) + 0.0219796).abs() < 2e-5,
        "centre of mass moved by {}",
        y1 - y0
    );
    if let Some(vk) = vulkan() {
        let (_, gpu) = run(&vk);
        let (max, mean) = distance(&cpu, &gpu, |a, b| (a - b).length());
        // Order-dependent float atomics: a thousandth of a cell (dx = 1/128) on average.
        assert!(max < 1e-4 && mean < 1e-5, "max {max}, mean {mean}");
        assert!(
            VulkanBackend::validation_messages().is_empty(),
            "{:#?}",
            VulkanBackend::validation_messages()
        );
    }
}

#[test]
fn mpm3d_falls_and_backends_agree() {
    let run = |b: &BackendRef| {
        // 32^3: the blob starts five cells above the floor, clear of the 3-cell walls.
        let mut s = Mpm3d::new(b, 32, 9).expect("scene");
        let x0 = s.x.download().expect("x");
        for _ in 0..40 {
            s.substep().expect("substep");
        }
        (x0, s.x.download().expect("x"))
    };
    let (x0, cpu) = run(&backend::cpu());
    let mean_y = |x: &[mpm::glam::Vec3]| x.iter().map(|p| p.y).sum::<f32>() / x.len() as f32;
    // Free fall from rest under symplectic Euler (grid velocity first, then positions):
    // after N steps the drop is g dt^2 N (N + 1) / 2 = 3.2144e-4 for N = 40, dt = 2e-4.
    let drop = mean_y(&cpu) - mean_y(&x0);
    assert!(
        (drop + 3.2144e-4).abs() < 1e-5,
        "centre of mass moved by {drop}"
    );
    assert!(cpu
        .iter()
        .all(|p| p.is_finite() && p.min_element() >= 0.0 && p.max_element() <= 1.0));
    if let Some(vk) = vulkan() {
        let (_, gpu) = run(&vk);
        let (max, mean) = distance(&cpu, &gpu, |a, b| (a - b).length());
        assert!(max < 1e-4 && mean < 1e-5, "max {max}, mean {mean}");
    }
}
