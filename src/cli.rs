//! The command-line front shared by the example programs.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;

use crate::backend::{self, Choice};
use crate::demos::mpm99::Mpm99;
use crate::demos::{Demo, SolverDemo};
use crate::render;
use mpm_core::solver::{D2, D3};
use mpm_core::BackendRef;

/// Flags every example takes.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Backend to run on (default: `MPM_BACKEND`, else auto).
    #[arg(long, value_enum)]
    pub backend: Option<Choice>,
    /// Number of substeps.
    #[arg(long, default_value_t = 2000)]
    pub steps: usize,
    /// Folder for PNG frames (one per frame of substeps).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Measure throughput only: no output files; the last line is `throughput: N particle-steps/s`.
    #[arg(long)]
    pub bench: bool,
    /// Substeps run before `--bench` starts timing (default: one frame's). A falling scene
    /// is not yet representative: until it lands, some momentum components are exactly
    /// zero and the GPU scatter skips their atomics (see `scripts/compare_taichi.sh`).
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Seed of the initial particle positions.
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
}

/// How the J-fluid benchmark scenes (mpm88, mpm3d) schedule their substep.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// Rewrite the particles in grid-block order every N substeps (0: never).
    #[arg(long, default_value_t = crate::demos::jfluid::Schedule::FASTEST.sort_every)]
    pub sort_every: u32,
    /// P2G through shared tiles of each block's particles (rebinned every substep).
    #[arg(long)]
    pub tiled: bool,
}

impl ScheduleArgs {
    pub fn schedule(&self) -> crate::demos::jfluid::Schedule {
        crate::demos::jfluid::Schedule {
            sort_every: self.sort_every,
            tiled: self.tiled,
        }
    }
}

/// A closed standard output (`mpm info | head -1`, `mpm99 --bench | head -1`) ends the
/// program quietly, as it ends other Unix tools: Rust ignores SIGPIPE, so without this the
/// next `println!` would panic. Call it first thing in `main`.
pub fn quit_on_closed_pipe() {
    // SAFETY: called first in `main`, before the program starts any thread; SIG_DFL is a
    // valid disposition for SIGPIPE.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Prints an error chain and turns it into a failing exit code.
pub fn report(result: Result<(), Box<dyn std::error::Error>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs Taichi's mpm99 scene with the given flags.
pub fn run_mpm99(args: &RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    run_scene(args, |b| Ok(Box::new(Mpm99::new(b, args.seed)?)))
}

/// Runs a scene file's solver (2D or 3D) with the common flags; `--seed` reseeds the random
/// particle placement.
pub fn run_scene_file(
    args: &RunArgs,
    name: &str,
    text: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let scene = crate::scene_file::Scene::parse(name, text)?;
    run_scene(args, |b| {
        let frame_time = scene.simulation.frame_time;
        Ok(match scene.dimension() {
            2 => Box::new(SolverDemo::with_frame_time(
                scene.build_seeded::<D2, 2>(b, args.seed)?,
                frame_time,
            )),
            _ => Box::new(SolverDemo::with_frame_time(
                scene.build_seeded::<D3, 3>(b, args.seed)?,
                frame_time,
            )),
        })
    })
}

/// Runs a scene with the common flags: `--bench` measures throughput, `--out` writes a PNG
/// per frame.
pub fn run_scene(
    args: &RunArgs,
    make: impl FnOnce(&BackendRef) -> crate::Result<Box<dyn Demo>>,
) -> Result<(), Box<dyn std::error::Error>> {
    let backend = backend::select(backend::choice(args.backend)?)?;
    let mut sim = make(&backend)?;
    let particles = sim.particles();
    let per_frame = sim.substeps_per_frame().max(1);
    let (grid_bytes, particle_bytes) = sim.memory();

    if args.bench {
        // Warm up: compiles pipelines on Vulkan, faults pages in on the CPU.
        let warmup = args.warmup.unwrap_or(per_frame.min(args.steps));
        sim.substeps(warmup)?;
        backend.reset_profile();
        let start = Instant::now();
        sim.substeps(args.steps)?;
        let _ = sim.frame()?; // waits for the device
        let secs = start.elapsed().as_secs_f64();
        println!("backend: {}", backend.describe());
        for t in backend.profile() {
            println!(
                "  {} loop {}: {:.3} ms per call ({} calls)",
                t.kernel,
                t.name,
                t.total.as_secs_f64() * 1e3 / t.calls.max(1) as f64,
                t.calls
            );
        }
        println!(
            "particles: {particles}, substeps: {} after {warmup} of warm-up, {:.3} ms/substep",
            args.steps,
            secs * 1e3 / args.steps as f64
        );
        println!(
            "memory: grid {} KiB, particles {} KiB; {}",
            grid_bytes / 1024,
            particle_bytes / 1024,
            crate::usage::measured(backend.as_ref())
        );
        println!(
            "throughput: {:.0} particle-steps/s",
            (particles * args.steps) as f64 / secs
        );
        return Ok(());
    }

    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create output folder {}: {e}", dir.display()))?;
    }
    let start = Instant::now();
    let mut frames = 0;
    let mut done = 0;
    while done < args.steps {
        // A frame's substeps as one batch of the backend's work.
        let n = per_frame.min(args.steps - done);
        sim.substeps(n)?;
        done += n;
        if let Some(dir) = &args.out {
            let (x, materials) = sim.frame()?;
            let path = dir.join(format!("frame_{frames:05}.png"));
            render::save_png(&render::particles_2d(&x, &materials, 512), &path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        frames += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} substeps of {particles} particles on {} in {secs:.2} s ({:.0} particle-steps/s){}",
        args.steps,
        backend.describe(),
        (particles * args.steps) as f64 / secs,
        match &args.out {
            Some(d) => format!(", {frames} frames in {}", d.display()),
            None => String::new(),
        }
    );
    Ok(())
}
