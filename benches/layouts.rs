//! Sparse against dense grids: P2G, G2P and a full substep of a 2D blob covering 1%, 10% and
//! 50% of a 512^2 grid, on every backend that runs the layout, with the grid memory printed.
//!
//! `cargo bench --bench layouts` (add `-- --quick` for a shorter run).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use mpm::backend;
use mpm::demos::blob::{Blob, GridKind};

const N_GRID: u32 = 512;

fn layouts(c: &mut Criterion) {
    let mut backends = vec![("cpu", backend::cpu())];
    match backend::vulkan() {
        Ok(b) => backends.push(("vulkan", b)),
        Err(e) => eprintln!("no Vulkan device, CPU only: {e}"),
    }
    for (be_name, be) in &backends {
        let mut group = c.benchmark_group(format!("layouts/{be_name}"));
        group.sample_size(10);
        for fill in [0.01f32, 0.1, 0.5] {
            for kind in GridKind::ALL {
                let mut blob = match Blob::new(be, N_GRID, fill, kind) {
                    Ok(b) => b,
                    Err(e) => {
                        eprintln!("{be_name} {}: {e}", kind.name());
                        continue;
                    }
                };
                // Warm up (pipelines, pages) and check the layout runs on this backend.
                if let Err(e) = blob.substep() {
                    eprintln!("{be_name} {} at {fill}: skipped: {e}", kind.name());
                    continue;
                }
                let memory = blob.grid_memory().expect("memory");
                eprintln!(
                    "{be_name} {} fill {fill}: {} particles, grid memory {} KiB reserved, {} KiB in use",
                    kind.name(),
                    blob.x.len(),
                    memory.reserved / 1024,
                    memory.in_use / 1024
                );
                let id = |what: &str| BenchmarkId::new(format!("{what}/{}", kind.name()), fill);
                group.bench_function(id("p2g"), |b| {
                    b.iter(|| {
                        blob.clear().expect("clear");
                        blob.p2g().expect("p2g")
                    })
                });
                group.bench_function(id("g2p"), |b| b.iter(|| blob.g2p().expect("g2p")));
                group.bench_function(id("substep"), |b| {
                    b.iter(|| blob.substep().expect("substep"))
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, layouts);
criterion_main!(benches);
