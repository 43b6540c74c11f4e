//! Taichi's mpm3d: a cube of J-based fluid falling in a 3D box; 64^3 grid with 65,536
//! particles, or `--n-grid 128` with 524,288. Frames show the particles seen along z.
//!
//! `cargo run --release --example mpm3d -- --backend cpu --bench --steps 100`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs, ScheduleArgs};
use mpm::demos::jfluid::Mpm3d;

#[derive(Parser)]
#[command(
    about = "Taichi's mpm3d scene (n^3 / 4 particles of fluid, n^3 grid) on the CPU or a Vulkan GPU"
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
    /// Grid resolution per axis: 64 (dt 2e-4) or 128 (dt 8e-5).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(16..=256))]
    n_grid: u32,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(Mpm3d::new(
            b,
            cli.n_grid,
            cli.run.seed,
            cli.schedule.schedule(),
        )?))
    }))
}
