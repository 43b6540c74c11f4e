//! Granular column collapse: a sand column (Drucker-Prager, Klar et al. 2016) slumps into a pile.
//! 256^2 grid, dt 1e-4; it comes to rest after about 0.85 s (8500 substeps).
//! The scene is `scenes/sand_column.toml`; `mpm run scenes/sand_column.toml` runs the same file with the
//! program's outputs (PLY, GIF, checkpoints).
//!
//! `cargo run --release --example sand_column -- --backend cpu --steps 2000 --out out/sand_column`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene_file, RunArgs};

#[derive(Parser)]
#[command(about = "scenes/sand_column.toml through the solver library")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene_file(
        &cli.run,
        "sand_column.toml",
        include_str!("../scenes/sand_column.toml"),
    ))
}
