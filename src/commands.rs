//! The `mpm` program's subcommands: run a scene file, describe one, list Vulkan devices,
//! benchmark the standard scenes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use mpm_core::solver::{Material, Solver, Space, D2, D3};
use mpm_core::BackendRef;

use crate::backend::{self, Choice};
use crate::checkpoint::{self, Header};
use crate::scene_file::{self, Scene};
use crate::scenes;

type AnyError = Box<dyn std::error::Error>;

/// Flags of `mpm run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunOptions {
    /// Scene file (TOML); without one the built-in dam break runs.
    pub scene: Option<PathBuf>,
    /// Backend to run on.
    #[arg(long, value_enum, default_value_t = Choice::Auto)]
    pub backend: Choice,
    /// Frames to run (default: the scene's).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Output folder (default: out/<scene name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue from a checkpoint written by an earlier run of the same scene.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// CPU threads; 1 makes CPU runs bit-for-bit reproducible (and resumable as such).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    pub frames: u32,
    pub steps: u64,
    pub particles: usize,
    pub seconds: f64,
    pub peak_bytes: usize,
    /// Set when Ctrl-C stopped the run; the checkpoint it left.
    pub interrupted: Option<PathBuf>,
}

/// The backend the flags ask for.
fn backend_for(choice: Choice, threads: Option<usize>) -> Result<BackendRef, AnyError> {
    match (choice, threads) {
        (_, None) => Ok(backend::select(choice)?),
        (Choice::Cpu, Some(n)) => Ok(Arc::new(mpm_cpu::CpuBackend::with_threads(n)?)),
        (other, Some(_)) => Err(format!(
            "--threads sets CPU threads; it needs --backend cpu (not {other:?})"
        )
        .into()),
    }
}

/// Set by Ctrl-C; the run loop then writes a checkpoint and stops.
fn interrupted() -> &'static AtomicBool {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // Without a handler (e.g. one is installed already) Ctrl-C just ends the process;
        // finished frames and checkpoints stay intact either way.
        let _ = ctrlc::set_handler(move || handler_flag.store(true, Ordering::SeqCst));
        flag
    })
}

/// `mpm run`.
pub fn run(opts: &RunOptions) -> Result<Summary, AnyError> {
    let scene = scene_file::load_or_default(opts.scene.as_ref())?;
    let backend = backend_for(opts.backend, opts.threads)?;
    let stem = opts
        .scene
        .as_ref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "dam_break".into());
    let out = opts
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("out").join(stem));
    std::fs::create_dir_all(&out)
        .map_err(|e| format!("cannot create output folder {}: {e}", out.display()))?;
    let summary = match scene.dimension() {
        2 => drive::<D2, 2>(&scene, &backend, opts, &out)?,
        _ => drive::<D3, 3>(&scene, &backend, opts, &out)?,
    };
    println!(
        "{} frames, {} substeps of {} particles on {} in {:.2} s: {:.3e} particle-steps/s, peak memory {:.1} MiB{}",
        summary.frames,
        summary.steps,
        summary.particles,
        backend.describe(),
        summary.seconds,
        summary.particles as f64 * summary.steps as f64 / summary.seconds.max(1e-9),
        summary.peak_bytes as f64 / (1 << 20) as f64,
        match &summary.interrupted {
            Some(c) => format!("; interrupted, resume with --resume {}", c.display()),
            None => String::new(),
        }
    );
    print_profile(&backend);
    Ok(summary)
}

/// The per-kernel time table (GPU timestamps on Vulkan).
fn print_profile(backend: &BackendRef) {
    let profile = backend.profile();
    if profile.is_empty() {
        return;
    }
    println!(
        "{:<48} {:>6} {:>8} {:>12}",
        "kernel loop", "calls", "total s", "ms per call"
    );
    for t in profile {
        println!(
            "{:<48} {:>6} {:>8.3} {:>12.3}",
            format!("{} #{}", t.kernel, t.loop_index),
            t.calls,
            t.total.as_secs_f64(),
            t.total.as_secs_f64() * 1e3 / t.calls.max(1) as f64
        );
    }
}

/// The checkpoint file of an output folder.
pub fn checkpoint_path(out: &Path) -> PathBuf {
    out.join("checkpoint.mpmck")
}

fn drive<S: Space<D>, const D: usize>(
    scene: &Scene,
    backend: &BackendRef,
    opts: &RunOptions,
    out: &Path,
) -> Result<Summary, AnyError> {
    let mut solver: Solver<S, D> = scene.build(backend)?;
    let hash = checkpoint::scene_hash(&scene.source);
    let mut first = 0;
    if let Some(path) = &opts.resume {
        let (header, snapshot) = checkpoint::load::<S::V, S::M>(path, D as u32)?;
        if header.scene_hash != hash {
            return Err(checkpoint::CheckpointError::Mismatch {
                path: path.clone(),
                what: "another scene file".into(),
                expected: scene.file.clone(),
            }
            .into());
        }
        solver.restore(snapshot)?;
        first = header.frame;
    }
    let frames = opts.frames.unwrap_or(scene.frames());
    let frame_time = scene.simulation.frame_time as f64;
    let output = &scene.output;
    let stop = interrupted();
    let bar = ProgressBar::new(frames as u64).with_position(first as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} frames, {per_sec}, {eta} left {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let steps0 = solver.steps();
    let mut peak = 0usize;
    let mut interrupted = None;
    let mut done = first;
    'frames: for frame in first..frames {
        let target = (frame + 1) as f64 * frame_time;
        while solver.time() + 0.5 * f64::from(solver.next_dt()) < target {
            solver.substep()?;
            if stop.load(Ordering::SeqCst) {
                break 'frames;
            }
        }
        let (x, materials) = solver.positions()?;
        peak = peak.max(solver.grid.bytes() + solver.particles.bytes());
        if output.png {
            let size = solver
                .settings()
                .res
                .map(|r| r as f32 * solver.settings().dx);
            let extent = size.iter().cloned().fold(0.0f32, f32::max);
            let points: Vec<mpm_core::glam::Vec2> = x
                .iter()
                .map(|p| mpm_core::glam::Vec2::new(p[0], p[1]) / extent)
                .collect();
            let path = out.join(format!("frame_{frame:05}.png"));
            crate::render::save_png(
                &crate::render::particles_2d(&points, &materials, output.image_size),
                &path,
            )
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        done = frame + 1;
        bar.set_position(done as u64);
        if output.checkpoint_every > 0 && done % output.checkpoint_every == 0 {
            save_checkpoint(&solver, out, hash, done)?;
        }
    }
    if stop.load(Ordering::SeqCst) {
        let path = save_checkpoint(&solver, out, hash, done)?;
        interrupted = Some(path);
    }
    bar.finish_and_clear();
    Ok(Summary {
        frames: done - first,
        steps: solver.steps() - steps0,
        particles: solver.particles.count() as usize,
        seconds: start.elapsed().as_secs_f64(),
        peak_bytes: peak,
        interrupted,
    })
}

fn save_checkpoint<S: Space<D>, const D: usize>(
    solver: &Solver<S, D>,
    out: &Path,
    scene_hash: u64,
    frame: u32,
) -> Result<PathBuf, AnyError> {
    let path = checkpoint_path(out);
    let header = Header {
        dimension: D as u32,
        scene_hash,
        frame,
    };
    checkpoint::save(&path, header, &solver.snapshot()?)?;
    Ok(path)
}

/// `mpm info`: checks a scene and says what it holds.
pub fn info(path: Option<&PathBuf>) -> Result<(), AnyError> {
    let scene = scene_file::load_or_default(path)?;
    let s = &scene.simulation;
    let dx = scene.dx();
    let size: Vec<f32> = s.resolution.iter().map(|&r| r as f32 * dx).collect();
    println!("scene: {}", scene.file);
    println!(
        "  {}D, grid {:?} cells of {dx} m (domain {size:?} m), {:?} layout, {:?} splines{}",
        s.dimension,
        s.resolution,
        s.grid.layout,
        s.spline,
        if s.flip > 0.0 {
            format!(", FLIP {}", s.flip)
        } else {
            ", APIC".into()
        }
    );
    let cpu = backend::cpu();
    let (particles, grid_bytes, particle_bytes, dt, materials) = match scene.dimension() {
        2 => summarise::<D2, 2>(&scene, &cpu)?,
        _ => summarise::<D3, 3>(&scene, &cpu)?,
    };
    println!(
        "  time step: {}; {} frames of {} s ({:.0} substeps each at the first dt)",
        match s.dt {
            Some(dt) => format!("fixed {dt} s"),
            None => format!(
                "adaptive (cfl {}, at most {} s; {dt:.3e} s to start)",
                s.cfl.unwrap_or(0.5),
                s.max_dt.unwrap_or(1e-3)
            ),
        },
        s.frames,
        s.frame_time,
        s.frame_time / dt
    );
    println!("  materials:");
    for (m, spec) in materials.iter().zip(&scene.materials) {
        println!(
            "    {:<16} {:<16} density {:>7}, wave speed {:>7.2} m/s",
            spec.get_ref().name,
            m.name(),
            m.density(),
            m.wave_speed()
        );
    }
    println!(
        "  {particles} particles in {} bodies; {} colliders; {} emitters",
        scene.bodies.len(),
        scene.colliders.len(),
        scene.emitters.len()
    );
    println!(
        "  memory: grid {:.1} MiB, particles {:.1} MiB",
        grid_bytes as f64 / (1 << 20) as f64,
        particle_bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

type Summarised = (usize, usize, usize, f32, Vec<Material>);

fn summarise<S: Space<D>, const D: usize>(
    scene: &Scene,
    backend: &BackendRef,
) -> Result<Summarised, AnyError> {
    let solver: Solver<S, D> = scene.build(backend)?;
    Ok((
        solver.particles.count() as usize,
        solver.grid.bytes(),
        solver.particles.bytes(),
        solver.next_dt(),
        solver.materials.materials.clone(),
    ))
}

/// `mpm devices`.
pub fn devices() -> Result<(), AnyError> {
    let list = match mpm_vulkan::list_devices() {
        Ok(l) => l,
        Err(e) => {
            println!("no Vulkan device: {e}");
            println!("`--backend auto` runs on the {}", backend::cpu().describe());
            return Ok(());
        }
    };
    let chosen = std::env::var("MPM_VK_DEVICE")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let preferred = mpm_vulkan::preferred_device(&list);
    for (i, d) in list.iter().enumerate() {
        let mark = if chosen.is_none() && preferred == Some(i) {
            "  <- auto"
        } else {
            ""
        };
        println!("{}: {} ({}){mark}", d.index, d.name, d.device_type);
        println!(
            "    storage buffer range {} MiB, work groups {:?}, push constants {} B, subgroup {}, float atomic add {}",
            d.max_storage_buffer_range >> 20,
            d.max_compute_work_group_count,
            d.max_push_constants_size,
            d.subgroup_size,
            if d.float_atomic_add { "yes" } else { "no (compare-and-swap loops)" }
        );
    }
    if let Some(c) = chosen {
        println!("MPM_VK_DEVICE={c} selects the device (by index or name)");
    }
    Ok(())
}

/// Flags of `mpm bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchOptions {
    /// Substeps timed per scene and backend.
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// Backends to measure: cpu, vulkan or both.
    #[arg(long, default_value = "both")]
    pub backends: String,
}

/// One benchmark result.
#[derive(Debug, Clone)]
pub struct BenchRow {
    pub scene: String,
    pub backend: String,
    pub particles: usize,
    pub ms_per_step: f64,
    pub bytes: usize,
}

/// Times `steps` substeps after a frame of warm-up (pipeline compilation, page faults).
pub fn measure(sim: &mut dyn scenes::Scene, steps: usize) -> mpm_core::Result<f64> {
    for _ in 0..sim.substeps_per_frame().clamp(1, 50) {
        sim.substep()?;
    }
    let start = Instant::now();
    for _ in 0..steps {
        sim.substep()?;
    }
    sim.frame()?; // waits for the device
    Ok(start.elapsed().as_secs_f64() * 1e3 / steps.max(1) as f64)
}

/// `mpm bench`: the standard scenes on the chosen backends.
pub fn bench(opts: &BenchOptions) -> Result<Vec<BenchRow>, AnyError> {
    let mut backends: Vec<BackendRef> = Vec::new();
    if matches!(opts.backends.as_str(), "cpu" | "both") {
        backends.push(backend::cpu());
    }
    if matches!(opts.backends.as_str(), "vulkan" | "both") {
        match backend::vulkan() {
            Ok(b) => backends.push(b),
            Err(e) if opts.backends == "both" => println!("skipping Vulkan: {e}"),
            Err(e) => return Err(e.into()),
        }
    }
    if backends.is_empty() {
        return Err(format!("--backends {}: expected cpu, vulkan or both", opts.backends).into());
    }
    type Make = fn(&BackendRef) -> Result<Box<dyn scenes::Scene>, AnyError>;
    let standard: [(&str, Make); 4] = [
        ("mpm99", |b| Ok(Box::new(scenes::mpm99::Mpm99::new(b, 0)?))),
        ("mpm88", |b| Ok(Box::new(scenes::jfluid::Mpm88::new(b, 0)?))),
        ("mpm3d 64^3", |b| {
            Ok(Box::new(scenes::jfluid::Mpm3d::new(b, 64, 0)?))
        }),
        ("dam_break (solver)", |b| {
            let scene = Scene::parse("dam_break.toml", scene_file::DEFAULT_SCENE)?;
            Ok(Box::new(scenes::SolverScene {
                solver: scene.build::<D2, 2>(b)?,
                substeps_per_frame: 100,
            }))
        }),
    ];
    let mut rows = Vec::new();
    println!(
        "{:<20} {:<28} {:>10} {:>12} {:>16} {:>10}",
        "scene", "backend", "particles", "ms/substep", "particle-steps/s", "MiB"
    );
    for (name, make) in standard {
        for b in &backends {
            let mut sim = make(b)?;
            let ms = measure(sim.as_mut(), opts.steps)?;
            let (grid, parts) = sim.memory();
            let row = BenchRow {
                scene: name.into(),
                backend: b.describe(),
                particles: sim.particles(),
                ms_per_step: ms,
                bytes: grid + parts,
            };
            println!(
                "{:<20} {:<28} {:>10} {:>12.3} {:>16.3e} {:>10.1}",
                row.scene,
                row.backend,
                row.particles,
                row.ms_per_step,
                row.particles as f64 / (row.ms_per_step * 1e-3),
                row.bytes as f64 / (1 << 20) as f64
            );
            rows.push(row);
        }
    }
    Ok(rows)
}
