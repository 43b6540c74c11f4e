//! Dam break against an elastic obstacle (water 1000 kg/m^3; block 2000 kg/m^3, E = 1e6):
//! 128^2 grid, dt 2e-4, a 2 m square so that dt is stable (see `mpm::scenes::dam_break`).
//!
//! `cargo run --release --example dam_break -- --backend cpu --steps 6000 --out out/dam_break`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs};
use mpm::scenes::dam_break;

#[derive(Parser)]
#[command(about = "A water column hitting an elastic block (2D, 128^2 grid, dt 2e-4)")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    /// Side of the square domain in metres; below about 1.3 m the block's elastic waves
    /// outrun dt = 2e-4.
    #[arg(long, default_value_t = dam_break::DOMAIN)]
    domain: f32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(dam_break::new(b, cli.domain, cli.run.seed)?))
    }))
}
