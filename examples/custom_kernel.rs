//! Your own material and your own measurement as kernels: plasticine (von Mises plasticity
//! in Hencky strain) written with `#[func]` and `#[kernel]` in `mpm::demos::custom_kernel`,
//! plugged into the solver with `Solver2::add_stress_hook`, next to a jelly ball of the same
//! stiffness, both thrown onto the floor; another kernel sums the kinetic energy of each
//! material.
//!
//! `cargo run --release --example custom_kernel -- --backend vulkan --steps 4000 --out out/custom_kernel`

use std::process::ExitCode;

use clap::Parser;
use mpm::cli::{report, run_scene, RunArgs};
use mpm::demos::custom_kernel;

#[derive(Parser)]
#[command(about = "A user-written plasticine material next to jelly (2D, custom kernels)")]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    /// Grid cells per axis (the time step shrinks with the cells).
    #[arg(long, default_value_t = custom_kernel::N_GRID, value_parser = clap::value_parser!(u32).range(32..=1024))]
    n_grid: u32,
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    report(run_scene(&cli.run, |b| {
        Ok(Box::new(custom_kernel::new(b, cli.n_grid, cli.run.seed)?))
    }))
}
