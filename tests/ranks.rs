//! Domain decomposition across MPI ranks against the same scene on one process: after a
//! run, the particles of all ranks together must be those of the undecomposed run, within
//! a tolerance (the shared nodes' sums are added in another order, `(a + b)` instead of one
//! running sum, and chaotic flows grow such differences).
//!
//! Run by `cargo test --features mpi`: without an MPI launcher around it, the program
//! starts itself under `mpirun -n 2` and `mpirun -n 3 --oversubscribe` (the solver cases)
//! and runs `mpm run` under `mpirun -n 2` (frames, per-rank checkpoints, a failing rank),
//! reporting each as a test. Under the launcher, every rank runs each solver case
//! decomposed, rank 0 gathers the particles, runs the case alone and compares. A failure
//! on any rank aborts all of them (`MPI_Abort`), which fails the run.

use std::path::Path;
use std::process::Command;

use mpm::core::solver::{
    Collider, Condition, Emitter, GridLayout, Heat, HeatBoundary, HostParticles, Material,
    MaterialId, Region, Sampling, Settings, Shape, Solver, Solver2, Solver3, Space, Thermal,
    TimeStep, Walls,
};
use mpm::peers::Peers;
use mpm::ranks::Mpi;
use mpm::{backend, BackendRef};

mod scratch;

fn main() {
    if Mpi::launched() {
        let Some(mpi) = Mpi::start() else {
            eprintln!("MPI was started twice");
            std::process::exit(1);
        };
        run_cases(&mpi);
        return;
    }
    let me = std::env::current_exe().expect("the test program's path");
    let solver_on = |ranks: usize| {
        let me = me.clone();
        move || match mpirun(ranks, &me, &[]).status() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(format!("the ranks' run ended with {s}")),
            Err(e) => Err(format!(
                "mpirun could not start ({e}): install Open MPI (scripts/setup.sh)"
            )),
        }
    };
    let tests: Vec<(&str, Test)> = vec![
        (
            "decomposed_solvers_match_one_on_2_ranks",
            Box::new(solver_on(2)),
        ),
        (
            "decomposed_solvers_match_one_on_3_ranks",
            Box::new(solver_on(3)),
        ),
        (
            "mpm_run_on_2_ranks_writes_the_frames_of_one_process",
            Box::new(program::frames_match),
        ),
        (
            "mpm_run_resumes_from_per_rank_checkpoints",
            Box::new(program::resume),
        ),
        (
            "a_failing_rank_ends_every_rank_naming_itself",
            Box::new(program::failing_rank),
        ),
    ];
    let mut failed = 0;
    for (name, test) in &tests {
        let outcome = test();
        println!(
            "test {name} ... {}",
            if outcome.is_ok() { "ok" } else { "FAILED" }
        );
        if let Err(e) = outcome {
            println!("    {e}");
            failed += 1;
        }
    }
    println!("\n{} passed, {failed} failed", tests.len() - failed);
    if failed > 0 {
        std::process::exit(1);
    }
}

/// What a test of the launcher ends with: why it failed.
type Outcome = Result<(), String>;
type Test = Box<dyn Fn() -> Outcome>;

/// `mpirun -n ranks program args` (with `--oversubscribe` beyond this machine's cores).
fn mpirun(ranks: usize, program: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.arg("--oversubscribe")
        .args(["-n", &ranks.to_string()])
        .arg(program)
        .args(args)
        // Tests run as root in CI's containers; Open MPI refuses that unless told.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    c
}

/// `mpm run` under mpirun: its frames against one process's, its checkpoints, its failure.
mod program {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    use super::scratch::Scratch;
    use super::{mpirun, worst_points, POSITION_TOLERANCE, VELOCITY_TOLERANCE};

    const MPM: &str = env!("CARGO_BIN_EXE_mpm");

    /// A folder of its own for each test, with the dam break scene writing PLY frames and a
    /// checkpoint every 2 frames; removed when the test ends.
    fn workspace(name: &str) -> (Scratch, PathBuf) {
        let dir = Scratch::new("ranks", name);
        let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/scenes/dam_break.toml");
        let text = std::fs::read_to_string(scene).expect("the dam break scene");
        let scene = dir.join("scene.toml");
        let output = "\n[output]\npng = false\nply = true\ncheckpoint_every = 2\n";
        std::fs::write(&scene, text + output).expect("the scene file");
        (dir, scene)
    }

    /// Runs `mpm run scene --backend cpu ARGS`, on `ranks` ranks (0: without mpirun), within
    /// two minutes (a hang fails).
    fn mpm(ranks: usize, scene: &Path, args: &[&str]) -> Result<Output, String> {
        let mut all = vec![
            "run",
            scene.to_str().expect("a UTF-8 path"),
            "--backend",
            "cpu",
        ];
        all.extend_from_slice(args);
        let mut c = match ranks {
            0 => {
                let mut c = Command::new(MPM);
                c.args(&all);
                c
            }
            n => mpirun(n, Path::new(MPM), &all),
        };
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start mpm: {e}"))?;
        let start = Instant::now();
        while child.try_wait().map_err(|e| e.to_string())?.is_none() {
            if start.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                return Err(format!("mpm {all:?} on {ranks} ranks hung for two minutes"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().map_err(|e| e.to_string())
    }

    fn succeeded(o: Output, what: &str) -> Result<(), String> {
        match o.status.success() {
            true => Ok(()),
            false => Err(format!(
                "{what} failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
        }
    }

    /// A PLY frame's positions and velocities (the layout `output::write_ply_3d` writes).
    fn read_ply(path: &Path) -> Result<[Vec<[f32; 3]>; 2], String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let end = b"end_header\n";
        let at = bytes
            .windows(end.len())
            .position(|w| w == end)
            .ok_or("no PLY header")?
            + end.len();
        let header = String::from_utf8_lossy(&bytes[..at]);
        let n: usize = header
            .lines()
            .find_map(|l| l.strip_prefix("element vertex "))
            .and_then(|n| n.parse().ok())
            .ok_or("no vertex count")?;
        let body = &bytes[at..];
        if body.len() != 28 * n {
            return Err(format!("{} bytes for {n} vertices", body.len()));
        }
        let float = |b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let (mut x, mut v) = (Vec::new(), Vec::new());
        for vertex in body.chunks_exact(28) {
            x.push(std::array::from_fn(|a| float(&vertex[4 * a..])));
            v.push(std::array::from_fn(|a| float(&vertex[12 + 4 * a..])));
        }
        Ok([x, v])
    }

    /// Two PLY frames hold the same particles, within the solver tests' tolerances.
    fn same_frame(a: &Path, b: &Path) -> Result<(), String> {
        let ([xa, va], [xb, vb]) = (read_ply(a)?, read_ply(b)?);
        if xa.len() != xb.len() {
            return Err(format!("{} particles against {}", xa.len(), xb.len()));
        }
        let (dx, dv) = (worst_points(&xa, &xb), worst_points(&va, &vb));
        match dx <= POSITION_TOLERANCE && dv <= VELOCITY_TOLERANCE {
            true => Ok(()),
            false => Err(format!(
                "{} and {} differ by {dx} m, {dv} m/s",
                a.display(),
                b.display()
            )),
        }
    }

    /// Four frames of the dam break (400 substeps) on two ranks, rebalanced every frame, as
    /// on one process.
    pub fn frames_match() -> Result<(), String> {
        let (dir, scene) = workspace("frames");
        let (one, two) = (dir.join("one"), dir.join("two"));
        let frames = ["--frames", "4", "--out"];
        let alone = [&frames[..], &[one.to_str().unwrap_or_default()]].concat();
        succeeded(mpm(0, &scene, &alone)?, "one process")?;
        let ranks = [
            &frames[..],
            &[two.to_str().unwrap_or_default(), "--rebalance-every", "1"],
        ]
        .concat();
        let o = mpm(2, &scene, &ranks)?;
        let said = String::from_utf8_lossy(&o.stdout).into_owned();
        succeeded(o, "two ranks")?;
        if !said.contains("2 ranks, cut across x at") {
            return Err(format!("rank 0 did not report the ranks: {said}"));
        }
        for f in 0..4 {
            let name = format!("frame_{f:05}.ply");
            same_frame(&one.join(&name), &two.join(&name))?;
        }
        Ok(())
    }

    /// Two frames on two ranks, stopped with per-rank checkpoints; resumed to four frames,
    /// as a run of four; refused on one process.
    pub fn resume() -> Result<(), String> {
        let (dir, scene) = workspace("resume");
        let (straight, split) = (dir.join("straight"), dir.join("split"));
        let out = |d: &Path| d.to_str().unwrap_or_default().to_string();
        succeeded(
            mpm(2, &scene, &["--frames", "4", "--out", &out(&straight)])?,
            "four frames",
        )?;
        succeeded(
            mpm(2, &scene, &["--frames", "2", "--out", &out(&split)])?,
            "two frames",
        )?;
        let manifest = split.join("checkpoint.ranks");
        let m = out(&manifest);
        let refused = mpm(
            0,
            &scene,
            &["--frames", "4", "--out", &out(&split), "--resume", &m],
        )?;
        let why = String::from_utf8_lossy(&refused.stderr);
        if refused.status.success() || !why.contains("resume it with `mpirun -n 2`") {
            return Err(format!("one process resumed two ranks' checkpoints: {why}"));
        }
        let resumed = ["--frames", "4", "--out", &out(&split), "--resume", &m];
        succeeded(mpm(2, &scene, &resumed)?, "the resumed run")?;
        same_frame(
            &straight.join("frame_00003.ply"),
            &split.join("frame_00003.ply"),
        )
    }

    /// A rank whose checkpoint is missing fails; every rank ends, the message names it.
    pub fn failing_rank() -> Result<(), String> {
        let (dir, scene) = workspace("failing");
        let out = dir.join("out");
        let o = out.to_str().unwrap_or_default();
        succeeded(
            mpm(2, &scene, &["--frames", "2", "--out", o])?,
            "two frames",
        )?;
        std::fs::remove_file(out.join("checkpoint.rank1.mpmck")).map_err(|e| e.to_string())?;
        let m = out.join("checkpoint.ranks");
        let resumed = [
            "--frames",
            "4",
            "--out",
            o,
            "--resume",
            m.to_str().unwrap_or_default(),
        ];
        let failed = mpm(2, &scene, &resumed)?;
        let why = String::from_utf8_lossy(&failed.stderr);
        match !failed.status.success()
            && why.contains("rank 1 of 2: error")
            && why.contains("checkpoint.rank1.mpmck")
        {
            true => Ok(()),
            false => Err(format!("the run did not fail naming rank 1: {why}")),
        }
    }
}

/// What a case compares: every particle's position and velocity (as sorted lists per axis,
/// which do not depend on the particles' order) within [`POSITION_TOLERANCE`] and
/// [`VELOCITY_TOLERANCE`], and the total mass.
struct Case {
    name: &'static str,
    substeps: u32,
    rebalance_every: u32,
}

/// Metres: a thousandth of the cell of a 64-cell grid. Measured worst differences: 1e-7 m
/// on the CPU, 7e-7 m with ranks on lavapipe (2 and 3 ranks); without the halo exchange the
/// scenes are off by millimetres.
const POSITION_TOLERANCE: f32 = 1.5e-5;
/// Metres per second (measured: at most 2e-6).
const VELOCITY_TOLERANCE: f32 = 1e-4;
/// Kelvin.
const TEMPERATURE_TOLERANCE: f32 = 1e-3;

fn run_cases(mpi: &Mpi) {
    let dam = Case {
        name: "2D dam break: FLIP water, a sphere collider, an emitter",
        substeps: 240,
        rebalance_every: 60,
    };
    check(mpi, &dam, dam_break, |_| backend::cpu());
    let heat = Case {
        name: "2D hot and cold jelly with F-bar, a drop with surface tension",
        substeps: 160,
        rebalance_every: 80,
    };
    check(mpi, &heat, heat_and_tension, |_| backend::cpu());
    // Odd ranks on Vulkan (lavapipe in CI): each rank runs its own backend.
    let case = Case {
        name: "3D jelly ball with F-bar on a sparse grid, odd ranks on Vulkan",
        substeps: 120,
        rebalance_every: 40,
    };
    check(mpi, &case, jelly_ball, |rank| match rank % 2 {
        1 => backend::vulkan().unwrap_or_else(|e| fail(mpi, &format!("no Vulkan backend: {e}"))),
        _ => backend::cpu(),
    });
}

/// Runs `case` decomposed on every rank and alone on rank 0, and compares.
fn check<S: Space<D>, const D: usize>(
    mpi: &Mpi,
    case: &Case,
    build: impl Fn(&BackendRef) -> Solver<S, D>,
    backend_of: impl Fn(usize) -> BackendRef,
) {
    let or_fail = |what: &str, e: mpm::core::solver::SolverError| -> ! {
        fail(mpi, &format!("{}: {what}: {e}", case.name))
    };
    let mut s = build(&backend_of(mpi.rank()));
    s.decompose(mpi.ranks())
        .unwrap_or_else(|e| or_fail("decompose", e));
    for step in 1..=case.substeps {
        s.substep().unwrap_or_else(|e| or_fail("substep", e));
        if step % case.rebalance_every == 0 {
            s.rebalance().unwrap_or_else(|e| or_fail("rebalance", e));
        }
    }
    s.check().unwrap_or_else(|e| or_fail("check", e));
    let report = s
        .decomposition()
        .unwrap_or_else(|| fail(mpi, "run it on two ranks or more (one runs undecomposed)"));
    let mine = s
        .particles
        .download()
        .unwrap_or_else(|e| or_fail("download", e));
    // Every rank's particles, gathered on rank 0.
    let peers = Peers::new(mpm::ranks::world_ranks);
    let gathered = peers
        .gather(mine.to_words())
        .unwrap_or_else(|e| or_fail("gather", e));
    let mut total = [
        report.halo_bytes as f64,
        report.migrated_bytes as f64,
        mine.len() as f64,
    ];
    peers.sum(&mut total).unwrap_or_else(|e| or_fail("sum", e));
    let Some(gathered) = gathered else {
        return;
    };
    let mut all = HostParticles::<S::V, S::M>::default();
    for words in &gathered {
        if words.is_empty() {
            continue;
        }
        let p = HostParticles::<S::V, S::M>::from_words(words)
            .unwrap_or_else(|| fail(mpi, "a rank sent no whole set of particles"));
        append(&mut all, p);
    }
    let mut alone = build(&backend::cpu());
    for _ in 0..case.substeps {
        alone
            .substep()
            .unwrap_or_else(|e| or_fail("substep alone", e));
    }
    alone.check().unwrap_or_else(|e| or_fail("check alone", e));
    let reference = alone
        .particles
        .download()
        .unwrap_or_else(|e| or_fail("download alone", e));
    if all.len() != reference.len() {
        fail(
            mpi,
            &format!(
                "{}: {} particles on {} ranks, {} alone",
                case.name,
                all.len(),
                mpi.size(),
                reference.len()
            ),
        );
    }
    let dx = worst::<S, D>(&all.x, &reference.x);
    let dv = worst::<S, D>(&all.v, &reference.v);
    let dt = worst_scalar(&all.temperature, &reference.temperature);
    let mass = |p: &HostParticles<S::V, S::M>| p.mass.iter().map(|&m| m as f64).sum::<f64>();
    let dm = (mass(&all) - mass(&reference)).abs() / mass(&reference);
    println!(
        "{} on {} ranks ({:?}): {} particles, worst position {dx:.2e} m, velocity {dv:.2e} \
         m/s, temperature {dt:.1e} K, mass {dm:.1e}; halo {:.0} kB per substep, {:.0} kB of particles migrated",
        case.name,
        mpi.size(),
        report.slabs.cuts,
        all.len(),
        total[0] / 1e3 / case.substeps as f64,
        total[1] / 1e3,
    );
    let close = dx <= POSITION_TOLERANCE && dv <= VELOCITY_TOLERANCE;
    if !(close && dt <= TEMPERATURE_TOLERANCE && dm < 1e-6) {
        fail(
            mpi,
            &format!(
                "{}: the decomposed run differs from one rank's beyond {POSITION_TOLERANCE} m \
                 or {VELOCITY_TOLERANCE} m/s (positions {dx}, velocities {dv}, temperatures {dt} K, mass {dm})",
                case.name
            ),
        );
    }
    if total[0] == 0.0 || total[1] == 0.0 {
        fail(
            mpi,
            &format!(
                "{}: the case exchanged no halo ({}) or migrated no particle ({}): it tests \
                 nothing",
                case.name, total[0], total[1]
            ),
        );
    }
}

fn fail(mpi: &Mpi, message: &str) -> ! {
    eprintln!("rank {}: FAILED: {message}", mpi.rank());
    mpi.abort(1)
}

/// The largest difference between two sets of vectors, axis by axis, each axis's values
/// sorted (so the particles' order does not matter).
fn worst<S: Space<D>, const D: usize>(a: &[S::V], b: &[S::V]) -> f32 {
    let arrays = |v: &[S::V]| v.iter().map(|&p| S::components(p)).collect::<Vec<_>>();
    worst_points(&arrays(a), &arrays(b))
}

/// [`worst`] for points as arrays of coordinates.
fn worst_points<const D: usize>(a: &[[f32; D]], b: &[[f32; D]]) -> f32 {
    (0..D)
        .map(|axis| {
            let pick = |v: &[[f32; D]]| v.iter().map(|p| p[axis]).collect::<Vec<f32>>();
            worst_scalar(&pick(a), &pick(b))
        })
        .fold(0.0, f32::max)
}

/// The largest difference between two sets of numbers, each sorted.
fn worst_scalar(a: &[f32], b: &[f32]) -> f32 {
    let sorted = |v: &[f32]| {
        let mut c = v.to_vec();
        c.sort_by(f32::total_cmp);
        c
    };
    let (a, b) = (sorted(a), sorted(b));
    a.iter().zip(&b).fold(0.0, |w, (x, y)| w.max((x - y).abs()))
}

fn append<V: Copy, M: Copy>(all: &mut HostParticles<V, M>, p: HostParticles<V, M>) {
    all.x.extend(p.x);
    all.v.extend(p.v);
    all.c.extend(p.c);
    all.grad_u.extend(p.grad_u);
    all.tau.extend(p.tau);
    all.jp.extend(p.jp);
    all.mass.extend(p.mass);
    all.vol.extend(p.vol);
    all.material.extend(p.material);
    all.temperature.extend(p.temperature);
}

fn jelly(youngs: f32) -> Material {
    Material::NeoHookean {
        density: 1000.0,
        youngs,
        poisson: 0.3,
    }
}

/// Water released from the left wall, against a ball; a jet emitted from the right.
fn dam_break(b: &BackendRef) -> Solver2 {
    let mut settings = Settings::<2>::new(64, 1e-3);
    settings.flip = 0.95;
    settings.time_step = TimeStep::Adaptive {
        cfl: 0.5,
        max: 1e-3,
    };
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Separate { friction: 0.0 },
    };
    let mut s = Solver2::new(b, settings).expect("solver");
    let water = s.add_material(Material::water()).expect("water");
    let region = Region::Box {
        min: [0.06, 0.06],
        max: [0.4, 0.6],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, water, [0.0; 2])
        .expect("water column");
    s.add_collider(Collider::fixed(
        Shape::Sphere {
            centre: [0.6, 0.15, 0.0],
            radius: 0.08,
        },
        Condition::Slip { friction: 0.0 },
    ))
    .expect("ball");
    s.add_emitter(Emitter {
        region: Region::Box {
            min: [0.85, 0.7],
            max: [0.9, 0.75],
        },
        sampling: Sampling::Regular,
        spacing: 1.0 / 128.0,
        material: water,
        velocity: [-2.0, 0.0],
        interval: 0.02,
        start: 0.0,
        stop: 0.1,
    })
    .expect("jet");
    s
}

/// A hot and a cold jelly block side by side across the middle (heat conducts across the
/// cut), F-bar on, and a drop with surface tension.
fn heat_and_tension(b: &BackendRef) -> Solver2 {
    let mut settings = Settings::<2>::new(64, 2e-4);
    settings.f_bar = true;
    settings.surface_tension = true;
    settings.heat = Some(Heat {
        walls: HeatBoundary::Insulated,
    });
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Slip { friction: 0.0 },
    };
    let mut s = Solver2::new(b, settings).expect("solver");
    let block = |s: &mut Solver2, x0: f32, temperature: f32| -> MaterialId {
        let m = s.add_material(jelly(2e4)).expect("jelly");
        s.set_thermal(
            m,
            Thermal {
                conductivity: 50.0,
                specific_heat: 1000.0,
                temperature,
                ..Thermal::default()
            },
        )
        .expect("thermal");
        let region = Region::Box {
            min: [x0, 0.06],
            max: [x0 + 0.25, 0.3],
        };
        s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [0.0; 2])
            .expect("block");
        m
    };
    block(&mut s, 0.25, 400.0);
    block(&mut s, 0.5, 300.0);
    let drop = s
        .add_material(Material::Water {
            density: 1000.0,
            bulk: 1e4,
            gamma: 7.0,
            viscosity: 1.0,
            free_surface: false,
        })
        .expect("liquid");
    s.set_surface_tension(drop, 1.0).expect("tension");
    let region = Region::Box {
        min: [0.4, 0.5],
        max: [0.6, 0.65],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, drop, [0.5, 0.0])
        .expect("drop");
    s
}

/// A jelly ball with F-bar thrown across a sparse grid against the floor (F-bar's sums
/// vary across the cut only where the ball deforms).
fn jelly_ball(b: &BackendRef) -> Solver3 {
    let mut settings = Settings::<3>::new(32, 5e-4);
    settings.f_bar = true;
    settings.grid = GridLayout::Sparse {
        block: 4,
        bitmasked: false,
        reserve: 64,
    };
    settings.walls = Walls {
        thickness: 3,
        condition: Condition::Slip { friction: 0.0 },
    };
    let mut s = Solver3::new(b, settings).expect("solver");
    let m = s.add_material(jelly(1e5)).expect("jelly");
    let region = Region::Sphere {
        centre: [0.3, 0.28, 0.5],
        radius: 0.15,
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 64.0, m, [2.0, -2.0, 0.0])
        .expect("ball");
    s
}
