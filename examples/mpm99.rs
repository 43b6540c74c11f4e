//! Taichi's mpm99 scene: water, jelly and snow falling in a box.
//!
//! `cargo run --release --example mpm99 -- --backend vulkan --out frames`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_mpm99, RunArgs};

#[derive(Parser)]
#[command(
    about = "Taichi's mpm99 scene (9000 particles: water, jelly, snow) on the CPU or a Vulkan GPU"
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    report(run_mpm99(&Cli::parse().run))
}
