//! Two snow balls breaking apart on a wall and the floor (2D; Stomakhin et al. 2013's snow).
//! 256^2 grid, dt 5e-5: the thrown ball hits the wall after about 1800 substeps.
//! The scene is `scenes/snow_ball.toml`; `mpm run scenes/snow_ball.toml` runs the same file with the
//! program's outputs (PLY, GIF, checkpoints).
//!
//! `cargo run --release --example snow_ball -- --backend cpu --steps 2000 --out out/snow_ball`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene_file, RunArgs};

#[derive(Parser)]
#[command(about = "scenes/snow_ball.toml through the solver library")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene_file(
        &cli.run,
        "snow_ball.toml",
        include_str!("../scenes/snow_ball.toml"),
    ))
}
