//! Taichi's mpm88: 8192 particles of a J-based fluid in a 128^2 grid.
//!
//! `cargo run --release --example mpm88 -- --backend vulkan --out frames`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs, ScheduleArgs};
use mpm::demos::jfluid::Mpm88;

#[derive(Parser)]
#[command(
    about = "Taichi's mpm88 scene (8192 particles of fluid, 128^2 grid) on the CPU or a Vulkan GPU"
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(Mpm88::new(
            b,
            cli.run.seed,
            cli.schedule.schedule(),
        )?))
    }))
}
