//! Surface tension (`Settings::surface_tension`) against Laplace's law: a square drop of
//! liquid relaxes to a circle (a cube to a sphere) whose pressure stands `sigma / R` (2D) or
//! `2 sigma / R` (3D) above the empty space around it (Young 1805, Laplace 1806; e.g.
//! de Gennes, Brochard-Wyart and Quéré, "Capillarity and Wetting Phenomena", 2004, section
//! 1.1.3); a drop of one liquid in another stands at the sum of their tensions over its
//! radius; two immiscible liquids of different density separate into layers, the heavier
//! below; the capillary step; the messages.

mod common;

use std::f64::consts::PI;

use mpm::backend;
use mpm::core::glam::DMat3;
use mpm::core::solver::{
    seeding, Condition, GridLayout, Material, Region, Sampling, Settings, Solver, Solver2, Space,
    TimeStep, Walls, CAPILLARY_STEP, D2, D3,
};
use mpm::BackendRef;

/// N in 2D (per metre of depth).
const SIGMA: f32 = 10.0;

/// A soft, viscous, cohesive liquid: Laplace pressures of tens of pascals compress it by
/// about a thousandth, and it holds tension (a drop under surface tension is cohesive; see
/// `Settings::surface_tension` on `free_surface`).
fn liquid(density: f32) -> Material {
    Material::Water {
        density,
        bulk: 1e4,
        gamma: 7.0,
        viscosity: 1.0,
        free_surface: false,
    }
}

/// A solver of `n` cells per axis on the unit square or cube with surface tension, slip
/// walls three cells thick, an adaptive step, and `damping` (1/s) that takes the motion out
/// without touching the equilibrium it reaches.
fn solver<S: Space<D>, const D: usize>(
    b: &BackendRef,
    n: u32,
    grid: GridLayout,
    gravity: f32,
    damping: f32,
) -> Solver<S, D> {
    let mut g = [0.0; D];
    g[1] = -gravity;
    let settings = Settings {
        grid,
        gravity: g,
        damping,
        surface_tension: true,
        time_step: TimeStep::Adaptive {
            cfl: 0.5,
            max: 2e-3,
        },
        walls: Walls {
            thickness: 3,
            condition: Condition::Slip { friction: 0.0 },
        },
        ..Settings::new(n, 1e-3)
    };
    Solver::new(b, settings).expect("solver")
}

/// A square (cube) of `side` metres centred in the domain, two particles per cell per axis.
fn square<S: Space<D>, const D: usize>(
    s: &mut Solver<S, D>,
    side: f32,
    centre: [f32; D],
    material: mpm::core::solver::MaterialId,
) {
    let dx = s.settings().dx;
    s.add_particles(
        &Region::Box {
            min: centre.map(|c| c - side / 2.0),
            max: centre.map(|c| c + side / 2.0),
        },
        Sampling::Regular,
        dx / 2.0,
        material,
        [0.0; D],
    )
    .expect("particles");
}

/// What a drop's particles tell: its area (volume) from their current volumes, its
/// centre, the polar moment of that area about the centre in units of a disc's
/// (`A^2 / 2 pi`; a ball's `3 / 5 R^2 V` in 3D): 1 for a disc, 1.047 for a square (1.083 for
/// a cube), and its mean Cauchy pressure.
///
/// The mean pressure is the Laplace pressure's measure: by the virial theorem a drop at rest
/// holds `integral of p dV = (d - 1) / d sigma S` (S its surface), `sigma / R` on average in
/// a disc and `2 sigma / R` in a ball, however the pressure is spread inside it; and so does
/// the discrete drop, since MLS-MPM's weight gradients reproduce linear fields
/// (`sum_i x_i (x) grad w_ip = I`), so that the particles' summed stress trace equals the
/// virial of the capillary forces on the nodes. A single particle's pressure is not: a
/// J-based liquid's particle pressures scatter by hundreds of pascals about the mean (the
/// stencil's null space), and its surface layer carries more than its core.
struct Drop {
    size: f64,
    centre: Vec<f64>,
    moment: f64,
    pressure: f64,
}

impl Drop {
    /// The radius of a disc (ball) of the drop's size.
    fn radius(&self, dimension: usize) -> f64 {
        match dimension {
            2 => (self.size / PI).sqrt(),
            _ => (3.0 * self.size / (4.0 * PI)).cbrt(),
        }
    }
}

/// Measures the particles of material `id` of a solver (see `Drop`).
fn measure<S: Space<D>, const D: usize>(s: &Solver<S, D>, id: i32) -> Drop {
    let p = s.particles.download().expect("download");
    let mut parts = Vec::new();
    for i in 0..p.len() {
        if p.material[i] != id {
            continue;
        }
        let x = S::components(p.x[i]).map(f64::from);
        let h = S::padded(p.grad_u[i]);
        let f = h + DMat3::IDENTITY;
        // In 2D, the upper 2x2 block's determinant.
        let j = if D == 2 {
            f.x_axis.x * f.y_axis.y - f.x_axis.y * f.y_axis.x
        } else {
            f.determinant()
        };
        let tau = S::padded(p.tau[i]);
        let trace = tau.x_axis.x + tau.y_axis.y + tau.z_axis.z;
        let pressure = -trace / (D as f64 * j);
        parts.push((x, p.vol[i] as f64 * j, pressure));
    }
    let size: f64 = parts.iter().map(|q| q.1).sum();
    let centre: Vec<f64> = (0..D)
        .map(|a| parts.iter().map(|q| q.0[a] * q.1).sum::<f64>() / size)
        .collect();
    let r2 = |x: &[f64; D]| (0..D).map(|a| (x[a] - centre[a]).powi(2)).sum::<f64>();
    let polar: f64 = parts.iter().map(|q| q.1 * r2(&q.0)).sum();
    let disc = match D {
        2 => size * size / (2.0 * PI),
        _ => 0.6 * (3.0 * size / (4.0 * PI)).cbrt().powi(2) * size,
    };
    let pressure = parts.iter().map(|q| q.2 * q.1).sum::<f64>() / size;
    Drop {
        size,
        centre,
        moment: polar / disc,
        pressure,
    }
}

/// Runs `seconds`, then averages the drop's pressure over `window` more seconds, sampled
/// every 20 ms (acoustic ringing averages out); returns the last measurement with that mean
/// pressure.
fn settle<S: Space<D>, const D: usize>(
    s: &mut Solver<S, D>,
    id: i32,
    seconds: f64,
    window: f64,
) -> Drop {
    s.advance(seconds).expect("settling");
    let samples = (window / 0.02).round() as usize;
    let mut sum = 0.0;
    let mut last = None;
    for _ in 0..samples {
        s.advance(0.02).expect("averaging");
        let d = measure(s, id);
        sum += d.pressure;
        last = Some(d);
    }
    let mut d = last.expect("samples");
    d.pressure = sum / samples as f64;
    d
}

/// A square (cube) drop of `side` metres on `n` cells per axis, centred, becomes round: its
/// moment starts above `start_above` and ends below `end_below`, its mean pressure within
/// 10% of Laplace's `(d - 1) sigma / R` after `seconds` and a second's average, its centre
/// within half a cell of where it was.
#[allow(clippy::too_many_arguments)]
fn drop_rounds<S: Space<D>, const D: usize>(
    b: &BackendRef,
    n: u32,
    grid: GridLayout,
    side: f32,
    seconds: f64,
    start_above: f64,
    end_below: f64,
    what: &str,
) {
    let mut s = solver::<S, D>(b, n, grid, 0.0, 10.0);
    let m = s.add_material(liquid(1000.0)).expect("liquid");
    s.set_surface_tension(m, SIGMA).expect("tension");
    square(&mut s, side, [0.5; D], m);
    let start = measure(&s, 0);
    assert!(
        start.moment > start_above,
        "{what}: the starting shape's moment {} is not above {start_above}",
        start.moment
    );
    let d = settle(&mut s, 0, seconds, 1.0);
    let r = d.radius(D);
    let laplace = (D - 1) as f64 * SIGMA as f64 / r;
    eprintln!(
        "{what}: side {side}: R = {r:.4} m, moment {:.5}, pressure {:.2} Pa against \
         (d - 1) sigma / R = {laplace:.2} Pa ({:+.1}%)",
        d.moment,
        d.pressure,
        100.0 * (d.pressure / laplace - 1.0)
    );
    assert!(
        d.moment < end_below,
        "{what}: the drop's moment {} stays above {end_below} (it started at {})",
        d.moment,
        start.moment
    );
    assert!(
        (d.pressure / laplace - 1.0).abs() < 0.1,
        "{what}: the drop's pressure {:.2} Pa is more than 10% off (d - 1) sigma / R = \
         {laplace:.2} Pa",
        d.pressure
    );
    let half_cell = 0.5 / n as f64;
    assert!(
        d.centre.iter().all(|c| (c - 0.5).abs() < half_cell),
        "{what}: the drop drifted to {:?}",
        d.centre
    );
}

/// A square drop on 64^2 cells (a square's moment is 1.047, a disc's 1).
fn square_drop(b: &BackendRef, grid: GridLayout, side: f32, what: &str) {
    drop_rounds::<D2, 2>(b, 64, grid, side, 3.0, 1.04, 1.003, what);
}

#[test]
fn a_square_drop_becomes_a_circle_at_the_laplace_pressure() {
    // R = 10.7 and 7.1 cells: the pressure follows 1 / R.
    square_drop(&backend::cpu(), GridLayout::Dense, 0.3, "dense");
    square_drop(&backend::cpu(), GridLayout::Dense, 0.2, "dense");
}

#[test]
fn a_square_drop_on_a_sparse_grid() {
    let sparse = GridLayout::Sparse {
        block: 8,
        bitmasked: false,
        reserve: 16,
    };
    square_drop(&backend::cpu(), sparse, 0.3, "sparse");
}

#[test]
fn a_square_drop_on_vulkan() {
    common::with_backends(|b| square_drop(&b.vk, GridLayout::Dense, 0.3, "Vulkan"));
}

/// A cube on 32^3 cells relaxes to a ball at `2 sigma / R` (a cube's moment is 1.083).
#[test]
fn a_cube_drop_becomes_a_ball_at_the_laplace_pressure() {
    drop_rounds::<D3, 3>(
        &backend::cpu(),
        32,
        GridLayout::Dense,
        0.4,
        2.0,
        1.07,
        1.005,
        "3D",
    );
}

/// The particle positions of a regular lattice at half a cell in `region`, split by `inside`.
fn lattice(
    dx: f32,
    region: &Region<2>,
    inside: impl Fn([f32; 2]) -> bool,
) -> (Vec<[f32; 2]>, Vec<[f32; 2]>) {
    seeding::fill(region, dx / 2.0, Sampling::Regular, 0)
        .expect("lattice")
        .into_iter()
        .partition(|p| inside(*p))
}

/// Two liquids, heavy above light, separate under gravity into layers: the heavy one ends
/// below, and few particles of either are left more than two cells into the other's layer.
/// (One grid velocity cannot slide one liquid under another within a cell: a film of the
/// light one, a particle or two thick, stays on the floor; it is left out of the count.)
#[test]
fn two_immiscible_liquids_separate_into_layers() {
    let b = backend::cpu();
    let n = 48;
    let dx = 1.0 / n as f32;
    let mut s = solver::<D2, 2>(&b, n, GridLayout::Dense, 9.8, 0.0);
    // Stiffer than `liquid`: the hydrostatic pressure compresses them by about 1%.
    let stiff = |density| Material::Water {
        density,
        bulk: 1e5,
        gamma: 7.0,
        viscosity: 0.5,
        free_surface: false,
    };
    let light = s.add_material(stiff(1000.0)).expect("light");
    let heavy = s.add_material(stiff(2000.0)).expect("heavy");
    s.set_surface_tension(light, SIGMA).expect("tension");
    s.set_surface_tension(heavy, SIGMA).expect("tension");
    // A wavy interface, so that the overturning does not wait for round-off.
    let (top, bottom) = lattice(
        dx,
        &Region::Box {
            min: [0.1, 0.1],
            max: [0.9, 0.7],
        },
        |p| p[1] > 0.4 + 0.03 * (2.0 * std::f32::consts::PI * (p[0] - 0.1) / 0.8).cos(),
    );
    let volume = (dx / 2.0).powi(2);
    s.add_positions(&top, volume, heavy, [0.0; 2])
        .expect("heavy");
    s.add_positions(&bottom, volume, light, [0.0; 2])
        .expect("light");
    s.advance(3.5).expect("run");

    let p = s.particles.download().expect("download");
    let heights = |id: i32| -> Vec<f32> {
        (p.x.iter().zip(&p.material))
            .filter(|q| *q.1 == id)
            .map(|q| q.0.y)
            .collect()
    };
    let (heavy_y, light_y) = (heights(heavy.0), heights(light.0));
    let mut all: Vec<f32> = heavy_y.iter().chain(&light_y).copied().collect();
    all.sort_by(f32::total_cmp);
    // Where the interface would lie were they layered, and the floor's band.
    let interface = all[heavy_y.len() - 1];
    let floor = all[0] + 2.0 * dx;
    let high = heavy_y
        .iter()
        .filter(|&&y| y > interface + 2.0 * dx)
        .count();
    let low = (light_y.iter())
        .filter(|&&y| y < interface - 2.0 * dx && y > floor)
        .count();
    let misplaced = (high + low) as f64 / all.len() as f64;
    let mean = |ys: &[f32]| ys.iter().sum::<f32>() / ys.len() as f32;
    eprintln!(
        "layers: interface at {interface:.3} m; {high} heavy particles above it and {low} light \
         ones below it (more than two cells away): {:.1}%; mean heights {:.3} m (heavy), {:.3} m \
         (light)",
        100.0 * misplaced,
        mean(&heavy_y),
        mean(&light_y)
    );
    assert!(
        mean(&heavy_y) + 0.1 < mean(&light_y),
        "the heavy liquid (mean height {}) is not below the light one ({})",
        mean(&heavy_y),
        mean(&light_y)
    );
    assert!(
        misplaced < 0.08,
        "{:.1}% of the particles are more than two cells into the other liquid's layer",
        100.0 * misplaced
    );
}

/// A drop of one liquid inside a drop of another (equally dense, no gravity) stays round
/// and central, and the two interfaces' tensions add up in the pressure: by the virial
/// (see `Drop`) the mean pressure of both is `((sigma_a + sigma_b) S_a + sigma_b S_b) /
/// (2 A)` in 2D, the inner interface's tension the sum of the liquids' own (with the inner
/// liquid's alone it would be 20% less).
#[test]
fn a_drop_in_another_liquid_holds_the_sum_of_their_tensions() {
    let b = backend::cpu();
    let n = 64;
    let dx = 1.0 / n as f32;
    let mut s = solver::<D2, 2>(&b, n, GridLayout::Dense, 0.0, 10.0);
    let (sigma_a, sigma_b) = (6.0f32, 4.0f32);
    let a = s.add_material(liquid(1000.0)).expect("inner");
    let outer = s.add_material(liquid(1000.0)).expect("outer");
    s.set_surface_tension(a, sigma_a).expect("tension");
    s.set_surface_tension(outer, sigma_b).expect("tension");
    let (inside, around) = lattice(
        dx,
        &Region::Box {
            min: [0.2, 0.2],
            max: [0.8, 0.8],
        },
        |p| p.iter().all(|c| (c - 0.5).abs() < 0.125),
    );
    let volume = (dx / 2.0).powi(2);
    s.add_positions(&inside, volume, a, [0.0; 2])
        .expect("inner");
    s.add_positions(&around, volume, outer, [0.0; 2])
        .expect("outer");
    s.advance(3.0).expect("settling");
    // The mean pressure of both over a second.
    let mut sum = 0.0;
    let mut both = 0.0;
    for _ in 0..50 {
        s.advance(0.02).expect("averaging");
        let (i, o) = (measure(&s, a.0), measure(&s, outer.0));
        sum += i.pressure * i.size + o.pressure * o.size;
        both += i.size + o.size;
    }
    let pressure = sum / both;
    let (d, e) = (measure(&s, a.0), measure(&s, outer.0));
    let (ra, rb) = (d.radius(2), ((d.size + e.size) / PI).sqrt());
    let virial = ((sigma_a + sigma_b) as f64 * 2.0 * PI * ra + sigma_b as f64 * 2.0 * PI * rb)
        / (2.0 * PI * rb * rb);
    // Were the inner interface's tension the inner liquid's alone.
    let alone = (sigma_a as f64 * ra + sigma_b as f64 * rb) / (rb * rb);
    eprintln!(
        "drop in a drop: R {ra:.4} m in {rb:.4} m, moment {:.5}, centres {:?} and {:?}; mean \
         pressure {pressure:.2} Pa against {virial:.2} Pa ({:+.1}%; {alone:.2} Pa with the \
         inner liquid's tension alone)",
        d.moment,
        d.centre,
        e.centre,
        100.0 * (pressure / virial - 1.0),
    );
    assert!(d.moment < 1.003, "the inner drop's moment {}", d.moment);
    assert!(
        (0..2).all(|k| (d.centre[k] - e.centre[k]).abs() < dx as f64),
        "the inner drop left the centre: {:?} in {:?}",
        d.centre,
        e.centre
    );
    assert!(
        (pressure / virial - 1.0).abs() < 0.1,
        "the mean pressure {pressure:.2} Pa is more than 10% off the tensions' {virial:.2} Pa"
    );
}

/// The adaptive step keeps to the capillary step of the stiffest liquid; a fixed step above
/// it is refused, naming the material.
#[test]
fn the_step_resolves_capillary_waves() {
    let b = backend::cpu();
    let n = 64;
    let dx = 1.0 / n as f32;
    let mut s = solver::<D2, 2>(&b, n, GridLayout::Dense, 0.0, 0.0);
    let (sigma, density) = (2000.0f32, 500.0f32);
    let m = s.add_material(liquid(density)).expect("liquid");
    s.set_surface_tension(m, sigma).expect("tension");
    square(&mut s, 0.3, [0.5, 0.5], m);
    let bound = CAPILLARY_STEP * (density * dx.powi(3) / sigma).sqrt();
    // The waves alone would allow about twice the step.
    let sound = 0.5 * dx / (7e4f32 / density).sqrt();
    assert!(sound > 1.5 * bound, "sound's step {sound} vs {bound}");
    let dt = s.next_dt();
    assert!(
        dt <= bound && dt > 0.99 * bound,
        "adaptive step {dt} against the capillary step {bound}"
    );
    // The violent relaxation (capillary speeds near 3 m/s) runs stably at it.
    s.advance(0.3)
        .expect("the drop relaxes at the capillary step");

    let fixed = Settings {
        surface_tension: true,
        time_step: TimeStep::Fixed(1.5 * bound),
        ..Settings::new(n, 1e-3)
    };
    let mut s = Solver2::new(&b, fixed).expect("solver");
    let m = s.add_material(liquid(density)).expect("liquid");
    let e = s
        .set_surface_tension(m, sigma)
        .expect_err("a step above the bound")
        .to_string();
    assert!(
        e.contains("water material's surface tension 2000")
            && e.contains("capillary step")
            && e.contains("adaptive"),
        "{e}"
    );
}

#[test]
fn bad_surface_tensions_are_refused() {
    let b = backend::cpu();
    let mut off = Solver2::new(&b, Settings::new(16, 1e-4)).expect("solver");
    let m = off.add_material(liquid(1000.0)).expect("liquid");
    let e = off
        .set_surface_tension(m, 1.0)
        .expect_err("off")
        .to_string();
    assert!(
        e.contains("needs the solver's surface_tension setting"),
        "{e}"
    );

    let on = Settings {
        surface_tension: true,
        ..Settings::new(16, 1e-4)
    };
    let mut s = Solver2::new(&b, on).expect("solver");
    let ids: Vec<_> = (0..5)
        .map(|_| s.add_material(liquid(1000.0)).expect("liquid"))
        .collect();
    for bad in [-1.0, f32::NAN, f32::INFINITY] {
        let e = s
            .set_surface_tension(ids[0], bad)
            .expect_err("bad")
            .to_string();
        assert!(e.contains("must be finite and >= 0"), "{e}");
    }
    for &id in &ids[..4] {
        s.set_surface_tension(id, 1.0).expect("four channels");
    }
    let e = s
        .set_surface_tension(ids[4], 1.0)
        .expect_err("a fifth")
        .to_string();
    assert!(
        e.contains("at most 4 materials have a surface tension"),
        "{e}"
    );
    // Setting one again, or taking one away, keeps to four.
    s.set_surface_tension(ids[3], 2.0)
        .expect("the same channel");
    s.set_surface_tension(ids[3], 0.0).expect("none");
    s.set_surface_tension(ids[4], 1.0)
        .expect("its channel freed");
    assert_eq!(s.materials.tension_channels(), [1.0; 4]);
    let e = s
        .set_surface_tension(mpm::core::solver::MaterialId(9), 1.0)
        .expect_err("no such material")
        .to_string();
    assert!(e.contains("material id 9"), "{e}");
}
