//! Heat conduction against its analytic solutions: two slabs at different temperatures
//! brought into contact, and a slab against a wall or collider held at a temperature, both
//! following the error function of 1D transient conduction (Carslaw and Jaeger, "Conduction
//! of Heat in Solids", 2nd ed. 1959, sections 2.4 and 2.5); the heat the grid moves adds up
//! to zero; the stable step; temperature-dependent stiffness against the model's stress.

mod common;

use mpm::core::glam::{Mat2, Vec2};
use mpm::core::materials::dim2;
use mpm::core::solver::{
    Collider, Condition, GridLayout, Heat, HeatBoundary, Material, Region, Sampling, Settings,
    Shape, Solver2, Solver3, Thermal, TimeStep, Walls,
};
use mpm::{backend, BackendRef};

/// The error function by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = t
        * (0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    (1.0 - poly * (-x * x).exp()).copysign(x)
}

const DX: f32 = 0.01;
/// Pointer blocks of 4^2 cells, dense inside.
const SPARSE: GridLayout = GridLayout::Sparse {
    block: 4,
    bitmasked: false,
    reserve: 64,
};
/// Thermal diffusivity k / (rho c), m^2/s: 5e4 W/(m K) over 1000 kg/m^3 and 1000 J/(kg K).
const ALPHA: f64 = 0.05;
/// A fifth of dx^2 / alpha (the bound is a quarter).
const DT: f32 = 4e-4;

fn jelly() -> Material {
    Material::FixedCorotated {
        density: 1000.0,
        youngs: 1e5,
        poisson: 0.3,
    }
}

fn thermal(temperature: f32) -> Thermal {
    Thermal {
        conductivity: 5e4,
        specific_heat: 1000.0,
        temperature,
        softening: Vec::new(),
    }
}

/// A 2D solver of `res` cells without gravity, heat on, insulated walls three cells thick.
fn solver(b: &BackendRef, res: [u32; 2], walls: HeatBoundary) -> Solver2 {
    solver_on(b, res, walls, GridLayout::Dense)
}

/// `solver` on a grid stored as `grid`.
fn solver_on(b: &BackendRef, res: [u32; 2], walls: HeatBoundary, grid: GridLayout) -> Solver2 {
    let settings = Settings {
        grid,
        res,
        dx: DX,
        gravity: [0.0, 0.0],
        time_step: TimeStep::Fixed(DT),
        heat: Some(Heat { walls }),
        walls: Walls {
            thickness: 3,
            condition: Condition::Sticky,
        },
        ..Settings::new(8, DT)
    };
    Solver2::new(b, settings).expect("solver")
}

/// A block of particles two per cell per axis between `x0` and `x1` (in cells), rows 5 to
/// 11 (clear of the walls' nodes above and below), at `temperature`.
fn block(s: &mut Solver2, x0: f32, x1: f32, temperature: f32) {
    let m = s.add_material(jelly()).expect("material");
    s.set_thermal(m, thermal(temperature)).expect("thermal");
    s.add_particles(
        &Region::Box {
            min: [x0 * DX, 5.0 * DX],
            max: [x1 * DX, 11.0 * DX],
        },
        Sampling::Regular,
        DX / 2.0,
        m,
        [0.0, 0.0],
    )
    .expect("block");
}

/// Each particle's x and temperature.
fn profile(s: &mut Solver2) -> Vec<(f64, f64)> {
    s.check().expect("check");
    let p = s.particles.download().expect("particles");
    p.x.iter()
        .zip(&p.temperature)
        .map(|(x, t)| (x.x as f64, *t as f64))
        .collect()
}

/// The largest difference between the particles' temperatures and `exact(x)`, and where.
fn worst(profile: &[(f64, f64)], exact: impl Fn(f64) -> f64) -> (f64, f64) {
    profile
        .iter()
        .map(|&(x, t)| ((t - exact(x)).abs(), x))
        .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a })
}

/// The lowest and highest temperature of a profile.
fn extremes(profile: &[(f64, f64)]) -> (f64, f64) {
    profile
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), q| (l.min(q.1), h.max(q.1)))
}

fn run_to(s: &mut Solver2, t: f64) {
    while s.time() < t - 1e-9 {
        s.substep().expect("substep");
    }
}

/// Two semi-infinite solids at 250 K and 350 K meeting at `x = 48 dx` settle at once to the
/// mean at the interface, and `T = 300 + 50 erf((x - x0) / (2 sqrt(alpha t)))` (Carslaw and
/// Jaeger 2.5): within 2% of the difference at diffusion lengths of 5 and 10 cells (the
/// slabs reach 40 cells either side, beyond which the ends' insulation would show), while
/// the total heat stays what it was.
fn two_slabs(b: &BackendRef, grid: GridLayout, what: &str) {
    let mut s = solver_on(b, [96, 16], HeatBoundary::Insulated, grid);
    block(&mut s, 8.0, 48.0, 250.0);
    block(&mut s, 48.0, 88.0, 350.0);
    let mean = |p: &[(f64, f64)]| p.iter().map(|q| q.1).sum::<f64>() / p.len() as f64;
    let start = mean(&profile(&mut s));
    let x0 = 48.0 * DX as f64;
    for cells in [5.0, 10.0] {
        let root = cells * DX as f64; // sqrt(alpha t)
        run_to(&mut s, root * root / ALPHA);
        let p = profile(&mut s);
        let exact = |x: f64| 300.0 + 50.0 * erf((x - x0) / (2.0 * root));
        let (err, at) = worst(&p, exact);
        println!(
            "{what}: two slabs at sqrt(alpha t) = {cells} cells: worst error {err:.3}% of the \
             difference, at x = {:.1} cells",
            at / DX as f64
        );
        assert!(
            err < 2.0,
            "{what}: two slabs at sqrt(alpha t) = {cells} cells: {err:.2} K off the erf \
             solution at x = {at:.3} (2 K allowed)"
        );
        let (low, high) = extremes(&p);
        assert!(
            low > 250.0 - 1e-3 && high < 350.0 + 1e-3,
            "{what}: temperatures from {low} to {high} K leave the range 250..350 K"
        );
        let drift = mean(&p) - start;
        assert!(
            drift.abs() < 1e-3,
            "{what}: the mean temperature moved by {drift:.2e} K: conduction must only move heat"
        );
    }
}

#[test]
fn two_slabs_in_contact_follow_the_erf_solution() {
    two_slabs(&backend::cpu(), GridLayout::Dense, "CPU");
    two_slabs(&backend::cpu(), SPARSE, "CPU, sparse grid");
}

/// A slab at 300 K against a surface held at 400 K, whose condition holds from the node at
/// `boundary` on: `T = 400 - 100 erf((x - x_b) / (2 sqrt(alpha t)))` (Carslaw and Jaeger
/// 2.4; 400 K behind `x_b`); returns the worst error in K at diffusion lengths of 6 and 12
/// cells. (At 5 cells the particles next to the held nodes still lag the step the
/// condition imposes: 2.3 K at worst.)
fn held_surface(s: &mut Solver2, boundary: f64, what: &str) -> f64 {
    let mut out: f64 = 0.0;
    for cells in [6.0, 12.0] {
        let root = cells * DX as f64;
        run_to(s, root * root / ALPHA);
        let p = profile(s);
        let exact = |x: f64| 400.0 - 100.0 * erf((x - boundary).max(0.0) / (2.0 * root));
        let (err, at) = worst(&p, exact);
        println!(
            "{what}: at sqrt(alpha t) = {cells} cells: worst error {err:.3} K at x = {:.2} cells",
            at / DX as f64
        );
        out = out.max(err);
        // Nothing heats beyond the source or cools below the start.
        let (low, high) = extremes(&p);
        assert!(
            low > 300.0 - 1e-3 && high < 400.0 + 1e-3,
            "{what}: temperatures from {low} to {high} K leave the range 300..400 K"
        );
    }
    out
}

/// Walls held at 400 K: their nodes, up to `thickness` cells from the border, take the
/// temperature, half a cell into the material whose surface lies at 2.5 cells (see `Walls`).
#[test]
fn a_held_wall_heats_a_slab_as_the_erf_solution() {
    let b = backend::cpu();
    let mut s = solver(&b, [96, 16], HeatBoundary::Fixed(400.0));
    block(&mut s, 2.5, 80.0, 300.0);
    let err = held_surface(&mut s, 3.0 * DX as f64, "held wall");
    assert!(
        err < 2.0,
        "held wall: {err:.2} K off the erf solution (2 K allowed)"
    );
}

/// A hot plate: a box collider held at 400 K whose face lies at `face` cells, against a slab
/// from there on. Its condition holds at the nodes within half a cell outside its surface,
/// so from the node nearest the face.
fn hot_plate(b: &BackendRef, face: f32) {
    let mut s = solver(b, [96, 16], HeatBoundary::Insulated);
    s.add_collider(Collider {
        heat: HeatBoundary::Fixed(400.0),
        ..Collider::fixed(
            Shape::Box {
                centre: [(face - 5.0) * DX, 8.0 * DX, 0.0],
                half: [5.0 * DX, 20.0 * DX, 1.0],
            },
            Condition::Sticky,
        )
    })
    .expect("plate");
    block(&mut s, face, 80.0, 300.0);
    let what = format!("plate face at {face} cells");
    let err = held_surface(&mut s, face.round() as f64 * DX as f64, &what);
    assert!(
        err < 2.0,
        "{what}: {err:.2} K off the erf solution (2 K allowed)"
    );
}

#[test]
fn a_held_collider_heats_a_slab_as_the_erf_solution() {
    let b = backend::cpu();
    hot_plate(&b, 10.0);
    hot_plate(&b, 9.75);
}

#[test]
fn heat_on_vulkan() {
    common::with_backends(|b| {
        two_slabs(&b.vk, GridLayout::Dense, "Vulkan");
        // Frozen: the heat loops clear and fill the blocks the stencil pass activated.
        two_slabs(&b.vk, SPARSE, "Vulkan, sparse grid");
        hot_plate(&b.vk, 10.0);
    });
}

/// The explicit conduction's bound: a fixed step above it is refused, naming the material;
/// the adaptive step keeps to it; at the bound, temperatures of particles drawn at random
/// smooth out without leaving their range (the discrete maximum principle).
#[test]
fn the_conduction_bound_holds_the_time_step() {
    let b = backend::cpu();
    let bound = 0.25 * DX * DX / ALPHA as f32;
    let mut fixed = solver(&b, [32, 16], HeatBoundary::Insulated);
    let m = fixed.add_material(jelly()).expect("material");
    // DT is 0.8 of the bound.
    fixed.set_thermal(m, thermal(300.0)).expect("a stable step");
    let too_fast = Settings {
        time_step: TimeStep::Fixed(1.5 * bound),
        ..fixed.settings().clone()
    };
    let mut s = Solver2::new(&b, too_fast).expect("solver");
    let m = s.add_material(jelly()).expect("material");
    let e = s
        .set_thermal(m, thermal(300.0))
        .expect_err("an unstable step")
        .to_string();
    assert!(
        e.contains("fixed-corotated") && e.contains("stable conduction step"),
        "{e}"
    );

    let adaptive = Settings {
        time_step: TimeStep::Adaptive { cfl: 0.5, max: 1.0 },
        ..fixed.settings().clone()
    };
    let mut s = Solver2::new(&b, adaptive).expect("solver");
    let m = s
        .add_material(Material::FixedCorotated {
            density: 1000.0,
            youngs: 1.0,
            poisson: 0.3,
        })
        .expect("material");
    s.set_thermal(m, thermal(300.0)).expect("thermal");
    assert!(
        (s.next_dt() - bound).abs() <= 1e-6 * bound,
        "{} vs {bound}",
        s.next_dt()
    );
    s.add_particles(
        &Region::Box {
            min: [5.0 * DX, 5.0 * DX],
            max: [27.0 * DX, 11.0 * DX],
        },
        Sampling::Jittered,
        DX / 2.0,
        m,
        [0.0, 0.0],
    )
    .expect("block");
    // Random temperatures from 200 to 400 K, then a hundred steps at the bound.
    let mut host = s.particles.download().expect("particles");
    let mut state = 12345u32;
    for t in &mut host.temperature {
        state = state.wrapping_mul(1664525).wrapping_add(1013904223);
        *t = 200.0 + 200.0 * (state >> 8) as f32 / (1 << 24) as f32;
    }
    s.particles.upload(&host).expect("upload");
    let spread = |t: &[f32]| {
        let mean = t.iter().sum::<f32>() / t.len() as f32;
        (t.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / t.len() as f32).sqrt()
    };
    let before = spread(&host.temperature);
    for _ in 0..100 {
        s.substep().expect("substep");
        assert!(
            s.dt() <= bound * (1.0 + 1e-6),
            "dt {} above {bound}",
            s.dt()
        );
    }
    let t = s.particles.download().expect("particles").temperature;
    let (low, high) = t
        .iter()
        .fold((f32::MAX, f32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(
        low >= 200.0 && high <= 400.0,
        "temperatures now {low}..{high} K"
    );
    assert!(
        spread(&t) < 0.1 * before,
        "the spread went from {before} to {} K",
        spread(&t)
    );
}

/// The softening curve scales the shear modulus: the stress of a sheared and stretched
/// particle is fixed corotated's with `mu` times the curve's linear interpolation at its
/// temperature, held beyond the ends; molten (scale 0), a substep leaves its deformation
/// only its volume. Without heat the curve reads the starting temperature.
#[test]
fn softening_scales_the_shear_modulus_by_temperature() {
    let b = backend::cpu();
    let mut s = Solver2::new(&b, Settings::new(32, 1e-4)).expect("solver");
    let curve = vec![(300.0, 1.0), (400.0, 0.5), (500.0, 0.0)];
    let h = Mat2::from_cols(Vec2::new(0.05, 0.02), Vec2::new(0.03, -0.04));
    let (mu, lambda) = mpm::core::materials::lame(1e5, 0.3);
    for (temperature, scale) in [(250.0, 1.0), (350.0, 0.75), (450.0, 0.25), (600.0, 0.0)] {
        let m = s.add_material(jelly()).expect("material");
        s.set_thermal(
            m,
            Thermal {
                temperature,
                softening: curve.clone(),
                ..Thermal::default()
            },
        )
        .expect("thermal");
        s.add_positions(&[[0.5, 0.5]], 1e-4, m, [0.0, 0.0])
            .expect("particle");
        let mut host = s.particles.download().expect("particles");
        let last = host.len() - 1;
        host.grad_u[last] = h;
        s.particles.upload(&host).expect("upload");
        s.update_stress().expect("stress");
        let tau = s.particles.download().expect("particles").tau[last];
        let want = dim2::fixed_corotated(Mat2::IDENTITY + h, scale * mu, lambda);
        let err = (tau - want)
            .abs()
            .to_cols_array()
            .into_iter()
            .fold(0.0, f32::max);
        assert!(
            err <= 1e-4 * mu,
            "at {temperature} K: stress {tau} against {want} (scale {scale})"
        );
    }
    // The molten particle, one substep on: only its volume is left.
    s.substep().expect("substep");
    let p = s.particles.download().expect("particles");
    let molten = p.grad_u[3];
    assert!(
        molten.x_axis.y == 0.0
            && molten.y_axis.x == 0.0
            && molten.x_axis.x == molten.y_axis.y
            && molten.x_axis.x.abs() < 0.05,
        "molten: {molten}"
    );
    let solid = p.grad_u[0];
    assert!((solid.y_axis.x - h.y_axis.x).abs() < 1e-3, "solid: {solid}");
}

#[test]
fn thermal_properties_are_checked() {
    let message = |material: Material, thermal: Thermal| {
        thermal
            .validate(&material)
            .expect_err("an error")
            .to_string()
    };
    let curve = |points: &[(f32, f32)]| Thermal {
        softening: points.to_vec(),
        ..Thermal::default()
    };
    let e = message(
        jelly(),
        Thermal {
            conductivity: -1.0,
            ..Thermal::default()
        },
    );
    assert!(e.contains("conductivity = -1"), "{e}");
    let e = message(
        jelly(),
        Thermal {
            specific_heat: 0.0,
            ..Thermal::default()
        },
    );
    assert!(e.contains("specific_heat = 0"), "{e}");
    let e = message(
        jelly(),
        Thermal {
            temperature: f32::NAN,
            ..Thermal::default()
        },
    );
    assert!(e.contains("temperature = NaN"), "{e}");
    let e = message(jelly(), curve(&[(400.0, 1.0), (300.0, 0.5)]));
    assert!(e.contains("must increase"), "{e}");
    let e = message(jelly(), curve(&[(300.0, -0.5)]));
    assert!(e.contains("(300, -0.5)"), "{e}");
    let e = message(
        jelly(),
        curve(&[(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0), (5.0, 1.0)]),
    );
    assert!(e.contains("at most 4"), "{e}");
    let e = message(Material::water(), curve(&[(300.0, 1.0)]));
    assert!(e.contains("water") && e.contains("shear modulus"), "{e}");
    let e = message(Material::sand(), curve(&[(300.0, 1.0), (400.0, 0.0)]));
    assert!(e.contains("sand cannot melt"), "{e}");
    curve(&[(300.0, 1.0), (400.0, 0.0)])
        .validate(&Material::snow())
        .expect("snow melts");
}

/// The two slabs in 3D, a bar of 2 x 2 cells across: the same erf within 2% of the
/// difference, on the CPU and Vulkan.
fn two_slabs_3d(b: &BackendRef, what: &str) {
    let settings = Settings {
        res: [72, 12, 12],
        dx: DX,
        gravity: [0.0; 3],
        time_step: TimeStep::Fixed(DT),
        heat: Some(Heat {
            walls: HeatBoundary::Insulated,
        }),
        walls: Walls {
            thickness: 3,
            condition: Condition::Sticky,
        },
        ..Settings::new(8, DT)
    };
    let mut s = Solver3::new(b, settings).expect("solver");
    for (x0, x1, t) in [(8.0, 36.0, 250.0), (36.0, 64.0, 350.0)] {
        let m = s.add_material(jelly()).expect("material");
        s.set_thermal(m, thermal(t)).expect("thermal");
        s.add_particles(
            &Region::Box {
                min: [x0 * DX, 5.0 * DX, 5.0 * DX],
                max: [x1 * DX, 7.0 * DX, 7.0 * DX],
            },
            Sampling::Regular,
            DX / 2.0,
            m,
            [0.0; 3],
        )
        .expect("block");
    }
    let root = 6.0 * DX as f64;
    while s.time() < root * root / ALPHA - 1e-9 {
        s.substep().expect("substep");
    }
    let p = s.particles.download().expect("particles");
    let x0 = 36.0 * DX as f64;
    let (err, at) =
        p.x.iter()
            .zip(&p.temperature)
            .map(|(x, &t)| {
                let exact = 300.0 + 50.0 * erf((x.x as f64 - x0) / (2.0 * root));
                ((t as f64 - exact).abs(), x.x as f64)
            })
            .fold((0.0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
    println!(
        "{what}: 3D slabs at sqrt(alpha t) = 6 cells: worst error {err:.3}% at x = {:.1} cells",
        at / DX as f64
    );
    assert!(
        err < 2.0,
        "{what}: 3D slabs {err:.2} K off the erf solution"
    );
}

#[test]
fn two_slabs_in_3d_follow_the_erf_solution() {
    two_slabs_3d(&backend::cpu(), "CPU");
    common::with_backends(|b| two_slabs_3d(&b.vk, "Vulkan"));
}
