//! Domain decomposition across MPI ranks against the same scene on one process: after a
//! run, the particles of all ranks together must be those of the undecomposed run, within
//! a tolerance (the shared nodes' sums are added in another order, `(a + b)` instead of one
//! running sum, and chaotic flows grow such differences).
//!
//! Run by `cargo test --features mpi`: without an MPI launcher around it, the program
//! starts itself under `mpirun -n 2` and `mpirun -n 3 --oversubscribe` and reports each
//! as a test. Under the launcher, every rank runs each case decomposed, rank 0 gathers the
//! particles, runs the case alone and compares. A failure on any rank aborts all of them
//! (`MPI_Abort`), which fails the run.

use std::process::Command;

use mpm::core::solver::{
    Collider, Condition, Emitter, GridLayout, Heat, HeatBoundary, HostParticles, Material,
    MaterialId, Region, Sampling, Settings, Shape, Solver, Solver2, Solver3, Space, Thermal,
    TimeStep, Walls,
};
use mpm::ranks::Mpi;
use mpm::{backend, BackendRef};

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
    let mut failed = 0;
    for (ranks, extra) in [(2, &[][..]), (3, &["--oversubscribe"][..])] {
        let status = Command::new("mpirun")
            .args(extra)
            .args(["-n", &ranks.to_string()])
            .arg(&me)
            // Tests run as root in CI's containers; Open MPI refuses that unless told.
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .status();
        let ok = match status {
            Ok(s) => s.success(),
            Err(e) => {
                eprintln!("mpirun could not be started ({e}): install Open MPI (scripts/setup.sh)");
                false
            }
        };
        println!(
            "test decomposed_runs_match_one_rank_on_{ranks}_ranks ... {}",
            if ok { "ok" } else { "FAILED" }
        );
        failed += usize::from(!ok);
    }
    println!("\n{} passed, {failed} failed", 2 - failed);
    if failed > 0 {
        std::process::exit(1);
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
    let rank = mpi.rank();
    let or_fail = |what: &str, e: mpm::core::solver::SolverError| -> ! {
        fail(mpi, &format!("{}: {what}: {e}", case.name))
    };
    let mut s = build(&backend_of(rank));
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
    let mut to = vec![Vec::new(); mpi.size()];
    to[0] = mine.to_words();
    let gathered = mpi
        .ranks()
        .exchange(to)
        .unwrap_or_else(|e| or_fail("gather", e));
    let stats = [
        report.halo_bytes as f64,
        report.migrated_bytes as f64,
        mine.len() as f64,
    ];
    let mut total = stats;
    mpi.ranks()
        .sum(&mut total)
        .unwrap_or_else(|e| or_fail("sum", e));
    if rank != 0 {
        return;
    }
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
    let mut worst = 0.0f32;
    for axis in 0..D {
        let sorted = |v: &[S::V]| {
            let mut c: Vec<f32> = v.iter().map(|&p| S::components(p)[axis]).collect();
            c.sort_by(f32::total_cmp);
            c
        };
        let (a, b) = (sorted(a), sorted(b));
        for (x, y) in a.iter().zip(&b) {
            worst = worst.max((x - y).abs());
        }
    }
    worst
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
