//! A material of your own, written in the kernel language: plasticine, an elastic-perfectly
//! plastic solid (von Mises yield in Hencky strain). A plasticine ball and a jelly ball of the
//! same stiffness are thrown onto the floor: the jelly bounces, the plasticine flattens and
//! stays flat. A second kernel of our own measures the kinetic energy of each material.
//!
//! How it fits together:
//!
//! * `#[func]`s are plain functions of scalars, vectors and matrices. They call builtins
//!   (`svd`, `ln`, `length`, ...) and each other, also across modules: `plasticine_2d` below
//!   uses our `von_mises_return_2d` and the engine's own `materials::dim2::hencky_stress`. They are also
//!   ordinary Rust functions, so a unit test can call them on the host.
//! * A `#[kernel]` takes fields (`&Field<T>` to read, `&mut Field<T>` to write) and scalars
//!   (`f32`, `i32`, `u32`, `bool`, glam vectors and matrices), and returns `Result<()>`. Its
//!   body is a sequence of top-level `let`s of scalars and top-level `for` loops; each such
//!   `for` is one parallel launch over its range (`0..count`, `field.indices()`), with one
//!   invocation per index and no order among them, and the launches run one after another.
//!   So an invocation writes only its own entries, or adds with `+=`, which is atomic. Inside
//!   a loop: locals, `if`, inner `for`/`while` loops, field loads and stores, builtins and
//!   funcs; no heap, no references, no generics, no calls to ordinary Rust (the macro points at
//!   anything outside the language).
//! * The same source runs on every backend: `#[kernel]` compiles the body to Rust for the
//!   CPU (rayon) and records it for Vulkan (GLSL, compiled once, cached). A call runs where
//!   its fields live, so the solver's backend (`--backend cpu|vulkan`) runs our kernels too.
//! * The solver treats particles of a `Material::User` as purely elastic (it updates `F` by
//!   the velocity gradient and keeps `tau`); a stress hook registered with
//!   `Solver2::add_stress_hook` runs after every substep and writes `F` (after plasticity)
//!   and the Kirchhoff stress `tau` that the next substep scatters to the grid.

use mpm_core::glam::{Mat2, Vec2};
use mpm_core::materials::dim2;
use mpm_core::materials::lame;
use mpm_core::solver::{Material, MaterialId, Particles, Region, Sampling, Settings, Solver2};
use mpm_core::{func, kernel, BackendRef, Field};

use crate::Result;

use crate::demos::{Demo, SolverDemo};

/// The grid resolution the example uses.
pub const N_GRID: u32 = 128;
/// The time step: the balls' elastic waves (11.6 m/s) cross 0.15 of a cell per step.
pub const DT: f32 = 1e-4;

/// Plasticine: density 1000, E = 1e5, nu = 0.3, yielding at a deviatoric Kirchhoff stress of
/// 10 kPa.
pub const DENSITY: f32 = 1000.0;
pub const YOUNGS: f32 = 1e5;
pub const POISSON: f32 = 0.3;
pub const YIELD_STRESS: f32 = 1e4;

/// Von Mises return mapping on principal Hencky strains `eps = ln(sigma)`: the deviatoric
/// part is scaled back onto the yield surface `2 mu |dev eps| = yield_stress`, the
/// volumetric part is kept, so plastic flow conserves volume. This is the return mapping of
/// small-strain J2 plasticity applied to logarithmic strains (Simo 1992, "Algorithms for
/// static and dynamic multiplicative plasticity that preserve the classical return mapping
/// schemes of the infinitesimal theory", CMAME 99), as MPM codes use it for metals and clay.
#[func]
pub fn von_mises_return_2d(eps: Vec2, mu: f32, yield_stress: f32) -> Vec2 {
    let mean = 0.5 * (eps.x + eps.y);
    let dev = eps - Vec2::splat(mean);
    let dev_norm = length(dev);
    let limit = yield_stress / (2.0 * mu);
    let mut out = eps;
    if dev_norm > limit {
        out = Vec2::splat(mean) + (limit / dev_norm) * dev;
    }
    out
}

/// Plasticine's update of one particle: the elastic deformation gradient after yielding and
/// its Kirchhoff stress (St. Venant-Kirchhoff in Hencky strain, the engine's `#[func]`).
#[func]
pub fn plasticine_2d(f: Mat2, mu: f32, lambda: f32, yield_stress: f32) -> (Mat2, Mat2) {
    let (u, sig, v) = svd(f);
    let eps = vec2(ln(max(abs(sig.x), 1e-6)), ln(max(abs(sig.y), 1e-6)));
    let e = von_mises_return_2d(eps, mu, yield_stress);
    let fe = u * Mat2::from_diagonal(vec2(exp(e.x), exp(e.y))) * transpose(v);
    (fe, dim2::hencky_stress(fe, mu, lambda))
}

/// The stress hook's kernel: particles of material `id` get plasticine's `F` and `tau`;
/// every other particle is left alone (dead ones have a negative id). The solver keeps the
/// displacement gradient `F - I` per particle (see `Particles::grad_u`).
#[kernel]
pub fn plasticine_stress(
    grad_u: &mut Field<Mat2>,
    tau: &mut Field<Mat2>,
    material: &Field<i32>,
    count: u32,
    id: i32,
    mu: f32,
    lambda: f32,
    yield_stress: f32,
) {
    for p in 0..count {
        if material[p] == id {
            let (fe, t) = plasticine_2d(Mat2::IDENTITY + grad_u[p], mu, lambda, yield_stress);
            grad_u[p] = fe - Mat2::IDENTITY;
            tau[p] = t;
        }
    }
}

/// Kinetic energy per material: the first launch clears the sums, the second adds every
/// live particle's `m v^2 / 2` to its material's entry (an atomic add on both backends).
#[kernel]
pub fn kinetic_energy(
    v: &Field<Vec2>,
    mass: &Field<f32>,
    material: &Field<i32>,
    energy: &mut Field<f32>,
    count: u32,
) {
    for m in energy.indices() {
        energy[m] = 0.0;
    }
    for p in 0..count {
        let id = material[p];
        if id >= 0 {
            energy[id] += 0.5 * mass[p] * dot(v[p], v[p]);
        }
    }
}

/// The scene: the solver, plus our energy sums and when to print them.
pub struct CustomKernel {
    pub inner: SolverDemo<Solver2>,
    /// Kinetic energy per material id, in J per metre of depth (2D).
    pub energy: Field<f32>,
    names: Vec<String>,
    /// Substeps between two printed energy lines (0: never).
    pub print_every: u64,
}

impl CustomKernel {
    /// Runs our energy kernel; returns the sums per material id.
    pub fn kinetic_energy(&mut self) -> Result<Vec<f32>> {
        let p = &self.inner.solver.particles;
        kinetic_energy(&p.v, &p.mass, &p.material, &mut self.energy, p.count())?;
        Ok(self.energy.download()?)
    }
}

/// Builds the scene on an `n_grid`^2 grid of the unit square; `seed` jitters the particles.
pub fn new(backend: &BackendRef, n_grid: u32, seed: u32) -> Result<CustomKernel> {
    let dt = DT * N_GRID as f32 / n_grid as f32;
    let settings = Settings::<2>::new(n_grid, dt);
    let spacing = settings.dx / 2.0;
    let mut solver = Solver2::new(backend, settings)?;

    // Our material: the solver needs its density for the particles' mass and E, nu for its
    // Lamé row and time step bound; `params` would reach the solver's own kernels, our kernel
    // takes its constants as arguments instead.
    let plasticine = solver.add_material(Material::User {
        name: "plasticine".into(),
        density: DENSITY,
        youngs: YOUNGS,
        poisson: POISSON,
        params: [YIELD_STRESS, 0.0, 0.0, 0.0],
    })?;
    let jelly = solver.add_material(Material::FixedCorotated {
        density: DENSITY,
        youngs: YOUNGS,
        poisson: POISSON,
    })?;
    let (mu, lambda) = lame(YOUNGS, POISSON);
    let MaterialId(id) = plasticine;
    // The hook: a closure that launches our kernel on the solver's particle fields.
    solver.add_stress_hook(move |p: &mut Particles<Vec2, Mat2>| {
        let count = p.count();
        plasticine_stress(
            &mut p.grad_u,
            &mut p.tau,
            &p.material,
            count,
            id,
            mu,
            lambda,
            YIELD_STRESS,
        )?;
        Ok(())
    })?;

    // A ball of each material, thrown down onto the floor side by side.
    solver.set_seed(seed);
    for (material, x) in [(plasticine, 0.3f32), (jelly, 0.7)] {
        solver.add_particles(
            &Region::Sphere {
                centre: [x, 0.4],
                radius: 0.1,
            },
            Sampling::Jittered,
            spacing,
            material,
            [0.0, -3.0],
        )?;
    }
    let names = solver
        .materials
        .materials
        .iter()
        .map(Material::name)
        .collect();
    let energy = Field::new(backend, [solver.materials.materials.len() as u32])?;
    Ok(CustomKernel {
        // A frame every 5 ms of simulated time.
        inner: SolverDemo::with_frame_time(solver, 5e-3),
        energy,
        names,
        print_every: (0.05 / dt).round() as u64,
    })
}

impl Demo for CustomKernel {
    fn particles(&self) -> usize {
        self.inner.particles()
    }

    fn backend(&self) -> &mpm_core::BackendRef {
        self.inner.backend()
    }

    /// A substep, and every `print_every` substeps a line of kinetic energies.
    fn substep(&mut self) -> Result<()> {
        self.inner.substep()?;
        let step = self.inner.solver.steps();
        if self.print_every > 0 && step.is_multiple_of(self.print_every) {
            let energy = self.kinetic_energy()?;
            let parts: Vec<String> = self
                .names
                .iter()
                .zip(&energy)
                .map(|(name, e)| format!("{name} {e:.4}"))
                .collect();
            println!(
                "t = {:.3} s, kinetic energy (J/m): {}",
                self.inner.solver.time(),
                parts.join(", ")
            );
        }
        Ok(())
    }

    fn substeps_per_frame(&self) -> usize {
        self.inner.substeps_per_frame()
    }

    fn frame(&mut self) -> Result<(Vec<mpm_core::glam::Vec2>, Vec<i32>)> {
        self.inner.frame()
    }

    fn memory(&self) -> (usize, usize) {
        self.inner.memory()
    }
}
