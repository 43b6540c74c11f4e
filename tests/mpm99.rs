//! mpm99 (Taichi's water / jelly / snow scene) on both backends: they agree, and the motion is
//! physically sane.

use mpm::demos::mpm99::Mpm99;
use mpm::glam::Vec2;
use mpm::{backend, VulkanBackend, VulkanOptions};

const SUBSTEPS: usize = 200;

fn run(backend: &mpm::BackendRef) -> (Vec<Vec2>, Vec<Vec2>) {
    let mut sim = Mpm99::new(backend, 7).expect("scene fits");
    let start = sim.x.download().expect("download");
    for _ in 0..SUBSTEPS {
        sim.substep().expect("substep runs");
    }
    (start, sim.x.download().expect("download"))
}

fn centre(xs: &[Vec2]) -> Vec2 {
    xs.iter().copied().sum::<Vec2>() / xs.len() as f32
}

#[test]
fn cpu_and_vulkan_agree_and_fall() {
    let cpu = backend::cpu();
    let (start, on_cpu) = run(&cpu);

    // Physical sanity on the CPU result: finite, inside the box, the centre of mass fell.
    // Free fall over t = 200 * 1e-4 s under g = 50 lowers a body by g t^2 / 2 = 0.01.
    assert!(
        on_cpu.iter().all(|p| p.is_finite()),
        "NaN or infinity in positions"
    );
    assert!(
        on_cpu
            .iter()
            .all(|p| (0.0..=1.0).contains(&p.x) && (0.0..=1.0).contains(&p.y)),
        "particle left the domain"
    );
    let drop = centre(&start).y - centre(&on_cpu).y;
    assert!(
        (0.005..0.011).contains(&drop),
        "centre of mass fell by {drop}, expected about 0.01 (less where water hits the floor)"
    );

    let options = VulkanOptions {
        validation: true,
        ..VulkanOptions::from_env()
    };
    let vk = match mpm_vulkan::backend_for_tests(options, "mpm99 on Vulkan") {
        Ok(Some(b)) => std::sync::Arc::new(b) as mpm::BackendRef,
        Ok(None) => return,
        Err(e) => panic!("creating the Vulkan backend failed: {e}"),
    };
    let (_, on_gpu) = run(&vk);
    // Tolerance: float atomics add in a different order on each backend and the GPU may fuse
    // multiply-adds, so bits differ from the first substep; 200 substeps amplify that to well
    // about a thousandth of a grid cell (dx = 1/128) on average and an eightieth at most
    // (measured on lavapipe: max 1.4e-6, mean 2.3e-7).
    let diffs: Vec<f32> = on_cpu
        .iter()
        .zip(&on_gpu)
        .map(|(a, b)| (*a - *b).length())
        .collect();
    let max = diffs.iter().cloned().fold(0.0, f32::max);
    let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
    println!("cpu vs vulkan after {SUBSTEPS} substeps: max {max:e}, mean {mean:e}");
    assert!(max < 1e-4, "max position difference {max}");
    assert!(mean < 1e-5, "mean position difference {mean}");
    let messages = VulkanBackend::validation_messages();
    assert!(
        messages.is_empty(),
        "Vulkan validation messages: {messages:#?}"
    );
}
