//! Fluid-solid coupling: a water column collapses onto an elastic obstacle (2D, 128^2 grid,
//! dt 2e-4, water 1000 kg/m^3, obstacle 2000 kg/m^3 with E = 1e6). The default scene of `mpm run`.
//! The scene is `scenes/dam_break.toml`; `mpm run scenes/dam_break.toml` runs the same file with the
//! program's outputs (PLY, GIF, checkpoints).
//!
//! `cargo run --release --example dam_break -- --backend cpu --steps 2000 --out out/dam_break`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene_file, RunArgs};

#[derive(Parser)]
#[command(about = "scenes/dam_break.toml through the solver library")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene_file(
        &cli.run,
        "dam_break.toml",
        include_str!("../scenes/dam_break.toml"),
    ))
}
