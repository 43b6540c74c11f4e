//! The `mpm` program: runs scene files, describes them, lists Vulkan devices and benchmarks
//! the standard scenes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mpm::commands::{self, BenchOptions, RunOptions};

#[derive(Parser)]
#[command(name = "mpm", version, about = "Material Point Method engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a scene file (without one, the built-in 2D dam break).
    Run(RunOptions),
    /// Checks a scene file and summarises it.
    Info {
        /// Scene file (TOML); without one the built-in dam break.
        scene: Option<PathBuf>,
    },
    /// Lists Vulkan devices, their limits, and which one `--backend auto` picks.
    Devices,
    /// Times the standard scenes on the CPU and Vulkan backends.
    Bench(BenchOptions),
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let result = match Cli::parse().command {
        // Interrupted by Ctrl-C: the checkpoint is written; exit as shells expect (128 + 2).
        Command::Run(opts) => match commands::run(&opts) {
            Ok(summary) if summary.interrupted.is_some() => return ExitCode::from(130),
            other => other.map(|_| ()),
        },
        Command::Info { scene } => commands::info(scene.as_ref()),
        Command::Devices => commands::devices(),
        Command::Bench(opts) => commands::bench(&opts).map(|_| ()),
    };
    mpm::cli::report(result)
}
