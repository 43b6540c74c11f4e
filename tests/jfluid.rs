//! Taichi's J-fluid scenes (mpm88 in 2D, mpm3d in 3D) agree on both backends and fall as
//! free fall predicts before they reach the floor.

use mpm::demos::jfluid::{Mpm3d, Mpm88, Schedule};
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
        let mut s = Mpm88::new(b, 5, Default::default()).expect("scene");
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
        let mut s = Mpm3d::new(b, 32, 9, Default::default()).expect("scene");
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

/// The grid's mass after the last substep's P2G and the particles' centre of mass and
/// second moments: what a schedule that reorders the particles must leave unchanged.
fn summary<V: Copy>(
    grid_m: &[f32],
    x: &[V],
    parts: impl Fn(V) -> Vec<f32>,
) -> (Vec<f32>, Vec<f64>) {
    let mut moments = Vec::new();
    let dims = parts(x[0]).len();
    for a in 0..dims {
        let mean = x.iter().map(|p| parts(*p)[a] as f64).sum::<f64>() / x.len() as f64;
        let var = x
            .iter()
            .map(|p| (parts(*p)[a] as f64 - mean).powi(2))
            .sum::<f64>()
            / x.len() as f64;
        moments.extend([mean, var]);
    }
    (grid_m.to_vec(), moments)
}

fn assert_same_physics(what: &str, a: &(Vec<f32>, Vec<f64>), b: &(Vec<f32>, Vec<f64>)) {
    let scale = a.0.iter().cloned().fold(0.0, f32::max);
    let worst =
        a.0.iter()
            .zip(&b.0)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f32::max);
    // The same sums in another order: a few ulps of the heaviest node.
    assert!(
        worst <= 1e-5 * scale,
        "{what}: grid mass differs by {worst} (largest node {scale})"
    );
    for (p, q) in a.1.iter().zip(&b.1) {
        assert!(
            (p - q).abs() <= 1e-7 * p.abs().max(1e-3),
            "{what}: moments {:?} vs {:?}",
            a.1,
            b.1
        );
    }
}

/// Rewriting the particles in block order (every second substep here) and the tiled P2G
/// change the order of sums only: the grid's mass and the particles' moments match the plain
/// schedule's, on the CPU and on Vulkan, in 2D and 3D.
#[test]
fn schedules_change_only_the_order_of_sums() {
    let schedules = [
        (
            "sorted",
            Schedule {
                sort_every: 2,
                tiled: false,
            },
        ),
        (
            "tiled",
            Schedule {
                sort_every: 0,
                tiled: true,
            },
        ),
        (
            "sorted and tiled",
            Schedule {
                sort_every: 3,
                tiled: true,
            },
        ),
    ];
    let mut backends = vec![("cpu", backend::cpu())];
    backends.extend(vulkan().map(|b| ("vulkan", b)));
    for (name, b) in &backends {
        let run88 = |schedule: Schedule| {
            let mut s = Mpm88::new(b, 3, schedule).expect("scene");
            for _ in 0..20 {
                s.substep().expect("substep");
            }
            let x = s.x.download().expect("x");
            summary(&s.grid_m.download().expect("grid"), &x, |p| vec![p.x, p.y])
        };
        let run3d = |schedule: Schedule| {
            let mut s = Mpm3d::new(b, 32, 4, schedule).expect("scene");
            for _ in 0..12 {
                s.substep().expect("substep");
            }
            let x = s.x.download().expect("x");
            summary(&s.grid_m.download().expect("grid"), &x, |p| {
                vec![p.x, p.y, p.z]
            })
        };
        let (plain88, plain3d) = (run88(Schedule::default()), run3d(Schedule::default()));
        for (what, schedule) in schedules {
            assert_same_physics(&format!("{name} mpm88 {what}"), &plain88, &run88(schedule));
            assert_same_physics(&format!("{name} mpm3d {what}"), &plain3d, &run3d(schedule));
        }
    }
    assert!(
        VulkanBackend::validation_messages().is_empty(),
        "{:#?}",
        VulkanBackend::validation_messages()
    );
}

/// On the CPU the sorted schedule keeps runs reproducible: the bins list their particles by
/// index, so the particles are rewritten in the same order every run and every sum adds in
/// the same order; two runs give the same bits.
#[test]
fn sorted_cpu_runs_are_reproducible() {
    let run = || {
        let schedule = Schedule {
            sort_every: 2,
            tiled: false,
        };
        let mut s = Mpm3d::new(&backend::cpu(), 32, 7, schedule).expect("scene");
        for _ in 0..9 {
            s.substep().expect("substep");
        }
        let x = s.x.download().expect("x");
        x.iter()
            .flat_map(|p| p.to_array().map(f32::to_bits))
            .collect::<Vec<u32>>()
    };
    assert!(run() == run(), "two sorted CPU runs differ");
}
