//! The `mpm` program: runs the built-in default scene (Taichi's mpm99) with the common flags.

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_mpm99, RunArgs};

#[derive(Parser)]
#[command(
    name = "mpm",
    about = "Material Point Method engine: runs the built-in default scene (mpm99)"
)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    report(run_mpm99(&Cli::parse().run))
}
