//! Water, jelly, snow and sand in one 3D scene on a sparse grid (blocks of 4^3 cells):
//! about 1.2 million particles on a 256^3 grid. Frames show the particles seen along z.
//!
//! `cargo run --release --example multi_material_3d -- --backend cpu --bench --steps 3`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs};
use mpm::scenes::multi_material_3d;

#[derive(Parser)]
#[command(about = "Water, jelly, snow and sand in 3D on a sparse grid (solver library)")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    /// Grid cells per axis, a multiple of 4; the particle count grows as its cube (256:
    /// about 1.2 million, 128: about 150,000).
    #[arg(long, default_value_t = multi_material_3d::N_GRID, value_parser = clap::value_parser!(u32).range(32..=1024))]
    n_grid: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        let built = multi_material_3d::new(b, cli.n_grid, cli.run.seed)?;
        // Grid fields per cell: velocity and velocity before the update (Vec3) and mass.
        let cell_bytes = 12 + 12 + 4;
        let mib = |cells: u64| (cells * cell_bytes) as f64 / (1u64 << 20) as f64;
        println!(
            "sparse grid {n}^3 in blocks of 4^3: {} blocks active at the start, {} reserved ({:.0} MiB of grid fields; a dense grid: {:.0} MiB)",
            built.initial_blocks,
            built.reserve,
            mib(built.reserve as u64 * 64),
            mib((cli.n_grid as u64).pow(3)),
            n = cli.n_grid,
        );
        Ok(Box::new(built.scene))
    }))
}
