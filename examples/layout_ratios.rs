//! Sparse against dense grids, timed fairly on a busy machine: the blob scene of the layout
//! benchmarks on every layout, the layouts taking turns round after round, and each phase's
//! best time kept. Prints each layout's times, its ratio to the dense grid, particle-steps per
//! second and grid memory.
//!
//! `cargo run --release --example layout_ratios -- --fill 0.5 --rounds 15`

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use mpm::backend::{self, Choice};
use mpm::demos::blob::{Blob, GridKind};

#[derive(Parser)]
struct Cli {
    #[arg(long, value_enum, default_value_t = Choice::Cpu)]
    backend: Choice,
    /// Fraction of the grid the blob covers.
    #[arg(long, default_value_t = 0.5)]
    fill: f32,
    /// Cells per axis of the grid.
    #[arg(long, default_value_t = 512)]
    n_grid: u32,
    /// Substeps each layout runs, one per round.
    #[arg(long, default_value_t = 15)]
    rounds: u32,
}

const PHASES: [&str; 4] = ["clear", "p2g", "grid", "g2p"];

/// Runs one substep phase by phase, returning each phase's time.
fn timed_substep(blob: &mut Blob) -> mpm::core::Result<[Duration; 4]> {
    let mut times = [Duration::ZERO; 4];
    let phases: [fn(&mut Blob) -> mpm::core::Result<()>; 4] =
        [Blob::clear, Blob::p2g, Blob::grid_update, Blob::g2p];
    for (time, phase) in times.iter_mut().zip(phases) {
        let start = Instant::now();
        phase(blob)?;
        *time = start.elapsed();
    }
    Ok(times)
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    if !(cli.fill > 0.0 && cli.fill <= 0.8) {
        return Err(format!("--fill must lie in (0, 0.8], got {}", cli.fill).into());
    }
    if cli.n_grid < 16 || !cli.n_grid.is_multiple_of(8) {
        return Err(format!(
            "--n-grid must be a multiple of 8 from 16, got {}",
            cli.n_grid
        )
        .into());
    }
    let be = backend::select(cli.backend)?;
    let mut blobs = GridKind::ALL
        .iter()
        .map(|&kind| Blob::new(&be, cli.n_grid, cli.fill, kind))
        .collect::<mpm::core::Result<Vec<_>>>()?;
    // Warm up: pipelines, pages, pool growth.
    for blob in &mut blobs {
        blob.substep()?;
    }
    let mut best = vec![[Duration::MAX; 4]; blobs.len()];
    for _ in 0..cli.rounds.max(1) {
        for (blob, best) in blobs.iter_mut().zip(&mut best) {
            for (b, t) in best.iter_mut().zip(timed_substep(blob)?) {
                *b = (*b).min(t);
            }
        }
    }
    let particles = blobs[0].x.len() as f64;
    let total = |b: &[Duration; 4]| b.iter().sum::<Duration>().as_secs_f64();
    let dense = total(&best[0]);
    println!(
        "{} particles, {}^2 grid, {:.0}% fill, best of {} rounds (ms):",
        particles,
        cli.n_grid,
        cli.fill * 100.0,
        cli.rounds.max(1)
    );
    println!(
        "{:<26}{:>8}{:>8}{:>8}{:>8}{:>10}{:>8}{:>18}{:>16}",
        "layout",
        PHASES[0],
        PHASES[1],
        PHASES[2],
        PHASES[3],
        "substep",
        "ratio",
        "M particle-st/s",
        "grid KiB"
    );
    for ((kind, best), blob) in GridKind::ALL.iter().zip(&best).zip(&blobs) {
        let ms = best.map(|d| d.as_secs_f64() * 1e3);
        let memory = blob.grid_memory()?;
        println!(
            "{:<26}{:>8.2}{:>8.2}{:>8.2}{:>8.2}{:>10.2}{:>8.2}{:>18.1}{:>16}",
            kind.name(),
            ms[0],
            ms[1],
            ms[2],
            ms[3],
            total(best) * 1e3,
            total(best) / dense,
            particles / total(best) / 1e6,
            format!("{} / {}", memory.reserved / 1024, memory.in_use / 1024),
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    mpm::cli::quit_on_closed_pipe();
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
