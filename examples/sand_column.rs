//! Granular column collapse: a column of dry sand (Drucker-Prager, Klar et al. 2016) on a
//! frictional floor, released at t = 0; 256^2 grid, fixed dt 1e-4. The pile comes to rest
//! after about 0.8 s (8000 substeps).
//!
//! `cargo run --release --example sand_column -- --backend cpu --steps 8000 --out out/sand_column`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs};
use mpm::scenes::sand_column;

#[derive(Parser)]
#[command(about = "A sand column collapsing into a pile (2D, solver library)")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    /// Grid cells per axis (the time step shrinks with the cells).
    #[arg(long, default_value_t = sand_column::N_GRID, value_parser = clap::value_parser!(u32).range(32..=1024))]
    n_grid: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(sand_column::new(b, cli.n_grid, cli.run.seed)?))
    }))
}
