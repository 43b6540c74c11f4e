//! Snow balls breaking apart: one thrown at a wall, one thrown down onto the floor (the
//! paper's snow, Stomakhin et al. 2013), 256^2 grid, fixed dt 5e-5. The thrown ball hits
//! the wall after about 0.09 s (1800 substeps); 8000 substeps show the pieces falling.
//!
//! `cargo run --release --example snow_ball -- --backend cpu --steps 8000 --out out/snow_ball`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs};
use mpm::scenes::snow_ball;

#[derive(Parser)]
#[command(about = "Two snow balls hitting a wall and the floor (2D, solver library)")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    /// Grid cells per axis (the time step shrinks with the cells).
    #[arg(long, default_value_t = snow_ball::N_GRID, value_parser = clap::value_parser!(u32).range(32..=1024))]
    n_grid: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(snow_ball::new(b, cli.n_grid, cli.run.seed)?))
    }))
}
