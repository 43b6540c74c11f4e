//! The solver library against closed-form mechanics: free fall, conservation of mass and of
//! linear and angular momentum by the transfers, colliders, friction, and its checks on bad
//! input. Every check runs on each backend (`cpu::name`, `vulkan::name`).

mod backends;

use mpm::core::glam::{Mat2, Vec2};
use mpm::core::solver::SolverError;
use mpm::core::solver::{
    BulkViscosity, Collider, Condition, Emitter, GridLayout, HeatBoundary, Material, Region,
    Sampling, Sdf, Settings, Shape, Solver, Solver2, Solver3, Space, Spline, TimeStep, Walls, D2,
    D3,
};
use mpm::{kernel, BackendRef, Field};

fn jelly() -> Material {
    Material::NeoHookean {
        density: 1000.0,
        youngs: 1e4,
        poisson: 0.3,
    }
}

/// Mean of a set of points.
fn mean<const D: usize>(x: &[[f32; D]]) -> [f32; D] {
    let mut m = [0.0f64; D];
    for p in x {
        for a in 0..D {
            m[a] += p[a] as f64;
        }
    }
    m.map(|v| (v / x.len() as f64) as f32)
}

/// Free fall (reference: x = x0 + v0 t - g t^2 / 2). The explicit scheme's discrete fall
/// differs from it by g dt t / 2, which bounds the tolerance.
fn free_fall_2d(b: &BackendRef, spline: Spline) {
    let dt = 1e-4;
    let mut settings = Settings::<2>::new(64, dt);
    settings.spline = spline;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let region = Region::Box {
        min: [0.4, 0.6],
        max: [0.6, 0.75],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [0.5, 1.0])
        .expect("particles");
    let (x0, _) = s.positions().expect("positions");
    let c0 = mean(&x0);
    let steps = 1000;
    for _ in 0..steps {
        s.substep().expect("substep");
    }
    let t = steps as f32 * dt;
    let (x1, _) = s.positions().expect("positions");
    assert_eq!(x1.len(), x0.len(), "no particle may be lost");
    let c1 = mean(&x1);
    let expected = [c0[0] + 0.5 * t, c0[1] + 1.0 * t - 0.5 * 9.8 * t * t];
    let tol = 0.5 * 9.8 * dt * t + 1e-5;
    for a in 0..2 {
        assert!(
            (c1[a] - expected[a]).abs() <= tol,
            "{spline:?} axis {a}: centre {} vs free fall {} (tolerance {tol})",
            c1[a],
            expected[a]
        );
    }
}

fn free_fall_both_splines(b: &BackendRef) {
    free_fall_2d(b, Spline::Quadratic);
    free_fall_2d(b, Spline::Cubic);
}

fn free_fall_3d(b: &BackendRef) {
    let dt = 2e-4;
    let mut s = Solver3::new(b, Settings::new(32, dt)).expect("solver");
    let m = s.add_material(Material::water()).expect("material");
    let region = Region::Sphere {
        centre: [0.5, 0.6, 0.5],
        radius: 0.1,
    };
    s.add_particles(&region, Sampling::Jittered, 1.0 / 64.0, m, [0.0; 3])
        .expect("particles");
    let (x0, _) = s.positions().expect("positions");
    let steps = 500;
    for _ in 0..steps {
        s.substep().expect("substep");
    }
    let t = steps as f32 * dt;
    let (x1, _) = s.positions().expect("positions");
    // x = x0 + v0 t - g t^2 / 2, within the explicit scheme's g dt t / 2.
    let drop = mean(&x0)[1] - mean(&x1)[1];
    let expected = 0.5 * 9.8 * t * t;
    assert!(
        (drop - expected).abs() <= 0.5 * 9.8 * dt * t + 1e-5,
        "3D free fall: dropped {drop}, kinematics say {expected}"
    );
}

/// Two jelly blocks of different densities collide head on without gravity.
fn colliding_blocks(b: &BackendRef, flip: f32, spline: Spline) -> Solver2 {
    let mut settings = Settings::<2>::new(64, 1e-4);
    settings.gravity = [0.0, 0.0];
    settings.flip = flip;
    settings.spline = spline;
    let mut s = Solver2::new(b, settings).expect("solver");
    let light = s.add_material(jelly()).expect("material");
    let heavy = s
        .add_material(Material::FixedCorotated {
            density: 3000.0,
            youngs: 2e4,
            poisson: 0.2,
        })
        .expect("material");
    let spacing = 1.0 / 128.0;
    let left = Region::Box {
        min: [0.3, 0.4],
        max: [0.45, 0.55],
    };
    let right = Region::Box {
        min: [0.52, 0.45],
        max: [0.62, 0.6],
    };
    s.add_particles(&left, Sampling::Jittered, spacing, light, [2.0, 0.3])
        .expect("left");
    s.add_particles(&right, Sampling::Jittered, spacing, heavy, [-1.5, -0.2])
        .expect("right");
    s
}

fn cross(a: Vec2, b: Vec2) -> f64 {
    a.x as f64 * b.y as f64 - a.y as f64 * b.x as f64
}

/// Total mass, linear momentum and angular momentum about the origin of the particles. APIC's
/// affine velocity carries angular momentum too: m D (C_yx - C_xy) with D = dx^2 / 4
/// (quadratic) (Jiang et al. 2015, "The affine particle-in-cell method", section 5.3).
fn totals(s: &Solver2, d: f32) -> (f64, [f64; 2], f64) {
    let p = &s.particles;
    let n = p.count() as usize;
    let x: Vec<Vec2> = p.x.download().expect("x");
    let v: Vec<Vec2> = p.v.download().expect("v");
    let c: Vec<Mat2> = p.c.download().expect("c");
    let m: Vec<f32> = p.mass.download().expect("mass");
    let (mut mass, mut mom, mut ang) = (0.0f64, [0.0f64; 2], 0.0f64);
    for i in 0..n {
        let mi = m[i] as f64;
        mass += mi;
        mom[0] += mi * v[i].x as f64;
        mom[1] += mi * v[i].y as f64;
        ang += mi * cross(x[i], v[i]) + mi * d as f64 * (c[i].x_axis.y - c[i].y_axis.x) as f64;
    }
    (mass, mom, ang)
}

fn transfers_conserve_mass_and_linear_momentum(b: &BackendRef) {
    for (flip, spline) in [
        (0.0, Spline::Quadratic),
        (0.95, Spline::Quadratic),
        (0.0, Spline::Cubic),
    ] {
        let mut s = colliding_blocks(b, flip, spline);
        let dx = s.settings().dx;
        let (mass0, mom0, _) = totals(&s, 0.0);
        let scale = mom0[0].abs() + 3000.0 * 0.01 * 2.0; // momentum of the heavier block
        for _ in 0..600 {
            s.substep().expect("substep");
        }
        // The grid holds the mass P2G scattered in the last substep.
        let grid_mass: f64 = s
            .grid
            .m
            .download()
            .expect("m")
            .iter()
            .map(|&m| m as f64)
            .sum();
        assert!(
            (grid_mass - mass0).abs() <= 1e-5 * mass0,
            "P2G must conserve mass: grid {grid_mass} vs particles {mass0}"
        );
        let (mass1, mom1, _) = totals(&s, 0.0);
        assert_eq!(mass0, mass1);
        for a in 0..2 {
            assert!(
                (mom1[a] - mom0[a]).abs() <= 1e-4 * scale,
                "flip {flip}, {spline:?}: momentum[{a}] went from {} to {} through a collision",
                mom0[a],
                mom1[a]
            );
        }
        let _ = dx;
    }
}

fn apic_conserves_angular_momentum(b: &BackendRef) {
    // A spinning jelly disc, no gravity: APIC transfers conserve angular momentum (Jiang et
    // al. 2015, section 5.3); elastic forces from a symmetric stress do too.
    let mut settings = Settings::<2>::new(64, 1e-4);
    settings.gravity = [0.0, 0.0];
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let centre = [0.5f32, 0.5];
    let disc = Region::Sphere {
        centre,
        radius: 0.15,
    };
    let x =
        mpm::core::solver::seeding::fill(&disc, 1.0 / 128.0, Sampling::Jittered, 1).expect("seed");
    let omega = 4.0;
    let v: Vec<[f32; 2]> = x
        .iter()
        .map(|p| {
            [
                -omega * (p[1] - centre[1]) + 0.2,
                omega * (p[0] - centre[0]),
            ]
        })
        .collect();
    s.add_moving(&x, &v, (1.0f32 / 128.0).powi(2), m)
        .expect("particles");
    let d = s.settings().dx.powi(2) / 4.0;
    let (_, _, l0) = totals(&s, d);
    for _ in 0..500 {
        s.substep().expect("substep");
    }
    let (_, _, l1) = totals(&s, d);
    assert!(
        (l1 - l0).abs() <= 1e-3 * l0.abs(),
        "angular momentum went from {l0} to {l1}"
    );
}

fn particles_leaving_the_domain_are_removed(b: &BackendRef) {
    let mut settings = Settings::<2>::new(32, 2e-4);
    settings.walls = Walls {
        thickness: 0,
        condition: Condition::Sticky,
    };
    settings.check_every = 5;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(Material::water()).expect("material");
    let region = Region::Box {
        min: [0.3, 0.3],
        max: [0.4, 0.4],
    };
    let n = s
        .add_particles(&region, Sampling::Regular, 1.0 / 64.0, m, [0.0, -3.0])
        .expect("particles");
    assert!(n > 0);
    for _ in 0..1000 {
        s.substep().expect("substep");
    }
    let (x, _) = s.positions().expect("positions");
    assert!(
        x.is_empty(),
        "{} particles still inside after falling out",
        x.len()
    );
}

fn emitters_add_particles_over_time(b: &BackendRef) {
    let mut s = Solver2::new(b, Settings::new(64, 2e-4)).expect("solver");
    let m = s.add_material(Material::water()).expect("material");
    s.add_emitter(Emitter {
        region: Region::Box {
            min: [0.1, 0.7],
            max: [0.12, 0.75],
        },
        sampling: Sampling::Regular,
        spacing: 1.0 / 128.0,
        material: m,
        velocity: [2.0, 0.0],
        interval: 0.01,
        start: 0.0,
        stop: 0.05,
    })
    .expect("emitter");
    for _ in 0..500 {
        s.substep().expect("substep");
    }
    // 0.1 s ran; the emitter fired at t = 0, 0.01, ..., 0.04: five times 3 x 6 particles.
    assert_eq!(s.particles.count(), 5 * 3 * 6);
    // An emitter whose firings would add far more than memory holds (1e6 firings of 4.5e6
    // particles) is refused when it is added, with the estimate, not after running for a while.
    let e = s
        .add_emitter(Emitter {
            region: Region::Box {
                min: [0.1, 0.1],
                max: [0.9, 0.9],
            },
            sampling: Sampling::Regular,
            spacing: 1.0 / 2650.0,
            material: m,
            velocity: [0.0, 0.0],
            interval: 1e-6,
            start: 0.0,
            stop: 1.0,
        })
        .expect_err("too much to emit");
    let t = e.to_string();
    assert!(
        t.contains("emitter") && t.contains("GiB") && t.contains("available"),
        "{t}"
    );
}

fn colliders_hold_material_up(b: &BackendRef) {
    // A water drop falls on a sphere and on a box held in mid air; none gets inside them.
    let mut s = Solver2::new(b, Settings::new(64, 2e-4)).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    s.add_collider(Collider::fixed(
        Shape::Sphere {
            centre: [0.3, 0.3, 0.0],
            radius: 0.1,
        },
        Condition::Sticky,
    ))
    .expect("sphere");
    s.add_collider(Collider::fixed(
        Shape::Box {
            centre: [0.7, 0.3, 0.0],
            half: [0.1, 0.05, 1.0],
        },
        Condition::Slip { friction: 0.5 },
    ))
    .expect("box");
    for cx in [0.3, 0.7] {
        let region = Region::Box {
            min: [cx - 0.05, 0.5],
            max: [cx + 0.05, 0.6],
        };
        s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [0.0, 0.0])
            .expect("particles");
    }
    for _ in 0..2500 {
        s.substep().expect("substep");
    }
    let (x, _) = s.positions().expect("positions");
    let dx = s.settings().dx;
    for p in &x {
        let in_sphere = ((p[0] - 0.3).powi(2) + (p[1] - 0.3).powi(2)).sqrt() < 0.1 - dx;
        let in_box = (p[0] - 0.7).abs() < 0.1 - dx && (p[1] - 0.3).abs() < 0.05 - dx;
        assert!(
            !in_sphere && !in_box,
            "particle at {p:?} went into a collider"
        );
    }
    // Both drops rest on top of their colliders after 0.5 s instead of falling through.
    let resting = x.iter().filter(|p| p[1] > 0.33).count();
    assert!(
        resting > x.len() * 9 / 10,
        "only {resting} of {} particles stayed on top",
        x.len()
    );
}

fn a_moving_collider_pushes_material(b: &BackendRef) {
    let mut settings = Settings::<2>::new(64, 2e-4);
    settings.gravity = [0.0, 0.0];
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(Material::water()).expect("material");
    s.add_collider(Collider {
        shape: Shape::Box {
            centre: [0.2, 0.5, 0.0],
            half: [0.05, 0.2, 1.0],
        },
        condition: Condition::Sticky,
        heat: HeatBoundary::Insulated,
        velocity: [1.0, 0.0, 0.0],
    })
    .expect("paddle");
    let region = Region::Box {
        min: [0.3, 0.4],
        max: [0.4, 0.6],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [0.0, 0.0])
        .expect("particles");
    s.advance(0.2).expect("run");
    // The paddle's front moved from 0.25 to 0.45: all water lies in front of it.
    let (x, _) = s.positions().expect("positions");
    let behind = x.iter().filter(|p| p[0] < 0.44).count();
    assert_eq!(behind, 0, "{behind} particles were left behind the paddle");
}

fn divergence_is_reported_with_step_particle_and_material(b: &BackendRef) {
    // Far too large a time step for stiff jelly: it must blow up, and say so.
    let mut settings = Settings::<2>::new(64, 5e-3);
    settings.check_every = 1;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s
        .add_material(Material::NeoHookean {
            density: 1.0,
            youngs: 1e6,
            poisson: 0.3,
        })
        .expect("material");
    let region = Region::Box {
        min: [0.4, 0.4],
        max: [0.6, 0.6],
    };
    s.add_particles(&region, Sampling::Jittered, 1.0 / 128.0, m, [1.0, 0.0])
        .expect("particles");
    let mut outcome = Ok(0.0);
    for _ in 0..200 {
        outcome = s.substep();
        if outcome.is_err() {
            break;
        }
    }
    match outcome {
        Err(SolverError::Diverged {
            step,
            particle,
            material,
            ..
        }) => {
            assert!(step < 200);
            assert!(particle < s.particles.count());
            assert_eq!(material, "neo-hookean");
        }
        other => panic!("expected a divergence error, got {other:?}"),
    }
}

/// The adaptive step against the state it must resolve: `dt = cfl dx / max_p (|v_p| + c_p)`
/// with `c_p` the wave speed of particle p's current state, widened by bulk viscosity to
/// `Q + sqrt(Q^2 + c^2)`. Reference values computed here from the particles: Tait water's
/// sound speed `c0 J^((1 - gamma) / 2)` (from `dp/drho`), the histogram's bound at most a
/// quarter octave above the true maximum. The scene is a water layer hitting the floor at
/// 30 m/s (Mach 1.1 at rest): the shocked water is compressed and carries sound well above
/// `c0`, so a step that followed the rest wave speed diverged within ten substeps.
fn adaptive_steps_follow_the_fastest_signal(b: &BackendRef) {
    let (bulk, gamma, rho0) = (2e5f32, 7.0f32, 1000.0f32);
    let water = Material::Water {
        density: rho0,
        bulk,
        gamma,
        viscosity: 0.0,
        free_surface: true,
    };
    let c0 = water.wave_speed();
    let cfl = 0.5;
    let mut settings = Settings::<2>::new(64, 1e-3);
    settings.time_step = TimeStep::Adaptive { cfl, max: 1e-3 };
    settings.gravity = [0.0, 0.0];
    let dx = settings.dx;

    // At rest in their material, particles at 5 m/s: the first step is exact.
    let mut s = Solver2::new(b, settings.clone()).expect("solver");
    let m = s.add_material(water.clone()).expect("material");
    let region = Region::Box {
        min: [0.4, 0.4],
        max: [0.5, 0.5],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 128.0, m, [5.0, 0.0])
        .expect("particles");
    let dt = s.substep().expect("substep");
    assert!((dt - cfl * dx / (5.0 + c0)).abs() < 1e-9, "dt {dt}");

    for viscosity in [BulkViscosity::default(), BulkViscosity::STANDARD] {
        let mut settings = settings.clone();
        settings.bulk_viscosity = viscosity;
        settings.walls.condition = Condition::Slip { friction: 0.0 };
        let mut s = Solver2::new(b, settings).expect("solver");
        let m = s.add_material(water.clone()).expect("material");
        let layer = Region::Box {
            min: [0.06, 0.06],
            max: [0.94, 0.36],
        };
        s.add_particles(&layer, Sampling::Regular, 1.0 / 128.0, m, [0.0, -30.0])
            .expect("particles");
        let mut fastest_wave = 0.0f64;
        while s.time() < 0.015 {
            s.substep().expect("the impact stays stable");
            let p = s.particles.download().expect("particles");
            let mut bound = 0.0f64;
            for ((h, v), c) in p.grad_u.iter().zip(&p.v).zip(&p.c) {
                let j = (Mat2::IDENTITY + *h).as_dmat2().determinant();
                let wave = f64::from(c0) * j.powf((1.0 - f64::from(gamma)) / 2.0);
                fastest_wave = fastest_wave.max(wave);
                let rate = f64::from(c.x_axis.x + c.y_axis.y);
                let q = f64::from(viscosity.linear) * wave
                    + f64::from(viscosity.quadratic * dx) * (-rate).max(0.0);
                let signal = q + (q * q + wave * wave).sqrt();
                bound = bound.max(v.as_dvec2().length() + signal);
            }
            let ideal = f64::from(cfl * dx) / bound;
            let dt = f64::from(s.next_dt());
            assert!(
                dt <= ideal * 1.001 && dt >= ideal / 2f64.powf(0.25) * 0.999,
                "t = {}: dt {dt}, cfl dx / max signal {ideal} ({viscosity:?})",
                s.time()
            );
        }
        assert!(
            fastest_wave > 1.5 * f64::from(c0),
            "the impact compresses the water: sound at {fastest_wave} m/s, {c0} at rest"
        );
    }
}

/// A water layer hitting the floor at `v0` = 10 m/s: a plane shock runs up into it, behind
/// which the water rests, compressed to the Rankine-Hugoniot state: mass `rho0 (U + v0) =
/// rho1 U` and momentum `p1 = rho0 (U + v0) v0` across a shock running up at `U`, with
/// Tait's `p1 = bulk (J1^-gamma - 1)`: `J1 = 0.8247`, `U = 47.1` m/s. Checked with and without
/// bulk viscosity: the shocked water's mean `J` within 1% of `J1` and its mean velocity
/// within 3% of `v0` of rest, and the shock (where `J` is halfway between `J1` and 1)
/// within 1.5 cells of `U t`.
fn impacts_reach_the_rankine_hugoniot_state(b: &BackendRef) {
    let (bulk, gamma, rho0, v0) = (2e5f64, 7.0f64, 1000.0f64, 10.0f64);
    // J1 from bulk (J^-gamma - 1) = rho0 v0^2 / (1 - J), by bisection.
    let (mut lo, mut hi) = (0.5f64, 1.0 - 1e-12);
    for _ in 0..200 {
        let j = 0.5 * (lo + hi);
        if bulk * (j.powf(-gamma) - 1.0) > rho0 * v0 * v0 / (1.0 - j) {
            lo = j;
        } else {
            hi = j;
        }
    }
    let j1 = 0.5 * (lo + hi);
    let shock_speed = v0 * j1 / (1.0 - j1);
    for viscosity in [BulkViscosity::default(), BulkViscosity::STANDARD] {
        let mut settings = Settings::<2>::new(128, 1e-3);
        settings.time_step = TimeStep::Adaptive {
            cfl: 0.5,
            max: 1e-3,
        };
        settings.gravity = [0.0, 0.0];
        settings.bulk_viscosity = viscosity;
        settings.walls.condition = Condition::Slip { friction: 0.0 };
        let dx = f64::from(settings.dx);
        let floor = 2.5 * dx; // the wall's surface
        let mut s = Solver2::new(b, settings).expect("solver");
        let water = Material::Water {
            density: rho0 as f32,
            bulk: bulk as f32,
            gamma: gamma as f32,
            viscosity: 0.0,
            free_surface: true,
        };
        let m = s.add_material(water).expect("material");
        let layer = Region::Box {
            min: [0.03, floor as f32],
            max: [0.97, 0.6],
        };
        s.add_particles(&layer, Sampling::Regular, 1.0 / 256.0, m, [0.0, -v0 as f32])
            .expect("particles");
        while s.time() < 0.008 {
            s.substep().expect("substep");
        }
        let front = floor + shock_speed * s.time();
        // Mean J / J1 and v_y / v0 per layer of one cell, from the floor up.
        let p = s.particles.download().expect("particles");
        let layers = (0.6 / dx) as usize;
        let mut sums = vec![(0.0f64, 0.0f64, 0.0f64); layers];
        for ((x, v), h) in p.x.iter().zip(&p.v).zip(&p.grad_u) {
            let k = ((f64::from(x[1]) - floor) / dx) as usize;
            let j = (Mat2::IDENTITY + *h).as_dmat2().determinant();
            let sum = &mut sums[k.min(layers - 1)];
            *sum = (sum.0 + 1.0, sum.1 + j / j1, sum.2 + f64::from(v[1]) / v0);
        }
        let mean = |k: usize| (sums[k].1 / sums[k].0, sums[k].2 / sums[k].0);
        let behind = 3..((front - floor) / dx) as usize - 3;
        let (mut strain, mut speed) = (0.0, 0.0);
        for k in behind.clone() {
            strain += mean(k).0 - 1.0;
            speed += mean(k).1;
        }
        let (strain, speed) = (strain / behind.len() as f64, speed / behind.len() as f64);
        // The first layer from the floor up past the midpoint between J1 and 1.
        let half = 0.5 * (1.0 + 1.0 / j1);
        let crossing = (0..layers).find(|&k| mean(k).0 > half).expect("a shock");
        let found = floor + (crossing as f64 + 0.5) * dx;
        assert!(
            strain.abs() < 0.01 && speed.abs() < 0.03 && (found - front).abs() < 1.5 * dx,
            "{viscosity:?}: J / J1 - 1 = {strain}, v / v0 = {speed} behind the shock; shock at \
             {found}, Rankine-Hugoniot {front}"
        );
    }
}

/// A jelly block dropped on a sticky sphere, once as the analytic sphere and once as a
/// distance field sampled from it (`|p - c| - r` on a lattice of a quarter cell, in a frame
/// turned by 30 degrees about z, which a sphere does not notice): the particles end within a
/// tenth of a cell of each other on average, in 2D and 3D. The field's lattice spans the
/// sphere and two cells around it.
fn distance_field_colliders_act_as_their_shapes(b: &BackendRef) {
    fn drop_on_sphere<S: Space<D>, const D: usize>(b: &BackendRef, field: bool) -> Vec<[f32; D]> {
        let n = if D == 2 { 64 } else { 32 };
        let mut s = Solver::<S, D>::new(b, Settings::new(n, 2e-4)).expect("solver");
        let dx = s.settings().dx;
        let m = s.add_material(jelly()).expect("material");
        let (centre, radius) = ([0.5, 0.3, if D == 2 { 0.0 } else { 0.5 }], 0.15);
        let shape = if field {
            let spacing = dx / 4.0;
            let half = radius + 2.0 * dx;
            let samples = (2.0 * half / spacing).ceil() as u32 + 1;
            let sdf = Sdf::from_fn(
                [-half, -half, if D == 2 { 0.0 } else { -half }],
                spacing,
                [samples, samples, if D == 2 { 1 } else { samples }],
                |p| (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt() - radius,
            );
            let sdf = s.add_sdf(sdf).expect("distance field");
            let turn = std::f32::consts::FRAC_PI_6 / 2.0;
            Shape::Sdf {
                sdf,
                position: centre,
                rotation: [0.0, 0.0, turn.sin(), turn.cos()],
                angular_velocity: [0.0; 3],
            }
        } else {
            Shape::Sphere { centre, radius }
        };
        s.add_collider(Collider::fixed(shape, Condition::Sticky))
            .expect("collider");
        let mut min = [0.45; D];
        let mut max = [0.55; D];
        (min[1], max[1]) = (0.5, 0.6);
        s.add_particles(
            &Region::Box { min, max },
            Sampling::Regular,
            dx / 2.0,
            m,
            [0.0; D],
        )
        .expect("particles");
        for _ in 0..1500 {
            s.substep().expect("substep");
        }
        s.positions().expect("positions").0
    }
    fn compare<S: Space<D>, const D: usize>(b: &BackendRef) {
        let dx = if D == 2 { 1.0 / 64.0 } else { 1.0 / 32.0 };
        let shape = drop_on_sphere::<S, D>(b, false);
        let field = drop_on_sphere::<S, D>(b, true);
        let apart = shape
            .iter()
            .zip(&field)
            .map(|(p, q)| (0..D).map(|a| (p[a] - q[a]).powi(2)).sum::<f32>().sqrt())
            .sum::<f32>()
            / shape.len() as f32;
        // The block has landed: it is no longer where it started.
        let fallen = shape.iter().map(|p| 0.55 - p[1]).sum::<f32>() / shape.len() as f32;
        assert!(
            apart < 0.1 * dx && fallen > 0.03,
            "{D}D: {apart} apart on average, fallen {fallen}"
        );
    }
    compare::<D2, 2>(b);
    compare::<D3, 3>(b);
}

/// A plate one cell thin sweeps through a column of sand at 10 m/s (40 cells per 0.1 s,
/// with `cfl` 0.5 the step keeps it to half a cell per substep): every grain stays in
/// front of it. Without particles put back on the collider's surface the plate's nodes
/// alone let grains through.
/// The exact signed distance to a rectangle, from `q = |p - centre| - half extents`.
fn rectangle_distance(q: [f32; 2]) -> f32 {
    let outside = (q[0].max(0.0).powi(2) + q[1].max(0.0).powi(2)).sqrt();
    outside + q[0].max(q[1]).min(0.0)
}

fn a_thin_moving_wall_sweeps_the_sand_ahead(b: &BackendRef) {
    let mut settings = Settings::<2>::new(128, 1e-3);
    settings.time_step = TimeStep::Adaptive {
        cfl: 0.5,
        max: 1e-3,
    };
    let dx = settings.dx;
    let mut s = Solver2::new(b, settings).expect("solver");
    let sand = s.add_material(Material::sand()).expect("sand");
    s.add_particles(
        &Region::Box {
            min: [0.4, 0.03],
            max: [0.6, 0.5],
        },
        Sampling::Regular,
        dx / 2.0,
        sand,
        [0.0, 0.0],
    )
    .expect("particles");
    // The plate: |x| < dx / 2, |y| < 0.45 (from the floor to well above the heap it pushes),
    // sampled every quarter cell.
    let (thick, tall) = (0.5 * dx, 0.45f32);
    let spacing = dx / 4.0;
    let sdf = Sdf::from_fn(
        [-thick - 2.0 * dx, -tall - 2.0 * dx, 0.0],
        spacing,
        [
            ((2.0 * thick + 4.0 * dx) / spacing) as u32 + 1,
            ((2.0 * tall + 4.0 * dx) / spacing) as u32 + 1,
            1,
        ],
        |p| rectangle_distance([p[0].abs() - thick, p[1].abs() - tall]),
    );
    let sdf = s.add_sdf(sdf).expect("distance field");
    let start = 0.3;
    let speed = 10.0;
    s.add_collider(Collider {
        shape: Shape::Sdf {
            sdf,
            position: [start, 0.45, 0.0],
            rotation: [0.0, 0.0, 0.0, 1.0],
            angular_velocity: [0.0; 3],
        },
        condition: Condition::Slip { friction: 0.0 },
        heat: HeatBoundary::Insulated,
        velocity: [speed, 0.0, 0.0],
    })
    .expect("plate");
    while s.time() < 0.03 {
        let dt = s.substep().expect("substep");
        assert!(
            dt * speed <= 0.5 * dx * 1.001,
            "the plate moved {} cells",
            dt * speed / dx
        );
    }
    let plate = start + speed * s.time() as f32;
    assert!(plate > 0.6, "the plate has passed the column's start");
    let (x, _) = s.positions().expect("positions");
    let behind = x
        .iter()
        .filter(|p| p[0] < plate + thick - 1e-3 * dx)
        .count();
    assert_eq!(
        behind,
        0,
        "grains behind the plate's front face at {}",
        plate + thick
    );
}

/// A sticky disk spinning at 20 rad/s in a ring of jelly without gravity: its rotation
/// advances by omega t exactly, and the jelly touching it turns with it, at `omega r` within
/// 15% (a quarter of a turn in, the ring has been set spinning from rest).
fn a_spinning_collider_turns_what_sticks_to_it(b: &BackendRef) {
    let mut settings = Settings::<2>::new(64, 1e-4);
    settings.gravity = [0.0, 0.0];
    settings.walls.thickness = 0;
    let dx = settings.dx;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let radius = 0.15;
    let spacing = dx / 4.0;
    let half = radius + 2.0 * dx;
    let samples = (2.0 * half / spacing).ceil() as u32 + 1;
    let sdf = s
        .add_sdf(Sdf::from_fn(
            [-half, -half, 0.0],
            spacing,
            [samples, samples, 1],
            |p| (p[0] * p[0] + p[1] * p[1]).sqrt() - radius,
        ))
        .expect("distance field");
    let omega = 20.0f32;
    let centre = [0.5, 0.5];
    s.add_collider(Collider::fixed(
        Shape::Sdf {
            sdf,
            position: [centre[0], centre[1], 0.0],
            rotation: [0.0, 0.0, 0.0, 1.0],
            angular_velocity: [0.0, 0.0, omega],
        },
        Condition::Sticky,
    ))
    .expect("disk");
    // A ring of jelly from the disk's surface to 0.25 from its centre.
    let mut x = Vec::new();
    let n = (0.5 / (dx / 2.0)) as usize;
    for i in 0..n {
        for j in 0..n {
            let p = [
                0.25 + (i as f32 + 0.5) * dx / 2.0,
                0.25 + (j as f32 + 0.5) * dx / 2.0,
            ];
            let r = ((p[0] - centre[0]).powi(2) + (p[1] - centre[1]).powi(2)).sqrt();
            if r > radius && r < 0.25 {
                x.push(p);
            }
        }
    }
    s.add_moving(&x, &vec![[0.0, 0.0]; x.len()], (dx / 2.0).powi(2), m)
        .expect("ring");
    let turn = std::f32::consts::FRAC_PI_2;
    let steps = (turn / omega / 1e-4).round() as usize;
    for _ in 0..steps {
        s.substep().expect("substep");
    }
    let t = s.time() as f32;
    let Shape::Sdf { rotation, .. } = s.colliders()[0].shape else {
        unreachable!()
    };
    let angle = 2.0 * rotation[2].atan2(rotation[3]);
    assert!(
        (angle - omega * t).abs() < 1e-4,
        "turned {angle}, omega t = {}",
        omega * t
    );
    let p = s.particles.download().expect("particles");
    let (mut tangential, mut count) = (0.0f64, 0.0f64);
    for (x, v) in p.x.iter().zip(&p.v) {
        let r = *x - mpm::core::glam::Vec2::from_array(centre);
        if r.length() < radius + dx {
            // Tangential velocity over omega r.
            let t = mpm::core::glam::Vec2::new(-r.y, r.x) / r.length();
            tangential += f64::from(v.dot(t) / (omega * r.length()));
            count += 1.0;
        }
    }
    let ratio = tangential / count;
    assert!(
        count > 50.0 && (ratio - 1.0).abs() < 0.15,
        "{count} particles at {ratio} of omega r"
    );
}

/// A slab-shaped distance field (0 < x < 0.3, |y| < 0.05 in its own frame) turned by 90
/// degrees about z stands upright on (0.5, 0.5): 0.45 < x < 0.55, 0.5 < y < 0.8. Particles
/// placed inside it are put back on its nearest face (x = 0.45 or 0.55) within a hundredth
/// of a cell in one substep; particles where the slab would be unturned or turned the other
/// way stay where they are.
fn a_turned_distance_field_stands_where_its_rotation_puts_it(b: &BackendRef) {
    let mut settings = Settings::<2>::new(64, 1e-5);
    settings.gravity = [0.0, 0.0];
    let dx = settings.dx;
    let mut s = Solver2::new(b, settings).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let (hx, hy) = (0.15f32, 0.05f32);
    let spacing = dx / 4.0;
    let margin = 2.0 * dx;
    let sdf = s
        .add_sdf(Sdf::from_fn(
            [-margin, -hy - margin, 0.0],
            spacing,
            [
                ((2.0 * (hx + margin)) / spacing) as u32 + 1,
                ((2.0 * (hy + margin)) / spacing) as u32 + 1,
                1,
            ],
            |p| rectangle_distance([(p[0] - hx).abs() - hx, p[1].abs() - hy]),
        ))
        .expect("distance field");
    let quarter = std::f32::consts::FRAC_PI_4;
    s.add_collider(Collider::fixed(
        Shape::Sdf {
            sdf,
            position: [0.5, 0.5, 0.0],
            rotation: [0.0, 0.0, quarter.sin(), quarter.cos()],
            angular_velocity: [0.0; 3],
        },
        Condition::Slip { friction: 0.0 },
    ))
    .expect("slab");
    // Inside the upright slab, near its faces at x = 0.45 and 0.55, at several heights.
    let inside: Vec<[f32; 2]> = [0.47, 0.52, 0.46, 0.54]
        .iter()
        .zip([0.55, 0.6, 0.7, 0.75])
        .map(|(&x, y)| [x, y])
        .collect();
    // Where the slab would be unturned, or turned by -90 degrees.
    let beside: Vec<[f32; 2]> = vec![[0.7, 0.51], [0.47, 0.3], [0.53, 0.4]];
    let all: Vec<[f32; 2]> = inside.iter().chain(&beside).copied().collect();
    s.add_moving(&all, &vec![[0.0, 0.0]; all.len()], (dx / 2.0).powi(2), m)
        .expect("particles");
    s.substep().expect("substep");
    let (x, _) = s.positions().expect("positions");
    for (p, start) in x.iter().zip(&inside) {
        let face = if start[0] < 0.5 { 0.45 } else { 0.55 };
        assert!(
            (p[0] - face).abs() < 0.01 * dx && (p[1] - start[1]).abs() < 0.01 * dx,
            "{start:?} went to {p:?}, not onto the face at x = {face}"
        );
    }
    for (p, start) in x[inside.len()..].iter().zip(&beside) {
        assert!(
            (p[0] - start[0]).abs() < 1e-3 * dx && (p[1] - start[1]).abs() < 1e-3 * dx,
            "{start:?} moved to {p:?}"
        );
    }
}

/// F-bar against its definition: a jelly disc (Poisson's ratio 0.49) squeezed unevenly
/// (a random velocity field) for a few substeps with `f_bar`, then one more; from the
/// particles after it, the host forms each particle's averaged volume change, `J-bar - 1 =
/// sum_i w_ip (sum_q w_iq V_q (J_q - 1) / sum_q w_iq V_q)` with the quadratic B-spline
/// weights, and the neo-Hookean stress of `(J-bar / J)^(1/2) F`, in f64: the substep's
/// stress matches it to 2e-6 of the stress of F. Without `f_bar` the stress is that of F
/// itself, which differs.
fn f_bar_stress_is_that_of_the_averaged_volume(b: &BackendRef) {
    use mpm::core::glam::{DMat2, DVec2};
    let material = Material::NeoHookean {
        density: 1000.0,
        youngs: 1e4,
        poisson: 0.49,
    };
    let (mu, lambda) = material.lame();
    let (mu, lambda) = (f64::from(mu), f64::from(lambda));
    let neo_hookean = |f: DMat2| {
        mu * (f * f.transpose() - DMat2::IDENTITY)
            + DMat2::from_diagonal(DVec2::splat(lambda * f.determinant().ln()))
    };
    let largest = |m: DMat2| m.abs().to_cols_array().into_iter().fold(0.0f64, f64::max);
    for f_bar in [true, false] {
        let mut settings = Settings::<2>::new(32, 2e-5);
        settings.gravity = [0.0, 0.0];
        settings.f_bar = f_bar;
        let dx = f64::from(settings.dx);
        let mut s = Solver2::new(b, settings).expect("solver");
        let m = s.add_material(material.clone()).expect("material");
        let disc = Region::Sphere {
            centre: [0.5, 0.5],
            radius: 0.2,
        };
        let x = mpm::core::solver::seeding::fill(&disc, 1.0 / 64.0, Sampling::Jittered, 3)
            .expect("seed");
        let v: Vec<[f32; 2]> = (0..x.len() as u32)
            .map(|i| {
                let r = |k: u32| mpm::core::rng::rand_f32(7, 2 * i + k) - 0.5;
                [r(0), r(1)]
            })
            .collect();
        s.add_moving(&x, &v, (1.0f32 / 64.0).powi(2), m)
            .expect("particles");
        for _ in 0..5 {
            s.substep().expect("substep");
        }
        let p = s.particles.download().expect("particles");
        // Quadratic B-spline stencil: base node and weights per axis.
        let stencil = |x: [f32; 2]| {
            let xc = x.map(|c| f64::from(c) / dx);
            let base = xc.map(|c| (c - 0.5).floor());
            let w = [0, 1].map(|a| {
                let f = xc[a] - base[a];
                [
                    0.5 * (1.5 - f).powi(2),
                    0.75 - (f - 1.0).powi(2),
                    0.5 * (f - 0.5).powi(2),
                ]
            });
            (base.map(|c| c as i64), w)
        };
        let mut nodes = std::collections::HashMap::<(i64, i64), (f64, f64)>::new();
        let dj: Vec<f64> = p
            .grad_u
            .iter()
            .map(|h| (DMat2::IDENTITY + h.as_dmat2()).determinant() - 1.0)
            .collect();
        for (q, x) in p.x.iter().enumerate() {
            let (base, w) = stencil(x.to_array());
            for i in 0..3 {
                for k in 0..3 {
                    let n = nodes.entry((base[0] + i, base[1] + k)).or_default();
                    let share = w[0][i as usize] * w[1][k as usize] * f64::from(p.vol[q]);
                    n.0 += share * dj[q];
                    n.1 += share;
                }
            }
        }
        // Relative to the largest stress of F. The model forms ln J from the volume change
        // (`ln_1p(volume_change(h))`); formed as ln(det F) it rounded to lambda 1e-7, 2e-4
        // of this scale, as large as the averaged stress of a nearly incompressible solid.
        let size = p
            .grad_u
            .iter()
            .map(|h| largest(neo_hookean(DMat2::IDENTITY + h.as_dmat2())))
            .fold(0.0f64, f64::max);
        let mut worst = 0.0f64;
        let mut moved = 0.0f64;
        for (q, x) in p.x.iter().enumerate() {
            let (base, w) = stencil(x.to_array());
            let mut dj_bar = 0.0;
            for i in 0..3 {
                for k in 0..3 {
                    let n = nodes[&(base[0] + i, base[1] + k)];
                    dj_bar += w[0][i as usize] * w[1][k as usize] * n.0 / n.1;
                }
            }
            let f = DMat2::IDENTITY + p.grad_u[q].as_dmat2();
            let f_bar_matrix = ((1.0 + dj_bar) / (1.0 + dj[q])).sqrt() * f;
            let expected = if f_bar {
                neo_hookean(f_bar_matrix)
            } else {
                neo_hookean(f)
            };
            let got = p.tau[q].as_dmat2();
            worst = worst.max(largest(got - expected) / size);
            let shift = neo_hookean(f_bar_matrix) - neo_hookean(f);
            moved = moved.max(largest(shift) / size);
        }
        assert!(
            worst < 2e-6 && moved > 0.1,
            "f_bar {f_bar}: stress off its definition by {worst} (relative); F-bar moves it by {moved}"
        );
    }
}

/// A water column and a snowball thrown at it, on a solver of `settings`.
fn water_and_snow(b: &BackendRef, settings: Settings<2>) -> Solver2 {
    let mut s = Solver2::new(b, settings).expect("solver");
    let w = s.add_material(Material::water()).expect("water");
    let snow = s.add_material(Material::snow()).expect("snow");
    let column = Region::Box {
        min: [0.1, 0.1],
        max: [0.3, 0.4],
    };
    s.add_particles(&column, Sampling::Jittered, 1.0 / 128.0, w, [0.0, 0.0])
        .expect("water");
    let ball = Region::Sphere {
        centre: [0.6, 0.5],
        radius: 0.08,
    };
    s.add_particles(&ball, Sampling::Jittered, 1.0 / 128.0, snow, [-1.0, 0.0])
        .expect("snow");
    s
}

/// Particles rewritten in block order every few substeps (`Settings::sort_every`) move as
/// unsorted ones: water and snow (two materials; the snow's hardening, `jp`, carried
/// along) give the same positions, velocities and states as sets within float noise (the
/// sums of P2G are added in another order); and the sorted run's particles do sit block by
/// block: few changes of block along the particle order, against the seeding order's.
fn sorted_particles_move_as_unsorted_ones(b: &BackendRef) {
    let run = |sort_every: u32| {
        let mut settings = Settings::<2>::new(64, 2e-4);
        settings.sort_every = sort_every;
        let mut s = water_and_snow(b, settings);
        for _ in 0..101 {
            s.substep().expect("substep");
        }
        s.check().expect("check");
        s.particles.download().expect("particles")
    };
    let (plain, sorted) = (run(0), run(5));
    assert_eq!(plain.len(), sorted.len());
    let sorted_values = |v: &mut dyn Iterator<Item = f32>| {
        let mut v: Vec<f32> = v.collect();
        v.sort_by(f32::total_cmp);
        v
    };
    let worst = |a: Vec<f32>, b: Vec<f32>| {
        a.iter()
            .zip(&b)
            .fold(0.0f32, |w, (x, y)| w.max((x - y).abs()))
    };
    for axis in 0..2 {
        let dx = worst(
            sorted_values(&mut plain.x.iter().map(|p| p[axis])),
            sorted_values(&mut sorted.x.iter().map(|p| p[axis])),
        );
        let dv = worst(
            sorted_values(&mut plain.v.iter().map(|p| p[axis])),
            sorted_values(&mut sorted.v.iter().map(|p| p[axis])),
        );
        assert!(
            dx < 1e-5 && dv < 1e-3,
            "axis {axis}: positions {dx}, velocities {dv}"
        );
    }
    let djp = worst(
        sorted_values(&mut plain.jp.iter().copied()),
        sorted_values(&mut sorted.jp.iter().copied()),
    );
    assert!(djp < 1e-4, "snow's hardening state differs by {djp}");
    let count = |h: &mpm::core::solver::HostParticles<Vec2, Mat2>, id: i32| {
        h.material.iter().filter(|&&m| m == id).count()
    };
    assert_eq!(count(&plain, 1), count(&sorted, 1), "snow particles");
    // The last sort was at the start of substep 100, one substep before the end.
    let changes = |h: &mpm::core::solver::HostParticles<Vec2, Mat2>| {
        let bin = |p: &Vec2| ((p.x * 16.0) as i32, (p.y * 16.0) as i32);
        h.x.windows(2).filter(|w| bin(&w[0]) != bin(&w[1])).count()
    };
    let mut bins: Vec<(i32, i32)> = sorted
        .x
        .iter()
        .map(|p| ((p.x * 16.0) as i32, (p.y * 16.0) as i32))
        .collect();
    bins.sort();
    bins.dedup();
    let (in_order, seeded) = (changes(&sorted), changes(&plain));
    assert!(
        in_order < bins.len() + bins.len() / 2 && seeded > 3 * bins.len(),
        "block changes along the particles: sorted {in_order}, unsorted {seeded}, {} blocks",
        bins.len()
    );
}

/// The grid cells that a P2G on a sparse grid activates for live particles at `x`: every
/// cell of each `unit`^2 block that a quadratic stencil reaches.
fn cells_reached(x: &[[f32; 2]], material: &[i32], inv_dx: f32, unit: i32) -> u32 {
    let mut units = std::collections::HashSet::new();
    for (p, _) in x.iter().zip(material).filter(|(_, &m)| m >= 0) {
        let base = p.map(|c| (c * inv_dx - 0.5).floor() as i32);
        for (i, j) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
            units.insert([(base[0] + i) / unit, (base[1] + j) / unit]);
        }
    }
    units.len() as u32 * (unit * unit) as u32
}

#[kernel]
fn count_active(m: &Field<f32, 2>, count: &mut Field<u32>) {
    for c in m.active() {
        count[0] += 1;
    }
}

fn sparse_and_dense_grids_agree(b: &BackendRef) {
    // Positions after 200 substeps, the cells active after the last one, and the cells its
    // P2G reaches (`unit` wide activity units: a block of dense cells, or a bitmasked cell).
    let run = |grid: GridLayout, unit: i32| {
        let mut settings = Settings::<2>::new(64, 2e-4);
        settings.grid = grid;
        let mut s = water_and_snow(b, settings);
        for _ in 0..199 {
            s.substep().expect("substep");
        }
        let (x, material) = s.positions().expect("positions");
        s.substep().expect("substep");
        let pool = s.grid.tree.as_ref().map_or(0, |t| t.pool_capacities()[0]);
        let mut count = Field::<u32>::new(b, [1]).expect("count");
        count_active(&s.grid.m, &mut count).expect("count_active");
        let active = count.download().expect("count")[0];
        let reached = cells_reached(&x, &material, 64.0, unit);
        (s.positions().expect("positions").0, pool, (active, reached))
    };
    let (dense, _, _) = run(GridLayout::Dense, 1);
    for bitmasked in [false, true] {
        // Eight blocks hold far less than the scene needs: the pool grows before the first
        // substep (from the particles) and while the water spreads (from its occupancy).
        b.reset_profile();
        let (sparse, pool, (active, reached)) = run(
            GridLayout::Sparse {
                block: 4,
                bitmasked,
                reserve: 8,
            },
            if bitmasked { 1 } else { 4 },
        );
        // Exactly the units the last P2G reached are active: the pass that activates them on
        // a GPU (a mark per block, cleared as it activates) neither misses one (that fails
        // the frozen substep) nor keeps one from an earlier substep.
        assert_eq!(
            active, reached,
            "bitmasked {bitmasked}: cells active after a substep"
        );
        // On a GPU a grid of dense blocks runs frozen, its blocks activated by a pass of
        // their own, which must have found every block the P2G adds into (a missed one fails
        // the substep).
        let touched = b.profile().iter().any(|t| t.name == "touch");
        let gpu = b.kind() != mpm::core::backend::BackendKind::Cpu;
        assert_eq!(
            touched,
            gpu && !bitmasked,
            "bitmasked {bitmasked}: the activation pass ran"
        );
        assert!(pool > 8, "the pool should have grown, it has {pool} blocks");
        assert_eq!(dense.len(), sparse.len());
        let worst = dense
            .iter()
            .zip(&sparse)
            .map(|(a, b)| (a[0] - b[0]).abs().max((a[1] - b[1]).abs()))
            .fold(0.0f32, f32::max);
        assert!(
            worst < 1e-4,
            "bitmasked {bitmasked}: positions differ by up to {worst}"
        );
    }
}

fn bad_settings_and_inputs_are_named(b: &BackendRef) {
    let msg = |r: mpm::core::solver::Result<Solver2>| match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected an error"),
    };
    let mut s = Settings::<2>::new(64, 1e-4);
    s.flip = 1.5;
    assert!(msg(Solver2::new(b, s)).contains("flip"));
    let mut s = Settings::<2>::new(64, 1e-4);
    s.time_step = TimeStep::Fixed(f32::NAN);
    assert!(msg(Solver2::new(b, s)).contains("time step"));
    let mut s = Settings::<2>::new(64, 1e-4);
    s.grid = GridLayout::Sparse {
        block: 5,
        bitmasked: false,
        reserve: 10,
    };
    assert!(msg(Solver2::new(b, s)).contains("divide"));
    let mut s = Settings::<2>::new(64, 1e-4);
    s.walls.thickness = 2;
    assert!(msg(Solver2::new(b, s)).contains("at least 3 cells thick"));
    let mut s = Settings::<2>::new(64, 1e-4);
    s.damping = -1.0;
    assert!(msg(Solver2::new(b, s)).contains("damping"));

    let mut solver = Solver2::new(b, Settings::new(64, 1e-4)).expect("solver");
    let e = solver
        .add_material(Material::NeoHookean {
            density: 1000.0,
            youngs: 1e4,
            poisson: 0.5,
        })
        .expect_err("nu = 0.5");
    assert!(e.to_string().contains("poisson"), "{e}");
    let m = solver.add_material(jelly()).expect("material");
    let outside = Region::Box {
        min: [0.0, 0.0],
        max: [0.1, 0.1],
    };
    let e = solver
        .add_particles(&outside, Sampling::Regular, 0.01, m, [0.0, 0.0])
        .expect_err("outside");
    assert!(e.to_string().contains("outside the domain"), "{e}");
    // Behind a wall's surface (2.5 cells in with the default walls; the first particle at
    // 2.3 cells) is outside too.
    let behind = Region::Box {
        min: [2.0 / 64.0, 0.5],
        max: [0.2, 0.6],
    };
    let e = solver
        .add_particles(&behind, Sampling::Regular, 0.01, m, [0.0, 0.0])
        .expect_err("behind the wall");
    assert!(e.to_string().contains("outside the domain"), "{e}");
    // 2.8e9 particles (under the 2^32 lattice cap) need hundreds of GiB: refused with the
    // estimate before anything is allocated, where this used to abort in the allocator.
    let huge = Region::Box {
        min: [0.1, 0.1],
        max: [0.9, 0.9],
    };
    let e = solver
        .add_particles(&huge, Sampling::Regular, 1.5e-5, m, [0.0, 0.0])
        .expect_err("too many particles");
    let t = e.to_string();
    assert!(
        t.contains("GiB") && t.contains("available") && t.contains("spacing"),
        "{t}"
    );
    let e = solver
        .add_collider(Collider::fixed(
            Shape::Sphere {
                centre: [0.5, 0.5, 0.0],
                radius: -1.0,
            },
            Condition::Sticky,
        ))
        .expect_err("negative radius");
    assert!(e.to_string().contains("radius"), "{e}");
}

/// Bodies added one after another keep the earlier ones, in order, when the particle fields
/// grow, and a body larger than one upload batch (2^18 particles) arrives whole.
fn adding_bodies_keeps_the_earlier_ones(b: &BackendRef) {
    let mut s = Solver2::new(b, Settings::new(64, 1e-4)).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let small = Region::Box {
        min: [0.2, 0.2],
        max: [0.3, 0.3],
    };
    let n1 = s
        .add_particles(&small, Sampling::Regular, 1.0 / 128.0, m, [0.0, 0.0])
        .expect("first body");
    let (first, _) = s.positions().expect("positions");
    let big = Region::Box {
        min: [0.1, 0.4],
        max: [0.9, 0.9],
    };
    let n2 = s
        .add_particles(&big, Sampling::Regular, 1.0 / 1000.0, m, [0.0, 0.0])
        .expect("second body");
    assert!(
        n2 > 1 << 18,
        "the second body ({n2}) must span several batches"
    );
    let (all, materials) = s.positions().expect("positions");
    assert_eq!(all.len(), n1 + n2);
    assert_eq!(
        &all[..n1],
        &first[..],
        "the first body moved or was overwritten"
    );
    assert!(materials.iter().all(|&id| id == 0));
    assert!(
        all[n1..].iter().all(|p| big.contains(*p)),
        "the second body is whole"
    );
    let last = all[n1 + n2 - 1];
    assert!(
        last[0] > 0.89 && last[1] > 0.89,
        "its last particle {last:?}"
    );
}

/// Distance a jelly block slides down a plane tilted by `angle` in `t` seconds.
fn slide(b: &BackendRef, angle: f32, friction: f32, t: f64) -> f32 {
    let mut s = Solver2::new(b, Settings::new(64, 1e-4)).expect("solver");
    let m = s
        .add_material(Material::NeoHookean {
            density: 1000.0,
            youngs: 1e5,
            poisson: 0.3,
        })
        .expect("material");
    let (sin, cos) = angle.sin_cos();
    let origin = [0.5f32, 0.4];
    s.add_collider(Collider::fixed(
        Shape::Plane {
            point: [origin[0], origin[1], 0.0],
            normal: [-sin, cos, 0.0],
        },
        Condition::Separate { friction },
    ))
    .expect("plane");
    // A 0.1 x 0.05 block resting on the slope, in the slope's frame.
    let spacing = 1.0 / 128.0;
    let mut x = Vec::new();
    for i in 0..13 {
        for j in 0..6 {
            let (u, w) = (
                (i as f32 + 0.5) * spacing,
                (j as f32 + 0.5) * spacing + 0.5 / 64.0,
            );
            x.push([origin[0] + u * cos - w * sin, origin[1] + u * sin + w * cos]);
        }
    }
    s.add_positions(&x, spacing * spacing, m, [0.0, 0.0])
        .expect("block");
    let c0 = mean(&s.positions().expect("x").0);
    s.advance(t).expect("run");
    let c1 = mean(&s.positions().expect("x").0);
    // Along the slope, downhill positive.
    -((c1[0] - c0[0]) * cos + (c1[1] - c0[1]) * sin)
}

fn coulomb_friction_on_an_inclined_plane(b: &BackendRef) {
    // A block on a slope of angle theta under friction mu slides with acceleration
    // g (sin theta - mu cos theta), or sticks when mu >= tan theta.
    let (angle, g, t) = (20f32.to_radians(), 9.8f32, 0.25f64);
    let free = slide(b, angle, 0.0, t);
    let expected = 0.5 * g * angle.sin() * (t * t) as f32;
    assert!(
        (free - expected).abs() < 0.1 * expected,
        "frictionless slide {free}, expected {expected}"
    );
    let mu = 0.2;
    let rough = slide(b, angle, mu, t);
    let expected_rough = 0.5 * g * (angle.sin() - mu * angle.cos()) * (t * t) as f32;
    assert!(
        (rough - expected_rough).abs() < 0.2 * expected_rough,
        "slide under mu = {mu}: {rough}, expected {expected_rough}"
    );
    let stuck = slide(b, angle, 0.6, t);
    assert!(
        stuck.abs() < 0.05 * expected,
        "mu = 0.6 > tan(20 deg) must hold the block, it slid {stuck}"
    );
}

per_backend! {
    adding_bodies_keeps_the_earlier_ones => adding_bodies_keeps_the_earlier_ones,
    free_fall_both_splines => free_fall_both_splines,
    free_fall_3d => free_fall_3d,
    transfers_conserve_mass_and_linear_momentum => transfers_conserve_mass_and_linear_momentum,
    apic_conserves_angular_momentum => apic_conserves_angular_momentum,
    particles_leaving_the_domain_are_removed => particles_leaving_the_domain_are_removed,
    emitters_add_particles_over_time => emitters_add_particles_over_time,
    colliders_hold_material_up => colliders_hold_material_up,
    a_moving_collider_pushes_material => a_moving_collider_pushes_material,
    divergence_is_reported_with_step_particle_and_material => divergence_is_reported_with_step_particle_and_material,
    adaptive_steps_follow_the_fastest_signal => adaptive_steps_follow_the_fastest_signal,
    impacts_reach_the_rankine_hugoniot_state => impacts_reach_the_rankine_hugoniot_state,
    distance_field_colliders_act_as_their_shapes => distance_field_colliders_act_as_their_shapes,
    a_thin_moving_wall_sweeps_the_sand_ahead => a_thin_moving_wall_sweeps_the_sand_ahead,
    a_spinning_collider_turns_what_sticks_to_it => a_spinning_collider_turns_what_sticks_to_it,
    f_bar_stress_is_that_of_the_averaged_volume => f_bar_stress_is_that_of_the_averaged_volume,
    a_turned_distance_field_stands_where_its_rotation_puts_it => a_turned_distance_field_stands_where_its_rotation_puts_it,
    sparse_and_dense_grids_agree => sparse_and_dense_grids_agree,
    sorted_particles_move_as_unsorted_ones => sorted_particles_move_as_unsorted_ones,
    bad_settings_and_inputs_are_named => bad_settings_and_inputs_are_named,
    coulomb_friction_on_an_inclined_plane => coulomb_friction_on_an_inclined_plane,
    profiles_name_each_loop => profiles_name_each_loop,
    bulk_viscosity_adds_its_pressure_in_compression_only => bulk_viscosity_adds_its_pressure_in_compression_only,
}

/// One substep of a block in uniform compression (`v = -a (x - centre)`, so `C = grad v =
/// -a I` inside) or expansion, with and without bulk viscosity: the stresses differ by
/// the viscous Kirchhoff pressure `-rho0 dx (quadratic dx e^2 - linear c e) I` of
/// each particle's own rate `e = tr C` where it compresses, and not at all where it expands.
fn bulk_viscosity_adds_its_pressure_in_compression_only(b: &BackendRef) {
    let material = jelly();
    let (rho0, c) = (material.density(), material.wave_speed());
    let viscosity = mpm::core::solver::BulkViscosity::STANDARD;
    for a in [200.0f32, -200.0] {
        let run = |viscous: bool| {
            let mut settings = Settings::<2>::new(64, 1e-5);
            settings.gravity = [0.0, 0.0];
            if viscous {
                settings.bulk_viscosity = viscosity;
            }
            let mut s = Solver2::new(b, settings).expect("solver");
            let m = s.add_material(material.clone()).expect("material");
            let spacing = 1.0 / 128.0;
            let (mut x, mut v) = (Vec::new(), Vec::new());
            for i in 0..32 {
                for j in 0..32 {
                    let p = [
                        0.3 + (i as f32 + 0.5) * spacing,
                        0.3 + (j as f32 + 0.5) * spacing,
                    ];
                    x.push(p);
                    v.push([-a * (p[0] - 0.425), -a * (p[1] - 0.425)]);
                }
            }
            s.add_moving(&x, &v, spacing * spacing, m)
                .expect("particles");
            s.substep().expect("substep");
            let tau = s.particles.tau.download().expect("tau");
            let cs = s.particles.c.download().expect("C");
            (tau, cs)
        };
        let (plain, _) = run(false);
        let (viscous, cs) = run(true);
        let dx = 1.0 / 64.0;
        let mut compressed = 0;
        for ((t0, t1), cp) in plain.iter().zip(&viscous).zip(&cs) {
            let e = cp.x_axis.x + cp.y_axis.y;
            let q = if e < 0.0 {
                compressed += 1;
                rho0 * dx * (viscosity.quadratic * dx * e * e - viscosity.linear * c * e)
            } else {
                0.0
            };
            let expected = *t0 - Mat2::IDENTITY * q;
            let largest = |m: Mat2| m.abs().x_axis.max(m.abs().y_axis).max_element();
            let err = largest(*t1 - expected);
            assert!(
                err <= 1e-4 * q.abs() + 1e-5 * largest(*t0).max(1.0),
                "a = {a}: e = {e}, q = {q}: {t1:?} against {expected:?}"
            );
            // (Exact on the CPU; a GPU's atomics sum the grid in any order, so the two runs
            // differ by roundings: the tolerance above.)
            if a < 0.0 {
                assert_eq!(q, 0.0);
            }
        }
        assert_eq!(
            compressed > 900,
            a > 0.0,
            "{compressed} particles in compression"
        );
    }
}

/// One labelled loop, one not.
#[mpm::kernel]
fn two_loops(a: &mut mpm::Field<f32>) {
    'doubled: for i in a.indices() {
        a[i] *= 2.0;
    }
    for i in a.indices() {
        a[i] += 1.0;
    }
}

/// The profile names each loop: by its label (the solver's substep labels clear, P2G, grid
/// update and G2P with the stress update), else by its position.
fn profiles_name_each_loop(b: &BackendRef) {
    let mut a = mpm::Field::from_slice(b, [4], &[1.0f32, 2.0, 3.0, 4.0]).expect("field");
    two_loops(&mut a).expect("launch");
    assert_eq!(a.download().expect("download"), vec![3.0, 5.0, 7.0, 9.0]);
    let mut s = Solver2::new(b, Settings::<2>::new(32, 1e-4)).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let region = Region::Box {
        min: [0.4, 0.4],
        max: [0.6, 0.6],
    };
    s.add_particles(&region, Sampling::Regular, 1.0 / 64.0, m, [0.0, 0.0])
        .expect("particles");
    s.substep().expect("substep");
    let profile = b.profile();
    let names = |kernel: &str| -> Vec<(usize, String)> {
        let mut v: Vec<(usize, String)> = profile
            .iter()
            .filter(|t| t.kernel.ends_with(kernel))
            .map(|t| (t.loop_index, t.name.clone()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names("::two_loops"),
        vec![(0, "doubled".to_string()), (1, "#1".to_string())],
        "{profile:#?}"
    );
    // Other checks of this process run the 3D and cubic substeps on the same backend.
    let substep: Vec<String> = names("::dim2::mls_mpm::substep_quadratic")
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert_eq!(
        substep,
        [
            "speeds",
            "clear",
            "heat_clear",
            "p2g",
            "heat_p2g",
            "color_clear",
            "color_p2g",
            "capillary",
            "grid_update",
            "heat_nodes",
            "conduct",
            "heat_g2p",
            "g2p_stress",
            "f_bar_scatter",
            "f_bar_stress"
        ],
        "{profile:#?}"
    );
}
