//! Water, jelly, snow and sand in one sparse 3D grid (256^3 cells, about 1.2 million particles).
//! On 2 CPU cores a substep takes about 2 s: try `--bench --steps 3`.
//! The scene is `scenes/multi_material_3d.toml`; `mpm run scenes/multi_material_3d.toml` runs the same file with the
//! program's outputs (PLY, GIF, checkpoints).
//!
//! `cargo run --release --example multi_material_3d -- --backend cpu --steps 2000 --out out/multi_material_3d`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene_file, RunArgs};

#[derive(Parser)]
#[command(about = "scenes/multi_material_3d.toml through the solver library")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene_file(
        &cli.run,
        "multi_material_3d.toml",
        include_str!("../scenes/multi_material_3d.toml"),
    ))
}
