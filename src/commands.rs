//! The `mpm` program's subcommands: run a scene file, describe one, list Vulkan devices,
//! benchmark the standard scenes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use image::RgbImage;
use indicatif::{ProgressBar, ProgressStyle};
use mpm_core::glam::{Vec2, Vec3};
use mpm_core::solver::{
    Collider, Condition, HeatBoundary, Material, MaterialId, Region, Sampling, Shape, Solver,
    Space, Thermal, D2, D3,
};
use mpm_core::BackendRef;

use crate::backend::{self, Choice};
use crate::checkpoint::{self, Header};
use crate::demos;
use crate::output::{self, GifRecorder};
use crate::peers::{writes_outputs, FrameParticles, Peers, Placement};
use crate::render::{self, Colouring, View3d};
use crate::scene_file::{self, Scene};
use crate::view::{Input, Shown};
use crate::VulkanOptions;

type AnyError = Box<dyn std::error::Error>;

/// Flags of `mpm run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunOptions {
    /// Scene file (TOML); without one the built-in dam break runs.
    pub scene: Option<PathBuf>,
    /// Backend to run on (default: `MPM_BACKEND`, else auto).
    #[arg(long, value_enum)]
    pub backend: Option<Choice>,
    /// Frames to run (default: the scene's).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Output folder (default: out/<scene name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue from a checkpoint written by an earlier run of the same scene.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// CPU threads, 1 to 4 per core (CPU runs are reproducible for a given thread count on
    /// dense grids; with 1 thread also on sparse grids).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Show the run in a window (left click: emit water; right drag: push material).
    #[arg(long)]
    pub view: bool,
    /// Print the particles' kinetic, strain and gravitational energy after every frame.
    #[arg(long)]
    pub energy: bool,
    /// Under `mpirun`: move the ranks' slabs with the particles every N frames (0: never).
    #[arg(long, default_value_t = 10)]
    pub rebalance_every: u32,
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    pub frames: u32,
    pub steps: u64,
    pub particles: usize,
    pub seconds: f64,
    pub peak_bytes: usize,
    /// Particles removed because they left the domain (beyond the walls or with none).
    pub removed: u64,
    /// Set when Ctrl-C stopped the run; the checkpoint it left.
    pub interrupted: Option<PathBuf>,
    /// Under mpirun: how the work was shared (on rank 0).
    pub ranks: Option<String>,
}

/// The backend the flags ask for. On the CPU runs are reproducible (float sums into dense
/// fields in a fixed order), so that a resumed run continues bit for bit.
fn backend_for(
    flag: Option<Choice>,
    threads: Option<usize>,
    placement: &Placement,
) -> Result<BackendRef, AnyError> {
    let choice = backend::choice(flag)?;
    let cpu = |threads: Option<usize>| -> Result<BackendRef, AnyError> {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let threads = match (threads, placement.ranks_on_machine) {
            (Some(n), _) => Some(thread_count(n)?),
            // Ranks on one machine share its cores rather than each taking all of them.
            (None, ranks) if ranks > 1 => Some((cores / ranks).max(1)),
            (None, _) => None,
        };
        let cpu = mpm_cpu::CpuBackend::on_main_thread(threads)?;
        Ok(Arc::new(cpu))
    };
    let options = || {
        let env = VulkanOptions::from_env();
        VulkanOptions {
            device: placement.device.clone().or(env.device.clone()),
            ..env
        }
    };
    match (choice, threads) {
        (Choice::Cpu, n) => cpu(n),
        (Choice::Auto, None) => match backend::select_with(choice, options())? {
            b if b.kind() == mpm_core::BackendKind::Cpu => cpu(None),
            b => Ok(b),
        },
        (Choice::Vulkan, None) => Ok(backend::select_with(choice, options())?),
        (other, Some(_)) => Err(format!(
            "--threads sets CPU threads; it needs --backend cpu (not {other:?})"
        )
        .into()),
    }
}

/// Most threads `--threads` takes per core: beyond a few per core they only add overhead.
const THREADS_PER_CORE: usize = 4;

/// `--threads n`, checked: at least one, at most [`THREADS_PER_CORE`] per core.
fn thread_count(n: usize) -> Result<usize, AnyError> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let most = THREADS_PER_CORE * cores;
    match n {
        0 => Err("--threads 0: a run needs at least one thread".into()),
        n if n > most => Err(format!(
            "--threads {n}: this machine has {cores} cores; more than {most} threads only add \
             overhead"
        )
        .into()),
        n => Ok(n),
    }
}

/// Set by Ctrl-C, SIGTERM or SIGHUP; the run loop then writes a checkpoint and stops.
fn interrupted() -> &'static AtomicBool {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // ctrlc's `termination` feature takes SIGTERM and SIGHUP too. Without a handler
        // (e.g. one is installed already) a signal just ends the process; finished frames
        // and checkpoints stay intact either way.
        let _ = ctrlc::set_handler(move || handler_flag.store(true, Ordering::SeqCst));
        flag
    })
}

/// `mpm run`; under `mpirun` (built with the feature `mpi`) one rank of a run shared by
/// all, rank 0 writing the outputs. A rank that fails ends every rank's run, naming itself.
pub fn run(opts: &RunOptions) -> Result<Summary, AnyError> {
    #[cfg(feature = "mpi")]
    if crate::ranks::Mpi::launched() {
        let mpi = crate::ranks::Mpi::start().ok_or("MPI was started already")?;
        if mpi.size() > 1 {
            let peers = Peers::new(crate::ranks::world_ranks);
            return match run_on(opts, Some(&peers), &mpi.placement()) {
                Ok(summary) => Ok(summary),
                Err(e) => {
                    eprintln!("mpm: rank {} of {}: error: {e}", mpi.rank(), mpi.size());
                    mpi.abort(1)
                }
            };
        }
    }
    #[cfg(not(feature = "mpi"))]
    if let Some(n) = std::env::var("OMPI_COMM_WORLD_SIZE")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|&n| n > 1)
    {
        return Err(format!(
            "started by mpirun on {n} ranks, but this mpm was built without MPI: every rank \
             would run the whole scene; build it with `--features mpi`"
        )
        .into());
    }
    run_on(opts, None, &Placement::default())
}

fn run_on(
    opts: &RunOptions,
    peers: Option<&Peers>,
    placement: &Placement,
) -> Result<Summary, AnyError> {
    // From the start: a signal during setup (building 10M particles takes a while) stops the
    // run before its first frame, with a checkpoint, as one during stepping does.
    let _ = interrupted();
    if peers.is_some() && opts.view {
        return Err("--view shows a run of one process; under mpirun leave it out".into());
    }
    let root = writes_outputs(peers);
    let scene = scene_file::load_or_default(opts.scene.as_ref())?;
    let backend = backend_for(opts.backend, opts.threads, placement)?;
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
    match crate::files::remove_stale_temporaries(&out).map(|n| if root { n } else { 0 }) {
        Ok(0) => {}
        Ok(n) => eprintln!(
            "mpm: removed {n} temporary file(s) that a killed run left in {}",
            out.display()
        ),
        Err(e) => eprintln!(
            "mpm: cannot clear temporary files in {}: {e}",
            out.display()
        ),
    }
    let frames = opts.frames.unwrap_or(scene.frames());
    if let (true, Ok(stale)) = (root, crate::files::frames_beyond(&out, frames)) {
        if let (Some(first), Some(last)) = (stale.first(), stale.last()) {
            let name = |p: &PathBuf| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            };
            eprintln!(
                "mpm: warning: {} holds {} frame file(s) of an earlier, longer run ({} .. {}) that \
                 this run of {frames} frames will not replace; remove them or choose another --out",
                out.display(),
                stale.len(),
                name(first),
                name(last),
            );
        }
    }
    let summary = match scene.dimension() {
        2 => drive::<D2, 2>(&scene, &backend, opts, &out, peers)?,
        _ => drive::<D3, 3>(&scene, &backend, opts, &out, peers)?,
    };
    if !root {
        return Ok(summary);
    }
    if let Some(ranks) = &summary.ranks {
        println!("{ranks}");
    }
    println!(
        "{} frames, {} substeps of {} particles on {} in {:.2} s: {:.3e} particle-steps/s, peak field memory {:.1} MiB ({:.0} bytes per particle; {}){}{}",
        summary.frames,
        summary.steps,
        summary.particles,
        backend.describe(),
        summary.seconds,
        summary.particles as f64 * summary.steps as f64 / summary.seconds.max(1e-9),
        summary.peak_bytes as f64 / (1 << 20) as f64,
        summary.peak_bytes as f64 / summary.particles.max(1) as f64,
        crate::usage::measured(backend.as_ref()),
        match summary.removed {
            0 => String::new(),
            n => format!("; {n} particles left the domain and were removed"),
        },
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
    let mut profile = backend.profile();
    profile.sort_by_key(|t| std::cmp::Reverse(t.total));
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
            format!("{} {}", short_name(&t.kernel), t.name),
            t.calls,
            t.total.as_secs_f64(),
            t.total.as_secs_f64() * 1e3 / t.calls.max(1) as f64
        );
    }
}

/// A kernel's name without its module path, for tables.
fn short_name(qualified: &str) -> &str {
    qualified.rsplit("::").next().unwrap_or(qualified)
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
    peers: Option<&Peers>,
) -> Result<Summary, AnyError> {
    let mut solver: Solver<S, D> = scene.build(backend)?;
    let hash = checkpoint::scene_hash(&scene.source);
    let mut first = 0;
    // Per-rank checkpoints (a manifest): each rank restores its own particles, and the
    // cuts are made anew from them. One process's checkpoint: every rank restores it whole
    // and keeps its slab.
    let own = match &opts.resume {
        Some(path) => rank_checkpoint(path, peers)?,
        None => None,
    };
    if let (Some(p), Some(_)) = (peers, &own) {
        solver.decompose(p.ranks())?;
    }
    if let Some(path) = own.as_ref().or(opts.resume.as_ref()) {
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
    if let Some(p) = peers {
        match own {
            Some(_) => solver.rebalance()?,
            None => solver.decompose(p.ranks())?,
        }
    }
    let frames = opts.frames.unwrap_or(scene.frames());
    if opts.resume.is_some() && frames <= first {
        return Err(format!(
            "the checkpoint is at frame {first} and the run ends at frame {frames}: nothing to \
             run (give --frames above {first})"
        )
        .into());
    }
    let bar = match writes_outputs(peers) {
        true => ProgressBar::new(frames as u64),
        false => ProgressBar::hidden(),
    }
    .with_position(first as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} frames, {per_sec}, {eta} left {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let steps0 = solver.steps();
    let removed0 = solver.removed();
    let mut run = Run {
        scene,
        solver,
        out: out.to_path_buf(),
        hash,
        frame: first,
        frames,
        peak: 0,
        bar,
        pusher: None,
        energy: opts.energy,
        gif: (scene.output.gif && writes_outputs(peers))
            .then(|| GifRecorder::new(out.join("preview.gif"), 256, 40)),
        peers,
        rebalance_every: opts.rebalance_every,
        stopped: false,
    };
    let mut headless = !opts.view;
    if opts.view {
        let title = format!("mpm: {}", scene.file);
        let size = scene.output.image_size;
        match crate::view::show(&title, size, &mut |input| run.next_frame(input))? {
            Shown::NoDisplay(why) => {
                eprintln!("mpm: no display for --view ({why}); running headless");
                headless = true;
            }
            Shown::Finished | Shown::Closed => {}
        }
    }
    if headless {
        while run.next_frame(&Input::default())?.is_some() {}
    }
    let interrupted = if run.stopped || run.frame < run.frames {
        Some(save_checkpoint(&run.solver, out, hash, run.frame, peers)?)
    } else {
        None
    };
    run.bar.finish_and_clear();
    // Also at the end: a run interrupted before its first frame ended held its fields too.
    run.sample_peak();
    // Particles, removals and peak memory of all ranks; the imbalance of the load.
    let particles = run.solver.particles.count() as f64;
    let mut totals = [
        particles,
        (run.solver.removed() - removed0) as f64,
        run.peak as f64,
    ];
    let mut ranks = None;
    if let Some(p) = peers {
        p.sum(&mut totals)?;
        let most = p.max(particles)?;
        let report = run.solver.decomposition();
        let mut halo = [report.as_ref().map_or(0, |r| r.halo_bytes) as f64];
        p.sum(&mut halo)?;
        let steps = (run.solver.steps() - steps0).max(1) as f64;
        ranks = Some(format!(
            "{} ranks, cut across x at {:?}: at most {most} particles on one, {:.2}x the mean; \
             halo exchange {:.1} kB per substep in all",
            p.size(),
            report.map(|r| r.slabs.cuts).unwrap_or_default(),
            most * p.size() as f64 / totals[0].max(1.0),
            halo[0] / steps / 1e3,
        ));
    }
    Ok(Summary {
        frames: run.frame - first,
        steps: run.solver.steps() - steps0,
        particles: totals[0] as usize,
        seconds: start.elapsed().as_secs_f64(),
        peak_bytes: totals[2] as usize,
        removed: totals[1] as u64,
        interrupted,
        ranks,
    })
}

/// The manifest's file name of per-rank checkpoints.
const RANKS_MANIFEST: &str = "checkpoint.ranks";

/// This rank's checkpoint file of per-rank checkpoints.
fn rank_checkpoint_path(out: &Path, rank: usize) -> PathBuf {
    out.join(format!("checkpoint.rank{rank}.mpmck"))
}

/// This rank's file where `path` is a manifest of per-rank checkpoints (which must have been
/// written by as many ranks as run now); `None` for one process's checkpoint.
fn rank_checkpoint(path: &Path, peers: Option<&Peers>) -> Result<Option<PathBuf>, AnyError> {
    if path.file_name().and_then(|n| n.to_str()) != Some(RANKS_MANIFEST) {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ranks: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("ranks = "))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("{} names no `ranks = N`", path.display()))?;
    match peers {
        Some(p) if p.size() == ranks => {
            let dir = path.parent().unwrap_or(Path::new("."));
            Ok(Some(rank_checkpoint_path(dir, p.rank())))
        }
        _ => Err(format!(
            "{} holds the checkpoints of {ranks} ranks: resume it with `mpirun -n {ranks}`",
            path.display()
        )
        .into()),
    }
}

/// A run in progress: the solver, where its outputs go and how far it got.
struct Run<'a, S: Space<D>, const D: usize> {
    scene: &'a Scene,
    solver: Solver<S, D>,
    out: PathBuf,
    hash: u64,
    /// Frames done.
    frame: u32,
    frames: u32,
    peak: usize,
    bar: ProgressBar,
    /// The collider that follows a right drag in the view.
    pusher: Option<usize>,
    /// Print the energy report after every frame.
    energy: bool,
    gif: Option<GifRecorder>,
    /// The other ranks of a run under mpirun.
    peers: Option<&'a Peers>,
    rebalance_every: u32,
    /// The run stopped on a signal (on every rank at the same substep).
    stopped: bool,
}

/// A point of 2 or 3 coordinates in 3D (z = 0 in 2D).
fn vec3_of<const D: usize>(p: &[f32; D]) -> Vec3 {
    Vec3::from_array(std::array::from_fn(|a| if a < D { p[a] } else { 0.0 }))
}

impl<S: Space<D>, const D: usize> Run<'_, S, D> {
    /// Takes the fields' bytes now into the run's peak (the grid grows as it is reached).
    fn sample_peak(&mut self) {
        let now = self.solver.grid.bytes() + self.solver.particles.bytes();
        self.peak = self.peak.max(now);
    }

    /// The domain's largest extent: pictures show `[0, extent]` squares.
    fn extent(&self) -> f32 {
        let s = self.solver.settings();
        s.res.iter().map(|&r| r as f32 * s.dx).fold(0.0, f32::max)
    }

    /// Advances one frame, writes its outputs and returns its picture; `None` once the run
    /// is over or interrupted.
    fn next_frame(&mut self, input: &Input) -> Result<Option<RgbImage>, AnyError> {
        if self.frame >= self.frames || self.stopping()? {
            return Ok(None);
        }
        self.apply(input)?;
        let frame_time = f64::from(self.scene.simulation.frame_time);
        let target = f64::from(self.frame + 1) * frame_time;
        // The frame's substeps as one batch of the backend's work.
        let backend = self.solver.backend().clone();
        let stopped = mpm_core::batched(backend.as_ref(), || -> Result<bool, AnyError> {
            while self.solver.time() + 0.5 * f64::from(self.solver.next_dt()) < target {
                self.solver.substep().map_err(|e| self.scene.explain(e))?;
                if self.stopping()? {
                    return Ok(true);
                }
            }
            Ok(false)
        })?;
        if stopped {
            return Ok(None);
        }
        let root = writes_outputs(self.peers);
        if self.energy {
            let mut e = self.solver.energy().map_err(|e| self.scene.explain(e))?;
            if let Some(p) = self.peers {
                let mut parts = [
                    e.kinetic,
                    e.affine,
                    e.strain,
                    e.gravity,
                    e.unmodelled as f64,
                ];
                p.sum(&mut parts)?;
                [e.kinetic, e.affine, e.strain, e.gravity] =
                    [parts[0], parts[1], parts[2], parts[3]];
                e.unmodelled = parts[4] as usize;
            }
            // Printed around the bar, which hides itself (and its `println`) off a terminal.
            let line = format!(
                "frame {}: t = {:.4} s, kinetic {:.6e} (affine {:.3e}), strain {:.6e}, gravity {:.6e}, total {:.6e} J{}",
                self.frame + 1,
                self.solver.time(),
                e.kinetic,
                e.affine,
                e.strain,
                e.gravity,
                e.total(),
                match e.unmodelled {
                    0 => String::new(),
                    n => format!(" ({n} user-material particles without strain energy)"),
                }
            );
            if root {
                self.bar.suspend(|| println!("{line}"));
            }
        }
        let (x, materials) = self.solver.positions().map_err(|e| self.scene.explain(e))?;
        let n = x.len();
        let mut v = self.solver.particles.v.download()?;
        v.truncate(n);
        let v: Vec<[f32; D]> = v.into_iter().map(S::components).collect();
        self.sample_peak();
        let output = &self.scene.output;
        let colouring = Colouring::from(output);
        // What the colouring reads besides the materials.
        let values: Vec<f32> = match colouring {
            Colouring::Material => Vec::new(),
            Colouring::Speed { .. } => v.iter().map(|v| vec3_of(v).length()).collect(),
            Colouring::Temperature { .. } => {
                let mut t = self.solver.particles.temperature.download()?;
                t.truncate(n);
                t
            }
            Colouring::Damage => {
                // A brittle particle's `jp` is its integrity.
                let jp = self.solver.particles.jp.download()?;
                let table = &self.solver.materials;
                materials
                    .iter()
                    .zip(jp)
                    .map(|(&id, jp)| match table.get(MaterialId(id)) {
                        Some(Material::Brittle { .. }) => 1.0 - jp,
                        _ => 0.0,
                    })
                    .collect()
            }
        };
        // Under mpirun every rank's particles, drawn and written by rank 0.
        let mine = FrameParticles {
            x,
            v,
            materials,
            values,
        };
        let picture = match mine.gather(self.peers)? {
            Some(all) => self.write_frame(all)?,
            // Rank 0 draws the frame; the others have none to show.
            None => RgbImage::new(1, 1),
        };
        self.frame += 1;
        self.bar.set_position(self.frame as u64);
        let output = &self.scene.output;
        if output.checkpoint_every > 0 && self.frame.is_multiple_of(output.checkpoint_every) {
            save_checkpoint(&self.solver, &self.out, self.hash, self.frame, self.peers)?;
        }
        if self.peers.is_some()
            && self.rebalance_every > 0
            && self.frame.is_multiple_of(self.rebalance_every)
        {
            self.solver.rebalance().map_err(|e| self.scene.explain(e))?;
        }
        Ok(Some(picture))
    }

    /// Whether the run stops now on a signal: under mpirun when any rank got one, so that
    /// all stop at the same substep.
    fn stopping(&mut self) -> Result<bool, AnyError> {
        let here = interrupted().load(Ordering::SeqCst);
        self.stopped = match self.peers {
            Some(p) => p.any(here)?,
            None => here,
        };
        Ok(self.stopped)
    }

    /// Draws a frame's particles and writes its outputs; returns the picture.
    fn write_frame(&mut self, all: FrameParticles<D>) -> Result<RgbImage, AnyError> {
        let FrameParticles {
            x,
            v,
            materials,
            values,
        } = all;
        let points3 = || x.iter().map(vec3_of).collect::<Vec<Vec3>>();
        let velocities3 = || v.iter().map(vec3_of).collect::<Vec<Vec3>>();
        let output = &self.scene.output;
        let colouring = Colouring::from(output);
        let size = output.image_size;
        let picture = if D == 2 {
            let extent = self.extent();
            let points: Vec<Vec2> = x.iter().map(|p| Vec2::new(p[0], p[1]) / extent).collect();
            render::particles_2d_by(&points, &values, &materials, size, colouring)
        } else {
            let s = self.solver.settings();
            let max = Vec3::from_array(std::array::from_fn(|a| s.res[a % D] as f32 * s.dx));
            let mut view = View3d::new(Vec3::ZERO, max, size, size);
            view.colouring = colouring;
            render::particles_3d(&points3(), &values, &materials, &view)
        };
        let frame = self.frame;
        if output.png {
            let path = self.out.join(format!("frame_{frame:05}.png"));
            render::save_png(&picture, &path)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        if output.ply {
            let path = self.out.join(format!("frame_{frame:05}.ply"));
            output::write_ply_3d(&path, &points3(), &velocities3(), &materials)?;
        }
        if let Some(gif) = &mut self.gif {
            gif.push(&picture)?;
            // Rewritten every ten frames, so an interrupted run keeps a preview too.
            if (frame + 1).is_multiple_of(10) || frame + 1 == self.frames {
                gif.write()?;
            }
        }
        Ok(picture)
    }

    /// Mouse input from the view (2D scenes): clicks emit a ball of the scene's first water
    /// (or first material); a right drag pushes with a sphere that follows the cursor.
    fn apply(&mut self, input: &Input) -> Result<(), AnyError> {
        if D != 2 || self.solver.materials.materials.is_empty() {
            return Ok(());
        }
        let extent = self.extent();
        let dx = self.solver.settings().dx;
        let (lo, hi) = self.solver.interior();
        let radius = 4.0 * dx;
        let inside = |p: [f32; 2]| -> [f32; D] {
            std::array::from_fn(|a| {
                (p[a % 2] * extent).clamp(lo[a] + radius + dx, hi[a] - radius - dx)
            })
        };
        let water = self
            .solver
            .materials
            .materials
            .iter()
            .position(|m| matches!(m, Material::Water { .. }))
            .unwrap_or(0);
        for &click in &input.clicks {
            self.solver.add_particles(
                &Region::Sphere {
                    centre: inside(click),
                    radius,
                },
                Sampling::Jittered,
                dx / 2.0,
                MaterialId(water as i32),
                [0.0; D],
            )?;
        }
        let frame_time = self.scene.simulation.frame_time;
        match (input.drag, self.pusher) {
            (Some(at), index) => {
                let centre = inside(at);
                let previous = index.and_then(|i| match self.solver.colliders()[i].shape {
                    Shape::Sphere { centre, .. } => Some(centre),
                    _ => None,
                });
                let velocity: [f32; 3] = std::array::from_fn(|a| match previous {
                    Some(p) if a < D => (centre[a] - p[a]) / frame_time,
                    _ => 0.0,
                });
                let collider = Collider {
                    shape: Shape::Sphere {
                        centre: std::array::from_fn(|a| if a < D { centre[a] } else { 0.0 }),
                        radius: 2.0 * radius,
                    },
                    condition: Condition::Sticky,
                    velocity,
                    heat: HeatBoundary::Insulated,
                };
                match index {
                    Some(i) => self.solver.set_collider(i, collider)?,
                    None => {
                        self.solver.add_collider(collider)?;
                        self.pusher = Some(self.solver.colliders().len() - 1);
                    }
                }
            }
            (None, Some(i)) => {
                self.solver.remove_collider(i)?;
                self.pusher = None;
            }
            (None, None) => {}
        }
        Ok(())
    }
}

/// Writes the run's checkpoint; returns the path to resume from. Under mpirun each rank
/// writes its own, and rank 0 then a manifest naming how many (the path to resume from).
fn save_checkpoint<S: Space<D>, const D: usize>(
    solver: &Solver<S, D>,
    out: &Path,
    scene_hash: u64,
    frame: u32,
    peers: Option<&Peers>,
) -> Result<PathBuf, AnyError> {
    let header = Header {
        dimension: D as u32,
        scene_hash,
        frame,
    };
    let Some(p) = peers else {
        let path = checkpoint_path(out);
        checkpoint::save(&path, header, &solver.snapshot()?)?;
        return Ok(path);
    };
    checkpoint::save(
        &rank_checkpoint_path(out, p.rank()),
        header,
        &solver.snapshot()?,
    )?;
    // Every rank's file is whole before the manifest names them.
    p.any(false)?;
    let manifest = out.join(RANKS_MANIFEST);
    if p.is_root() {
        let text = format!(
            "# mpm checkpoint of a run on several ranks: resume with mpirun -n {} mpm run \
             --resume {}\nranks = {}\nframe = {frame}\n",
            p.size(),
            manifest.display(),
            p.size()
        );
        crate::files::write_atomically(&manifest, |f| {
            use std::io::Write;
            f.write_all(text.as_bytes())
        })
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
    }
    Ok(manifest)
}

/// `mpm info`: checks a scene and says what it holds.
pub fn info(path: Option<&PathBuf>) -> Result<(), AnyError> {
    let scene = scene_file::load_or_default(path)?;
    let s = &scene.simulation;
    let dx = scene.dx();
    let size: Vec<f32> = s.resolution.iter().map(|&r| r as f32 * dx).collect();
    println!("scene: {}", scene.file);
    println!(
        "  {}D, grid {:?} cells of {dx} m (domain {size:?} m), {} layout, {} splines{}",
        s.dimension,
        s.resolution,
        s.grid.layout.name(),
        s.spline.name(),
        if s.flip > 0.0 {
            format!(", FLIP {}", s.flip)
        } else {
            ", APIC".into()
        }
    );
    let cpu = backend::cpu();
    let (particles, grid_bytes, particle_bytes, dt, materials, thermal, colliders) =
        match scene.dimension() {
            2 => summarise::<D2, 2>(&scene, &cpu)?,
            _ => summarise::<D3, 3>(&scene, &cpu)?,
        };
    let mut options = Vec::new();
    if s.damping > 0.0 {
        options.push(format!("damping {} 1/s", s.damping));
    }
    if let Some(v) = &s.bulk_viscosity {
        options.push(format!(
            "bulk viscosity (linear {}, quadratic {})",
            v.linear, v.quadratic
        ));
    }
    if s.f_bar {
        options.push("F-bar anti-locking".to_string());
    }
    if let Some(h) = &s.heat {
        options.push(match h.wall_temperature {
            Some(t) => format!("heat conduction (walls held at {t} K)"),
            None => "heat conduction (walls insulated)".to_string(),
        });
    }
    let tensions = scene
        .materials
        .iter()
        .filter(|m| m.get_ref().surface_tension.is_some_and(|t| t > 0.0))
        .count();
    if tensions > 0 {
        options.push(format!("surface tension ({tensions} liquids)"));
    }
    if !options.is_empty() {
        println!("  options: {}", options.join(", "));
    }
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
    for ((m, t), spec) in materials.iter().zip(&thermal).zip(&scene.materials) {
        println!(
            "    {:<16} {:<16} density {:>7}, wave speed {:>7.2} m/s",
            spec.get_ref().name,
            m.name(),
            m.density(),
            m.wave_speed()
        );
        if spec.get_ref().thermal().is_some() {
            println!(
                "      starts at {} K; conductivity {} W/(m K), specific heat {} J/(kg K){}",
                t.temperature,
                t.conductivity,
                t.specific_heat,
                match t.softening.is_empty() {
                    true => String::new(),
                    false => format!("; shear modulus scaled by {:?} (K, scale)", t.softening),
                }
            );
        }
        if let Some(sigma) = spec.get_ref().surface_tension.filter(|&t| t > 0.0) {
            let unit = if scene.dimension() == 2 { "N" } else { "N/m" };
            println!("      surface tension {sigma} {unit}");
        }
    }
    println!(
        "  {particles} particles in {} bodies; {} colliders; {} emitters",
        scene.bodies.len(),
        scene.colliders.len(),
        scene.emitters.len()
    );
    for c in &colliders {
        match c.heat {
            HeatBoundary::Fixed(t) => println!("    collider: {}, held at {t} K", c.shape),
            HeatBoundary::Insulated => println!("    collider: {}", c.shape),
        }
    }
    println!(
        "  memory: grid {:.1} MiB, particles {:.1} MiB",
        grid_bytes as f64 / (1 << 20) as f64,
        particle_bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

type Summarised = (
    usize,
    usize,
    usize,
    f32,
    Vec<Material>,
    Vec<Thermal>,
    Vec<Collider>,
);

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
        solver.materials.thermal.clone(),
        solver.colliders().to_vec(),
    ))
}

/// `mpm devices`.
pub fn devices() -> Result<(), AnyError> {
    let list = match mpm_vulkan::list_devices() {
        Ok(l) => l,
        Err(e) => {
            println!("{e}");
            println!("`--backend auto` runs on the {}", backend::cpu().describe());
            return Ok(());
        }
    };
    let cpu_only = |i: usize| list[i].device_type == "cpu";
    let chosen = mpm_vulkan::VulkanOptions::from_env().device;
    let preferred = mpm_vulkan::preferred_device(&list);
    let named = chosen
        .as_deref()
        .and_then(|c| mpm_vulkan::named_device(&list, c));
    for (i, d) in list.iter().enumerate() {
        let mark = if named == Some(i) {
            "  <- MPM_VK_DEVICE"
        } else if chosen.is_none() && preferred == Some(i) && !cpu_only(i) {
            "  <- auto"
        } else {
            ""
        };
        println!("{}: {} ({}){mark}", d.index, d.name, d.device_type);
        println!(
            "    storage buffer range {} MiB, work groups {:?}, push constants {} B, shared memory {} KiB, \
             storage buffers per shader {}, subgroup {}, float atomic add {}, inf/NaN kept {}",
            d.max_storage_buffer_range >> 20,
            d.max_compute_work_group_count,
            d.max_push_constants_size,
            d.max_shared_memory >> 10,
            d.max_storage_buffers,
            d.subgroup_size,
            if d.float_atomic_add { "yes" } else { "no (compare-and-swap loops)" },
            if d.inf_nan_preserve {
                "yes"
            } else {
                "not guaranteed (NaN checks and saturating casts may not hold)"
            }
        );
    }
    match (chosen, preferred) {
        (Some(c), _) if named.is_none() => {
            return Err(format!(
                "MPM_VK_DEVICE={c} matches none of these devices (give an index or part of a name)"
            )
            .into())
        }
        (Some(c), _) => println!("MPM_VK_DEVICE={c} selects the marked device"),
        (None, Some(i)) if cpu_only(i) => println!(
            "`--backend auto` runs on the {}: the only Vulkan device runs on the CPU, slower \
             (`--backend vulkan` uses it)",
            backend::cpu().describe()
        ),
        _ => {}
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
    /// Substeps run before timing each scene (default: one frame's, at most 50). The
    /// standard scenes fall at first, and a falling scene is not representative: until it
    /// lands, some momentum components are exactly zero and the GPU scatter skips their
    /// atomics. 1000 puts every scene past its landing.
    #[arg(long)]
    pub warmup: Option<usize>,
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

/// Times `steps` substeps after `warmup` of them (default: a frame's, for pipeline compilation
/// and page faults).
pub fn measure(
    sim: &mut dyn demos::Demo,
    steps: usize,
    warmup: Option<usize>,
) -> crate::Result<f64> {
    sim.substeps(warmup.unwrap_or(sim.substeps_per_frame().clamp(1, 50)))?;
    let start = Instant::now();
    sim.substeps(steps)?;
    sim.frame()?; // waits for the device
    Ok(start.elapsed().as_secs_f64() * 1e3 / steps.max(1) as f64)
}

/// A scene file's solver as a benchmark scene.
fn solver_scene<S: Space<D>, const D: usize>(
    backend: &BackendRef,
    name: &str,
    text: &str,
) -> Result<Box<dyn demos::Demo>, AnyError> {
    let scene = Scene::parse(name, text)?;
    Ok(Box::new(demos::SolverDemo::with_frame_time(
        scene.build::<S, D>(backend)?,
        scene.simulation.frame_time,
    )))
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
    type Make = fn(&BackendRef) -> Result<Box<dyn demos::Demo>, AnyError>;
    let standard: [(&str, Make); 6] = [
        ("mpm99", |b| Ok(Box::new(demos::mpm99::Mpm99::new(b, 0)?))),
        ("mpm88", |b| {
            Ok(Box::new(demos::jfluid::Mpm88::new(
                b,
                0,
                demos::jfluid::Schedule::FASTEST,
            )?))
        }),
        ("mpm3d 64^3", |b| {
            Ok(Box::new(demos::jfluid::Mpm3d::new(
                b,
                64,
                0,
                demos::jfluid::Schedule::FASTEST,
            )?))
        }),
        ("mpm88 (solver)", |b| {
            solver_scene::<D2, 2>(b, "mpm88.toml", include_str!("../scenes/mpm88.toml"))
        }),
        ("mpm3d (solver)", |b| {
            solver_scene::<D3, 3>(b, "mpm3d.toml", include_str!("../scenes/mpm3d.toml"))
        }),
        ("dam_break (solver)", |b| {
            solver_scene::<D2, 2>(b, "dam_break.toml", scene_file::DEFAULT_SCENE)
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
            let ms = measure(sim.as_mut(), opts.steps, opts.warmup)?;
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
