//! The MLS-MPM solver, written in the engine's own kernel language so that it runs on every
//! backend and grid layout, in 2D (`Solver2`) and 3D (`Solver3`).
//!
//! A substep clears the grid, scatters particle momentum and stress to it (P2G), applies
//! gravity, colliders and walls on the grid, gathers velocities back (G2P, APIC with an
//! optional FLIP blend) and updates deformation and stress per material. Any mix of materials
//! shares one grid, which couples them. Users add their own materials by writing the stress
//! of particles of a `Material::User` with a kernel of their own (`add_stress_hook`).

pub mod boundary;
mod energy;
mod error;
pub mod kernels;
pub mod material;
pub mod particles;
pub mod ranks;
pub mod seeding;
mod sorting;
mod space;

use std::sync::Arc;

use glam::{Vec2, Vec4};

use boundary::SdfLattice;
pub use boundary::{Collider, Condition, HeatBoundary, Sdf, SdfId, Shape, Walls};
pub use energy::Energy;
pub use error::{Result, SolverError};
pub use material::{
    check_surface_tension, Material, MaterialId, MaterialTable, ParamValue, Range, Thermal,
};
pub use particles::{HostParticles, Particles};
pub use ranks::{RankReport, Ranks, Slabs};
pub use seeding::{Region, Sampling};
pub use space::{Space, D2, D3};

use crate::backend::BackendKind;
use crate::{BackendRef, Elem, Field, Layout, Tree};

/// The 2D solver.
pub type Solver2 = Solver<D2, 2>;
/// The 3D solver.
pub type Solver3 = Solver<D3, 3>;

/// Interpolation between particles and grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spline {
    /// Quadratic B-spline, 3 nodes per axis.
    Quadratic,
    /// Cubic B-spline, 4 nodes per axis: smoother, 2.4 times the work in 3D.
    Cubic,
}

impl Spline {
    /// The inverse of APIC's inertia-like tensor `D` (a multiple of the identity):
    /// `4 / dx^2` for quadratic, `3 / dx^2` for cubic splines (Jiang et al. 2015, "The affine
    /// particle-in-cell method").
    pub fn inverse_inertia(self, dx: f32) -> f32 {
        let weight = match self {
            Spline::Quadratic => 4.0,
            Spline::Cubic => 3.0,
        };
        weight / (dx * dx)
    }
}

/// How the time step is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeStep {
    Fixed(f32),
    /// `dt = min(cfl dx / max_p (|v_p| + c_p), max)`: no signal crosses more than `cfl` of
    /// a cell per step. `c_p` is the wave speed of particle `p`'s current state (its
    /// material's `modulus`: compressed water and stretched rubber carry sound faster than
    /// at rest), widened by bulk viscosity to `Q + sqrt(Q^2 + c^2)`
    /// (see [`BulkViscosity`]). The bound is read back after every substep (a histogram of
    /// a quarter octave: up to 19% above the true maximum) and grown by `|g| max` for the
    /// step ahead.
    Adaptive {
        cfl: f32,
        max: f32,
    },
}

/// Artificial bulk viscosity for impacts: a pressure `q` added in compression only, so that
/// a shock is spread over a few cells instead of ringing until particles fly apart.
///
/// With the volumetric strain rate `e = tr(grad v) < 0`, the cell size `l`, the density
/// `rho` and the material's wave speed `c`, the Cauchy stress gains `-q I` with
/// `q = rho l (quadratic l e^2 - linear c e)` (von Neumann and Richtmyer 1950 for the
/// quadratic term, Landshoff 1955 for the linear one; the form and the default
/// coefficients 1.5 and 0.06 are those of explicit finite-element codes such as LS-DYNA's
/// `*CONTROL_BULK_VISCOSITY`). Off (both zero) by default; built-in materials only (a user
/// material's hook owns its stress). It tightens the explicit step limit to
/// `dx / (Q + sqrt(Q^2 + c^2))` with `Q = linear c + quadratic dx |e|` (the same codes'
/// element time step), which the adaptive step follows particle by particle; with a fixed
/// step, keep `dt` below it.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct BulkViscosity {
    pub linear: f32,
    pub quadratic: f32,
}

impl BulkViscosity {
    /// The usual coefficients: linear 0.06, quadratic 1.5.
    pub const STANDARD: BulkViscosity = BulkViscosity {
        linear: 0.06,
        quadratic: 1.5,
    };
}

/// Heat conduction coupled to the mechanics: every particle carries a temperature, which
/// conducts through the grid the particles share (Stomakhin et al. 2014, "Augmented MPM for
/// phase-change and varied materials", section 6, whose grid heat equation this follows,
/// explicitly and with MLS-MPM's weight gradients `w D^-1 (x_i - x_p)`). Each substep
/// scatters heat capacity `m c` and energy `m c T` to the nodes; nodes inside walls and
/// colliders held at a temperature take it; each particle's temperature gradient from its
/// nodes gives its conduction `-V k grad T . grad w_i` into each node; and the particles take
/// their nodes' temperature change, as FLIP takes the velocity's. The heat moved adds up to
/// zero, so an insulated body keeps its heat to rounding.
///
/// Differences between particles that share their nodes are invisible to the grid, and FLIP
/// alone would keep them for ever (two bodies at different temperatures would keep their
/// contact layer). So each particle also relaxes towards its nodes' temperature at the rate
/// `SUBGRID_CONDUCTION alpha / dx^2` (0.2): fast enough that such a layer is gone after
/// `5 dx^2 / alpha`, slow enough to add only about 5% of the conduction to resolved
/// gradients (0.5% of the temperature difference in `tests/heat.rs`, against 9% with a
/// quarter of the rate and 2.3% with five times it). It is the PIC share of a PIC/FLIP blend,
/// scaled with the step so that results do not depend on it.
///
/// A held wall or collider holds its nodes up to half a cell outside its surface (walls:
/// the nodes of their velocity condition); the material sees the fixed temperature from the
/// last held node on, within half a cell of the geometric surface. Free surfaces are
/// insulated. Materials take their conductivity, heat capacity, starting temperature and
/// temperature-dependent stiffness from `Solver::set_thermal`.
///
/// The explicit update is stable for `dt <= HEAT_STEP dx^2 / alpha`, `alpha = k / (rho c)`
/// the largest diffusivity; the adaptive step keeps to it, a fixed one is checked against it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Heat {
    /// The domain walls: insulating (the default) or held at a temperature.
    pub walls: HeatBoundary,
}

/// The explicit conduction's stable step in units of `dx^2 / alpha`. The discrete operator's
/// largest eigenvalue, measured on periodic particle lattices (quadratic splines: `4 / dx^2`
/// at one particle per cell and 1.9 at two per axis in 1D to 3D, up to 3.5 with particles
/// jittered by a cell; cubic: at most 1.9), needs `dt <= 2 / lambda = dx^2 / (2 alpha)`; half
/// that leaves room for irregular particles.
pub const HEAT_STEP: f32 = 0.25;

/// The capillary time step in units of `sqrt(rho dx^3 / sigma)` (see
/// `Settings::surface_tension`): half of Brackbill et al.'s `1 / sqrt(4 pi)`. At their bound a
/// violently relaxing square drop (sigma = 3000 N against a bulk modulus of 1e4 Pa, 64^2
/// cells) diverged after 812 steps; at 0.7 of it, it ran for a second of simulated time.
pub const CAPILLARY_STEP: f32 = 0.141;

/// How the grid is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridLayout {
    Dense,
    /// Pointer level over blocks of `block` cells per axis, dense (or bitmasked) inside;
    /// `reserve` blocks in the pool.
    Sparse {
        block: u32,
        bitmasked: bool,
        reserve: u32,
    },
}

/// Everything a solver is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings<const D: usize> {
    /// Grid cells per axis; the domain is `[0, res * dx)`.
    pub res: [u32; D],
    pub dx: f32,
    pub gravity: [f32; D],
    pub spline: Spline,
    /// FLIP fraction of the particle velocity update (0: pure APIC).
    pub flip: f32,
    /// Damping rate in 1/s: grid velocities are divided by `1 + damping * dt` every substep,
    /// so motion decays like `exp(-damping t)` while a body at rest feels nothing. For
    /// settling quasi-static problems; 0 (the default) for dynamics.
    pub damping: f32,
    /// Artificial bulk viscosity for high-speed impacts (off by default).
    pub bulk_viscosity: BulkViscosity,
    /// F-bar anti-locking for the hyperelastic solids (neo-Hookean, fixed corotated): their
    /// stress comes from `F-bar = (J-bar / J)^(1/d) F`, where `J-bar` is the volume ratio
    /// averaged over the grid nodes of each particle's stencil (weighted `w V0`), so that a
    /// nearly incompressible solid (Poisson's ratio near 1/2) is not held by one volume
    /// constraint per particle (volumetric locking). F-bar after de Souza Neto et al. 1996
    /// ("Design of simple low order finite elements for large strain analysis of nearly
    /// incompressible solids", IJSS 33); for MPM, Coombs et al. 2018 ("Overcoming volumetric
    /// locking in material point methods", CMAME 333) average over cells, this over the
    /// B-spline stencil. Two more particle passes per substep; off by default.
    pub f_bar: bool,
    /// Heat conduction (off, `None`, by default).
    pub heat: Option<Heat>,
    /// Surface tension (off by default): materials take their coefficient from
    /// `Solver::set_surface_tension`.
    ///
    /// A continuum surface force on the grid (Brackbill, Kothe and Zemach 1992, "A continuum
    /// method for modeling surface tension", J. Comput. Phys. 100): each liquid scatters its
    /// volume fraction `c` (its colour, from the particles' current volumes) to the nodes,
    /// and every node gains the force `sigma kappa grad c dx^d`, with the colour's gradient
    /// and the curvature `kappa = -div(grad c / |grad c|)` of its level sets from central
    /// differences. Across the interface the force adds up to the Laplace pressure jump
    /// `sigma kappa`, which the liquid's equation of state takes up: a drop of radius `R`
    /// holds `sigma / R` in 2D, `2 sigma / R` in 3D.
    ///
    /// Each liquid with a tension of its own has a channel of the colour (at most
    /// `SURFACE_CHANNELS`, four); where two meet, the interface's tension is the sum of
    /// theirs (the usual split of pairwise tensions into per-phase ones), so two such
    /// liquids stay apart: immiscible. A liquid's colour ends at walls, colliders and other
    /// materials as at a free surface: no wetting model (the liquid beads, a contact angle
    /// near 180 degrees).
    ///
    /// Give water with a surface tension `free_surface = false`: a liquid held together by
    /// its surface is cohesive, and the free surface's clamp (`J <= 1`) forgets every
    /// expansion the capillary flow makes, so that a drop's particles drift apart (a 2D drop
    /// spread over a fifth more area in 6 s). Like every CSF, the force leaves small
    /// currents about a drop at rest (about `0.01 sigma / mu`).
    ///
    /// The explicit force is stable for `dt <= CAPILLARY_STEP sqrt(rho dx^3 / sigma)`, half
    /// of Brackbill et al.'s capillary-wave bound `sqrt(rho_avg dx^3 / (2 pi sigma))` with
    /// `rho_avg = rho / 2` against air; the adaptive step keeps to it for every liquid, a
    /// fixed one is checked against it.
    pub surface_tension: bool,
    pub time_step: TimeStep,
    pub walls: Walls,
    pub grid: GridLayout,
    /// Substeps between checks for divergence and removed particles (each check reads a
    /// few words back from the device).
    pub check_every: u32,
    /// A particle faster than this many cells per substep counts as diverged.
    pub max_cells_per_step: f32,
    /// Substeps between rewrites of the particles in the order of their grid blocks (0,
    /// the default: never), which keeps P2G's adds and G2P's reads in few cache lines on
    /// large grids. Particles then change their indices (and their order in outputs).
    pub sort_every: u32,
}

impl<const D: usize> Settings<D> {
    /// A unit cube of `n` cells per axis, gravity 9.8 along -y, quadratic APIC, fixed `dt`.
    pub fn new(n: u32, dt: f32) -> Self {
        let mut gravity = [0.0; D];
        gravity[1] = -9.8;
        Settings {
            res: [n; D],
            dx: 1.0 / n as f32,
            gravity,
            spline: Spline::Quadratic,
            flip: 0.0,
            damping: 0.0,
            bulk_viscosity: BulkViscosity::default(),
            f_bar: false,
            heat: None,
            surface_tension: false,
            time_step: TimeStep::Fixed(dt),
            walls: Walls::default(),
            grid: GridLayout::Dense,
            check_every: 10,
            max_cells_per_step: 1.0,
            sort_every: 0,
        }
    }

    /// Checks every range; the error names the setting.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(SolverError::InvalidParameter(m));
        if self.res.iter().any(|&r| r < 8) {
            return bad(format!(
                "grid resolution {:?}: at least 8 cells per axis",
                self.res
            ));
        }
        if !(self.dx.is_finite() && self.dx > 0.0) {
            return bad(format!("dx = {} must be finite and > 0", self.dx));
        }
        if !self.gravity.iter().all(|g| g.is_finite()) {
            return bad(format!("gravity {:?} is not finite", self.gravity));
        }
        if !(0.0..=1.0).contains(&self.flip) {
            return bad(format!("flip = {} must lie in [0, 1]", self.flip));
        }
        if !(self.damping.is_finite() && self.damping >= 0.0) {
            return bad(format!(
                "damping = {} must be finite and >= 0",
                self.damping
            ));
        }
        let BulkViscosity { linear, quadratic } = self.bulk_viscosity;
        if !(linear.is_finite() && linear >= 0.0 && quadratic.is_finite() && quadratic >= 0.0) {
            return bad(format!(
                "bulk viscosity: linear = {linear}, quadratic = {quadratic} must be finite and >= 0"
            ));
        }
        match self.time_step {
            TimeStep::Fixed(dt) if !(dt.is_finite() && dt > 0.0) => {
                return bad(format!("time step {dt} must be finite and > 0"))
            }
            TimeStep::Adaptive { cfl, max }
                if !(cfl > 0.0 && cfl <= 1.0 && max.is_finite() && max > 0.0) =>
            {
                return bad(format!(
                    "adaptive time step: cfl = {cfl} must lie in (0, 1], max = {max} must be > 0"
                ))
            }
            _ => {}
        }
        self.walls.condition.code()?;
        if let Some(heat) = self.heat {
            heat.walls.code()?;
        }
        if matches!(self.walls.thickness, 1 | 2) {
            return bad(format!(
                "walls {} cells thick: walls are 0 (none) or at least 3 cells thick, so that \
                 their surfaces ({} cells in) clear the 2 cells of border particles need",
                self.walls.thickness,
                self.walls.thickness as f32 - 0.5
            ));
        }
        if 2 * self.walls.thickness + 4 > *self.res.iter().min().unwrap_or(&0) {
            return bad(format!(
                "walls {} cells thick leave no room in a grid of {:?}",
                self.walls.thickness, self.res
            ));
        }
        if !(self.max_cells_per_step.is_finite() && self.max_cells_per_step > 0.0) {
            return bad(format!(
                "max_cells_per_step = {} must be finite and > 0",
                self.max_cells_per_step
            ));
        }
        if self.check_every == 0 {
            return bad("check_every must be at least 1".into());
        }
        if let GridLayout::Sparse { block, .. } = self.grid {
            if block == 0 || self.res.iter().any(|r| r % block != 0) {
                return bad(format!(
                    "block = {block}: sparse grid blocks must divide the resolution {:?}",
                    self.res
                ));
            }
        }
        Ok(())
    }
}

/// The background grid.
pub struct Grid<V: crate::Elem, const D: usize> {
    pub v: Field<V, D>,
    /// Velocities before the grid update, for FLIP (no cells unless `Settings::flip > 0`).
    pub v0: Field<V, D>,
    pub m: Field<f32, D>,
    /// F-bar's sums per node, `(w V0 (J - 1), w V0)` (no cells unless `Settings::f_bar`).
    pub j: Field<Vec2, D>,
    /// Heat per node (no cells unless `Settings::heat`): after P2G `(w m c, w m c T)`, after
    /// the grid update the temperatures before and after conduction.
    pub heat: Field<Vec2, D>,
    /// The conducted heat flowing into each node, W (no cells unless `Settings::heat`).
    pub q: Field<f32, D>,
    /// Each liquid's colour, its volume fraction per node, one channel per liquid with
    /// surface tension (no cells unless `Settings::surface_tension`).
    pub color: Field<Vec4, D>,
    /// The layout tree of a sparse grid.
    pub tree: Option<Arc<Tree<D>>>,
    /// A mark per block of a grid the substep freezes (`touch_stencils`), zero between
    /// substeps; no cells on other grids. As large as the tree's pointer table.
    pub marks: Field<u32, D>,
}

impl<V: crate::Elem, const D: usize> Grid<V, D> {
    fn new(backend: &BackendRef, settings: &Settings<D>) -> Result<Self> {
        let res = settings.res;
        let (flip, f_bar, heat, tension) = (
            settings.flip > 0.0,
            settings.f_bar,
            settings.heat.is_some(),
            settings.surface_tension,
        );
        match settings.grid {
            GridLayout::Dense => {
                // A field over the grid, or no cells where its option is off: the loops over it
                // then dispatch nothing.
                fn dense<T: Elem, const D: usize>(
                    backend: &BackendRef,
                    res: [u32; D],
                    used: bool,
                ) -> Result<Field<T, D>> {
                    Ok(Field::new(backend, if used { res } else { [0; D] })?)
                }
                Ok(Grid {
                    v: dense(backend, res, true)?,
                    v0: dense(backend, res, flip)?,
                    m: dense(backend, res, true)?,
                    j: dense(backend, res, f_bar)?,
                    heat: dense(backend, res, heat)?,
                    q: dense(backend, res, heat)?,
                    color: dense(backend, res, tension)?,
                    tree: None,
                    marks: Field::new(backend, [0; D])?,
                })
            }
            GridLayout::Sparse {
                block,
                bitmasked,
                reserve,
            } => {
                let top = Layout::root().pointer(res.map(|r| r / block));
                let layout = if bitmasked {
                    top.bitmasked([block; D])
                } else {
                    top.dense([block; D])
                };
                let tree = Tree::new(backend, layout.reserve(reserve))?;
                // A field placed in the tree, or no cells where its option is off.
                fn placed<T: Elem, const D: usize>(
                    backend: &BackendRef,
                    tree: &Arc<Tree<D>>,
                    used: bool,
                ) -> Result<Field<T, D>> {
                    Ok(match used {
                        true => Field::place(tree)?,
                        false => Field::new(backend, [0; D])?,
                    })
                }
                Ok(Grid {
                    v: placed(backend, &tree, true)?,
                    v0: placed(backend, &tree, flip)?,
                    m: placed(backend, &tree, true)?,
                    j: placed(backend, &tree, f_bar)?,
                    heat: placed(backend, &tree, heat)?,
                    q: placed(backend, &tree, heat)?,
                    color: placed(backend, &tree, tension)?,
                    tree: Some(tree),
                    marks: Field::new(
                        backend,
                        match freezes(settings, backend.kind()) {
                            true => res.map(|r| r / block),
                            false => [0; D],
                        },
                    )?,
                })
            }
        }
    }

    /// Bytes the grid holds (a sparse grid's reserved pool included).
    pub fn bytes(&self) -> usize {
        match &self.tree {
            Some(t) => t.memory().map(|m| m.reserved as usize).unwrap_or(0) + self.marks.bytes(),
            None => {
                self.v.bytes()
                    + self.v0.bytes()
                    + self.m.bytes()
                    + self.j.bytes()
                    + self.heat.bytes()
                    + self.q.bytes()
                    + self.color.bytes()
            }
        }
    }
}

/// Whether the substep runs on a frozen grid, its blocks activated by a pass of their own
/// (`touch_stencils`): on a GPU, for a sparse grid with dense blocks at least a stencil wide
/// minus one, where that pass finds every block. The activating `+=` costs a GPU the
/// allocation path on every access (lavapipe: a sparse P2G at 3x the dense one, see
/// `Tree::freeze`); the CPU's block cache skips it already. Not with F-bar: its scatter runs
/// at the particles' new positions, whose stencils may reach blocks the pass (at the old
/// ones) did not. (MPI ranks do not freeze either: `Solver::freezes_grid`.)
fn freezes<const D: usize>(settings: &Settings<D>, backend: BackendKind) -> bool {
    let support = match settings.spline {
        Spline::Quadratic => 3,
        Spline::Cubic => 4,
    };
    backend != BackendKind::Cpu
        && !settings.f_bar
        && matches!(
            settings.grid,
            GridLayout::Sparse { block, bitmasked: false, .. } if block + 1 >= support
        )
}

/// Particles added during a run: `region` is filled anew every `interval` seconds from
/// `start` until `stop`.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitter<const D: usize> {
    pub region: Region<D>,
    pub sampling: Sampling,
    pub spacing: f32,
    pub material: MaterialId,
    pub velocity: [f32; D],
    pub interval: f32,
    pub start: f32,
    pub stop: f32,
}

/// A user kernel that writes the stress of `Material::User` particles.
pub type StressHook<V, M> = Box<dyn FnMut(&mut Particles<V, M>) -> Result<()> + Send>;

/// Colliders one solver holds at most.
pub const MAX_COLLIDERS: usize = 32;

/// An MLS-MPM simulation on one backend.
pub struct Solver<S: Space<D>, const D: usize> {
    settings: Settings<D>,
    backend: BackendRef,
    pub particles: Particles<S::V, S::M>,
    pub grid: Grid<S::V, D>,
    pub materials: MaterialTable,
    colliders: Vec<Collider>,
    collider_table: Field<Vec4>,
    /// The distance fields added (`add_sdf`), and all their samples, on the host and the
    /// device.
    sdfs: Vec<SdfLattice>,
    sdf_samples: Vec<f32>,
    sdf_field: Field<f32>,
    status: Field<i32>,
    speeds: Field<i32>,
    emitters: Vec<(Emitter<D>, f64)>,
    hooks: Vec<StressHook<S::V, S::M>>,
    step: u64,
    time: f64,
    dt: f32,
    /// An upper bound of the fastest signal, particle speed plus wave speed, after the last
    /// substep (adaptive stepping, see `TimeStep::Adaptive`).
    speed_bound: f32,
    seed: u32,
    /// Particles removed so far because they left the domain.
    removed: u64,
    /// This rank's share of a run decomposed across processes (`decompose`).
    ranks: Option<ranks::Decomposition>,
    /// Made at the first sort (`Settings::sort_every`).
    sorter: Option<sorting::Sorter<S::V, S::M>>,
}

impl<S: Space<D>, const D: usize> Solver<S, D> {
    pub fn new(backend: &BackendRef, settings: Settings<D>) -> Result<Self> {
        settings.validate()?;
        let dt = match settings.time_step {
            TimeStep::Fixed(dt) => dt,
            TimeStep::Adaptive { max, .. } => max,
        };
        let mut status = Field::new(backend, [kernels::STATUS_WORDS])?;
        status.fill(0)?;
        Ok(Solver {
            grid: Grid::new(backend, &settings)?,
            particles: Particles::new(backend, 1024)?,
            materials: MaterialTable::new(backend, D, settings.dx)?,
            colliders: Vec::new(),
            collider_table: Field::new(
                backend,
                [MAX_COLLIDERS as u32 * kernels::COLLIDER_ROWS as u32],
            )?,
            sdfs: Vec::new(),
            sdf_samples: Vec::new(),
            sdf_field: Field::new(backend, [1])?,
            status,
            speeds: Field::new(backend, [kernels::SPEED_BUCKETS])?,
            emitters: Vec::new(),
            hooks: Vec::new(),
            step: 0,
            time: 0.0,
            dt,
            speed_bound: 0.0,
            seed: 0,
            removed: 0,
            ranks: None,
            sorter: None,
            backend: backend.clone(),
            settings,
        })
    }

    pub fn settings(&self) -> &Settings<D> {
        &self.settings
    }

    pub fn backend(&self) -> &BackendRef {
        &self.backend
    }

    /// Substeps run so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Simulated time so far, in seconds.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Particles removed so far because they left the domain (came within two cells of the
    /// border; walls keep particles out of that band, so this counts only runs without
    /// walls). Counted at each check.
    pub fn removed(&self) -> u64 {
        self.removed
    }

    /// The last substep's time step.
    pub fn dt(&self) -> f32 {
        self.dt
    }

    /// Seeds the random placement of the particles added next (jittered and Poisson-disk
    /// sampling); every later `add_particles` call moves on to the next seed.
    pub fn set_seed(&mut self, seed: u32) {
        self.seed = seed;
    }

    /// Makes room for `additional` more particles at once, so that adding them reallocates
    /// nothing.
    pub fn reserve_particles(&mut self, additional: usize) -> Result<()> {
        let want = self.particles.count() as usize + additional;
        self.particles.reserve_exact(want)
    }

    pub fn add_material(&mut self, material: Material) -> Result<MaterialId> {
        self.materials.add(material)
    }

    /// Sets a material's thermal properties (see [`Heat`]; without it they leave the
    /// material at its starting temperature, which its softening curve still reads).
    /// Particles added afterwards start at its temperature. With heat on and a fixed time
    /// step, the step must be stable for the conduction.
    pub fn set_thermal(&mut self, material: MaterialId, thermal: Thermal) -> Result<()> {
        // The other materials' conduction was checked when they were set.
        let fixed = match self.settings.time_step {
            TimeStep::Fixed(dt) if self.settings.heat.is_some() => Some(dt),
            _ => None,
        };
        if let (Some(dt), Some(m)) = (fixed, self.materials.get(material)) {
            thermal.validate(m)?;
            let alpha = thermal.diffusivity(m.density());
            let bound = HEAT_STEP * self.settings.dx * self.settings.dx / alpha;
            if alpha > 0.0 && dt > bound {
                return Err(SolverError::InvalidParameter(format!(
                    "{} material's conductivity: the time step {dt} s exceeds the stable \
                     conduction step {bound:.3e} s ({HEAT_STEP} dx^2 / alpha); lower it or \
                     use an adaptive one",
                    m.name()
                )));
            }
        }
        self.materials.set_thermal(material, thermal)
    }

    /// The stable step of the conduction, `HEAT_STEP dx^2 / alpha` for the largest
    /// diffusivity, with heat on and any conducting material.
    fn heat_dt(&self) -> Option<f32> {
        let alpha = self.materials.max_diffusivity();
        (self.settings.heat.is_some() && alpha > 0.0)
            .then(|| HEAT_STEP * self.settings.dx * self.settings.dx / alpha)
    }

    /// Sets a material's surface tension coefficient `sigma` (N/m; N in 2D, per metre of
    /// depth; 0 for none), which needs `Settings::surface_tension`. With a fixed time step,
    /// the step must resolve the material's capillary waves.
    pub fn set_surface_tension(&mut self, material: MaterialId, sigma: f32) -> Result<()> {
        let m = self.materials.existing(material)?;
        if sigma != 0.0 && !self.settings.surface_tension {
            return Err(SolverError::InvalidParameter(format!(
                "{} material: a surface tension needs the solver's surface_tension setting on",
                m.name()
            )));
        }
        if let (TimeStep::Fixed(dt), true) = (self.settings.time_step, sigma.is_finite()) {
            let dx = self.settings.dx;
            let bound = CAPILLARY_STEP * (m.density() * dx.powi(3) / sigma).sqrt();
            if sigma > 0.0 && dt > bound {
                return Err(SolverError::InvalidParameter(format!(
                    "{} material's surface tension {sigma}: the time step {dt} s exceeds the \
                     capillary step {bound:.3e} s ({CAPILLARY_STEP} sqrt(rho dx^3 / sigma)); \
                     lower it or use an adaptive one",
                    m.name()
                )));
            }
        }
        self.materials.set_surface_tension(material, sigma)
    }

    /// The capillary step, `CAPILLARY_STEP sqrt(rho dx^3 / sigma)` for the stiffest liquid,
    /// with surface tension on and any liquid that has one.
    fn capillary_dt(&self) -> Option<f32> {
        let time = self.materials.capillary_time(self.settings.dx)?;
        self.settings
            .surface_tension
            .then_some(CAPILLARY_STEP * time)
    }

    /// Adds a distance field for `Shape::Sdf` colliders to use.
    pub fn add_sdf(&mut self, sdf: Sdf) -> Result<SdfId> {
        sdf.validate(D)?;
        let first = self.sdf_samples.len();
        // Sample indices reach the kernels as exact f32 integers.
        if first + sdf.values.len() > 1 << 24 {
            return Err(SolverError::InvalidParameter(format!(
                "distance fields hold at most 2^24 samples in all; this one adds {} to {first}",
                sdf.values.len()
            )));
        }
        self.sdf_samples.extend_from_slice(&sdf.values);
        let mut field = Field::new(&self.backend, [self.sdf_samples.len() as u32])?;
        field.upload(&self.sdf_samples)?;
        self.sdf_field = field;
        self.sdfs.push(SdfLattice {
            first: first as u32,
            origin: sdf.origin,
            spacing: sdf.spacing,
            dims: sdf.dims,
        });
        Ok(SdfId(self.sdfs.len() as u32 - 1))
    }

    /// Checks a collider for this solver: its own ranges, its distance field, and in 2D a
    /// turn about z only.
    fn check_collider(&self, collider: &Collider) -> Result<()> {
        collider.validate()?;
        if let Shape::Sdf {
            sdf,
            rotation,
            angular_velocity,
            ..
        } = collider.shape
        {
            if sdf.0 as usize >= self.sdfs.len() {
                return Err(SolverError::InvalidParameter(format!(
                    "collider uses distance field {}, but the solver has {}",
                    sdf.0,
                    self.sdfs.len()
                )));
            }
            if D == 2
                && (rotation[0] != 0.0
                    || rotation[1] != 0.0
                    || angular_velocity[0] != 0.0
                    || angular_velocity[1] != 0.0)
            {
                return Err(SolverError::InvalidParameter(format!(
                    "a 2D collider turns about z only (rotation {rotation:?}, angular velocity \
                     {angular_velocity:?})"
                )));
            }
        }
        Ok(())
    }

    pub fn add_collider(&mut self, collider: Collider) -> Result<()> {
        self.check_collider(&collider)?;
        if self.colliders.len() == MAX_COLLIDERS {
            return Err(SolverError::InvalidParameter(format!(
                "a solver holds at most {MAX_COLLIDERS} colliders"
            )));
        }
        self.colliders.push(collider);
        self.upload_colliders()
    }

    pub fn colliders(&self) -> &[Collider] {
        &self.colliders
    }

    /// Replaces collider `index` (e.g. one that follows a mouse).
    pub fn set_collider(&mut self, index: usize, collider: Collider) -> Result<()> {
        self.check_collider(&collider)?;
        let Some(slot) = self.colliders.get_mut(index) else {
            return Err(SolverError::InvalidParameter(format!(
                "no collider {index} (the solver has {})",
                self.colliders.len()
            )));
        };
        *slot = collider;
        self.upload_colliders()
    }

    /// Removes collider `index`; later ones move down by one.
    pub fn remove_collider(&mut self, index: usize) -> Result<Collider> {
        if index >= self.colliders.len() {
            return Err(SolverError::InvalidParameter(format!(
                "no collider {index} (the solver has {})",
                self.colliders.len()
            )));
        }
        let removed = self.colliders.remove(index);
        self.upload_colliders()?;
        Ok(removed)
    }

    pub fn add_emitter(&mut self, emitter: Emitter<D>) -> Result<()> {
        if self.materials.get(emitter.material).is_none() {
            return Err(SolverError::InvalidParameter(format!(
                "emitter uses material id {}, which this solver does not have ({} materials)",
                emitter.material.0,
                self.materials.materials.len()
            )));
        }
        if !(emitter.interval.is_finite() && emitter.interval > 0.0) {
            return Err(SolverError::InvalidParameter(format!(
                "emitter interval {} must be finite and > 0",
                emitter.interval
            )));
        }
        if !(emitter.spacing.is_finite() && emitter.spacing > 0.0) {
            return Err(SolverError::InvalidParameter(format!(
                "emitter spacing {} must be finite and > 0",
                emitter.spacing
            )));
        }
        // Up front: what the emitter adds over its whole life (one firing when it never
        // stops) must fit with the particles already there.
        let per_firing = lattice_count(&emitter.region, emitter.spacing);
        let firings = match emitter.stop.is_finite() {
            true => ((emitter.stop - emitter.start) as f64 / emitter.interval as f64)
                .ceil()
                .max(1.0),
            false => 1.0,
        };
        check_memory::<S::V, S::M>(
            self.particles.count() as f64 + per_firing * firings,
            &format!(
                "an emitter adding about {per_firing:.3e} particles {firings} time(s) to {}",
                self.particles.count()
            ),
        )?;
        let first = emitter.start as f64;
        self.emitters.push((emitter, first));
        Ok(())
    }

    /// Registers a kernel that writes `tau` for `Material::User` particles; it runs after
    /// every substep and whenever particles are added.
    pub fn add_stress_hook(
        &mut self,
        hook: impl FnMut(&mut Particles<S::V, S::M>) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        self.hooks.push(Box::new(hook));
        let mut hook = self.hooks.pop().expect("just pushed");
        let result = hook(&mut self.particles);
        self.hooks.push(hook);
        result
    }

    /// Recomputes every particle's stress from its deformation: call it after writing
    /// particle fields directly (say a prestressed initial state in `grad_u`), so that the
    /// next substep does not scatter the old stress.
    pub fn update_stress(&mut self) -> Result<()> {
        let count = self.particles.count();
        S::init_stress(&mut self.particles, &self.materials, 0, count)?;
        self.run_hooks()
    }

    /// Fills `region` with particles of `material` moving at `velocity`; returns how many
    /// were added.
    pub fn add_particles(
        &mut self,
        region: &Region<D>,
        sampling: Sampling,
        spacing: f32,
        material: MaterialId,
        velocity: [f32; D],
    ) -> Result<usize> {
        if spacing.is_finite() && spacing > 0.0 {
            check_memory::<S::V, S::M>(
                lattice_count(region, spacing),
                &format!("filling the {region} at spacing {spacing}"),
            )?;
        }
        let positions = seeding::fill(region, spacing, sampling, self.seed)?;
        self.seed = self.seed.wrapping_add(1);
        let volume = match sampling {
            Sampling::PoissonDisk => region_volume(region) / positions.len().max(1) as f32,
            _ => spacing.powi(D as i32),
        };
        self.add_positions(&positions, volume, material, velocity)?;
        Ok(positions.len())
    }

    /// Adds particles at given positions, each of initial volume `volume`, all moving at
    /// `velocity`.
    pub fn add_positions(
        &mut self,
        positions: &[[f32; D]],
        volume: f32,
        material: MaterialId,
        velocity: [f32; D],
    ) -> Result<()> {
        self.add_moving(
            positions,
            &vec![velocity; positions.len()],
            volume,
            material,
        )
    }

    /// Adds particles at given positions with their own velocities.
    pub fn add_moving(
        &mut self,
        positions: &[[f32; D]],
        velocities: &[[f32; D]],
        volume: f32,
        material: MaterialId,
    ) -> Result<()> {
        let Some(m) = self.materials.get(material) else {
            return Err(SolverError::InvalidParameter(format!(
                "material id {} is not one of this solver's {} materials",
                material.0,
                self.materials.materials.len()
            )));
        };
        if velocities.len() != positions.len() {
            return Err(SolverError::InvalidParameter(format!(
                "{} positions but {} velocities",
                positions.len(),
                velocities.len()
            )));
        }
        if !(volume.is_finite() && volume > 0.0) {
            return Err(SolverError::InvalidParameter(format!(
                "particle volume {volume} must be finite and > 0"
            )));
        }
        if let Some(v) = velocities.iter().find(|v| !v.iter().all(|c| c.is_finite())) {
            return Err(SolverError::InvalidParameter(format!(
                "particle velocity {v:?} is not finite"
            )));
        }
        let (lo, hi) = self.interior();
        if let Some(p) = positions
            .iter()
            .find(|p| !(0..D).all(|a| p[a] >= lo[a] && p[a] <= hi[a]))
        {
            return Err(SolverError::InvalidParameter(format!(
                "particle at {p:?} lies outside the domain's interior {lo:?}..{hi:?}"
            )));
        }
        // From every particle, so that all ranks of a decomposed run agree on the next step.
        let top_speed = velocities
            .iter()
            .map(|v| v.iter().map(|c| c * c).sum::<f32>().sqrt())
            .fold(0.0, f32::max);
        // A decomposed run keeps what its slab holds (every rank adds the same particles).
        let owned: (Vec<[f32; D]>, Vec<[f32; D]>);
        let (positions, velocities) = match &self.ranks {
            Some(d) => {
                let dx = self.settings.dx;
                owned = positions
                    .iter()
                    .zip(velocities)
                    .filter(|(p, _)| d.owns(p[0], dx))
                    .unzip();
                (&owned.0[..], &owned.1[..])
            }
            None => (positions, velocities),
        };
        let n = positions.len();
        let density = m.density();
        let temperature = self
            .materials
            .thermal(material)
            .map_or(Thermal::default().temperature, |t| t.temperature);
        let wave = self.rest_signal(m);
        let start = self.particles.count();
        self.particles.reserve(start as usize + n)?;
        // In batches, so that the host copy of a large body stays small (a 10M-particle body
        // would otherwise sit on the host a second time, 1.5 GB in 3D, until uploaded).
        const BATCH: usize = 1 << 18;
        for (xs, vs) in positions.chunks(BATCH).zip(velocities.chunks(BATCH)) {
            let k = xs.len();
            self.particles.append(&HostParticles {
                x: xs.iter().map(|p| S::vector(*p)).collect(),
                v: vs.iter().map(|v| S::vector(*v)).collect(),
                c: vec![S::M::zero(); k],
                grad_u: vec![S::M::zero(); k],
                tau: vec![S::M::zero(); k],
                jp: vec![1.0; k],
                mass: vec![density * volume; k],
                vol: vec![volume; k],
                material: vec![material.0; k],
                temperature: vec![temperature; k],
            })?;
        }
        self.reserve_blocks()?;
        // New particles are at rest in their material until the next substep measures them.
        self.speed_bound = self.speed_bound.max(top_speed + wave);
        S::init_stress(
            &mut self.particles,
            &self.materials,
            start,
            start + n as u32,
        )?;
        self.run_hooks()
    }

    /// Where particles may be: two cells clear of the border, so every stencil fits, and
    /// not behind the walls' surfaces (see [`Walls`]).
    pub fn interior(&self) -> ([f32; D], [f32; D]) {
        let s = &self.settings;
        let axis = |a: usize| {
            let (low, high) = s.walls.surfaces(s.res[a], s.dx);
            let border = (MARGIN * s.dx, (s.res[a] as f32 - MARGIN) * s.dx);
            (low.max(border.0), high.min(border.1))
        };
        (
            std::array::from_fn(|a| axis(a).0),
            std::array::from_fn(|a| axis(a).1),
        )
    }

    /// The time step the next substep takes.
    pub fn next_dt(&self) -> f32 {
        match self.settings.time_step {
            TimeStep::Fixed(dt) => dt,
            TimeStep::Adaptive { cfl, max } => {
                let dx = self.settings.dx;
                let g = self
                    .settings
                    .gravity
                    .iter()
                    .map(|g| g * g)
                    .sum::<f32>()
                    .sqrt();
                // The speed may grow by g dt during the step: bound it with dt = max. A
                // moving collider, too, crosses at most `cfl` of a cell per step.
                let colliders = self
                    .colliders
                    .iter()
                    .map(|c| c.top_speed(&self.sdfs))
                    .fold(0.0f32, f32::max);
                let signal = (self.speed_bound + g * max).max(colliders);
                let waves = if signal > 0.0 {
                    max.min(cfl * dx / signal)
                } else {
                    max
                };
                [self.heat_dt(), self.capillary_dt()]
                    .into_iter()
                    .flatten()
                    .fold(waves, f32::min)
            }
        }
    }

    /// The signal speed of a material at rest: its wave speed, widened by bulk viscosity
    /// at zero strain rate to `c (linear + sqrt(linear^2 + 1))` (see `TimeStep::Adaptive`).
    fn rest_signal(&self, m: &Material) -> f32 {
        let c = m.wave_speed();
        let linear = match m {
            Material::User { .. } => 0.0,
            _ => self.settings.bulk_viscosity.linear,
        };
        c * (linear + (linear * linear + 1.0).sqrt())
    }

    /// Advances one substep; returns its time step.
    pub fn substep(&mut self) -> Result<f32> {
        self.emit()?;
        let every = self.settings.sort_every as u64;
        if every > 0 && self.step.is_multiple_of(every) {
            self.sort_particles()?;
        }
        let dt = self.next_dt();
        self.dt = dt;
        if self.colliders.iter().any(Collider::is_moving) {
            for c in &mut self.colliders {
                c.advance(dt);
            }
            self.upload_colliders()?;
        }
        if let Some(tree) = &self.grid.tree {
            tree.deactivate_all()?;
        }
        let frozen = self.grid.tree.clone().filter(|_| self.freezes_grid());
        let s = &self.settings;
        let scalars = StepScalars {
            step: self.step as i32,
            res: s.res,
            support: match s.spline {
                Spline::Quadratic => 3,
                Spline::Cubic => 4,
            },
            dt,
            dx: s.dx,
            dinv: s.spline.inverse_inertia(s.dx),
            gravity: s.gravity,
            damping: s.damping,
            viscosity: (s.bulk_viscosity.linear, s.bulk_viscosity.quadratic),
            flip: s.flip,
            n_colliders: self.colliders.len() as i32,
            walls: s.walls.condition.code()?,
            wall_thickness: s.walls.thickness as i32,
            margin: MARGIN,
            max_speed: s.max_cells_per_step * s.dx / dt,
            track_speed: matches!(s.time_step, TimeStep::Adaptive { .. }),
            f_bar: s.f_bar,
            heat: s.heat.is_some(),
            wall_heat: s.heat.unwrap_or_default().walls.code()?,
            soften: self.materials.softens(),
            tension: s.surface_tension,
        };
        if frozen.is_some() {
            S::touch_stencils(&self.particles, &mut self.grid, &scalars)?;
        }
        if self.ranks.is_some() {
            self.substep_in_parts(&scalars)?;
        } else {
            let mut step = || self.launch_substep(&scalars);
            match &frozen {
                Some(tree) => tree.while_frozen(step),
                None => step(),
            }?;
        }
        self.step += 1;
        self.time += dt as f64;
        self.run_hooks()?;
        if self.ranks.is_some() {
            self.migrate()?;
        }
        if scalars.track_speed {
            self.read_speed_bound()?;
            self.agree_on_speed_bound()?;
        }
        if self.step.is_multiple_of(self.settings.check_every as u64) {
            self.check()?;
        }
        Ok(dt)
    }

    /// Whether the substep runs on a frozen grid (see [`freezes`]).
    fn freezes_grid(&self) -> bool {
        // A rank adds its neighbours' shares into blocks its own particles may not touch.
        self.ranks.is_none() && freezes(&self.settings, self.backend.kind())
    }

    /// Advances until `seconds` of simulated time have passed; returns the substeps taken.
    /// The substeps run as one batch of the backend's work (see [`crate::batched`]).
    pub fn advance(&mut self, seconds: f64) -> Result<u64> {
        let end = self.time + seconds;
        let first = self.step;
        let backend = self.backend.clone();
        crate::batched(backend.as_ref(), || -> Result<()> {
            while self.time < end - 1e-9 {
                self.substep()?;
            }
            Ok(())
        })?;
        Ok(self.step - first)
    }

    /// Reads the status words: fails on a diverged particle, removes particles that left
    /// the domain. Runs every `check_every` substeps; call it before reading results.
    pub fn check(&mut self) -> Result<()> {
        let status = self.status.download()?;
        if status[0] > 0 {
            let particle = status[1].max(0) as u32;
            let material_id = self
                .particles
                .material
                .download()?
                .get(particle as usize)
                .map_or(MaterialId(-1), |&m| {
                    MaterialId(if m < 0 { -1 - m } else { m })
                });
            let material = self
                .materials
                .get(material_id)
                .map(|m| m.name())
                .unwrap_or_default();
            let reason = if status[3] == kernels::NON_FINITE {
                "reached a non-finite position, velocity or stress".to_string()
            } else {
                format!(
                    "moved more than {} cells in one substep (lower the time step or use an adaptive one)",
                    self.settings.max_cells_per_step
                )
            };
            return Err(SolverError::Diverged {
                step: status[2].max(0) as u64,
                particle,
                material,
                material_id,
                reason,
            });
        }
        if status[4] > 0 {
            self.removed += status[4] as u64;
            let mut host = self.particles.download()?;
            host.retain_alive();
            self.particles.upload(&host)?;
            self.status.fill(0)?;
        }
        Ok(())
    }

    /// Kinetic, strain and gravitational energy of the live particles (downloads them; see
    /// [`Energy`] for what each term holds).
    pub fn energy(&mut self) -> Result<Energy> {
        self.check()?;
        let host = self.particles.download()?;
        let pad = |a: &[f32]| {
            glam::DVec3::from_array(std::array::from_fn(|i| a.get(i).map_or(0.0, |&c| c as f64)))
        };
        let gravity = pad(&self.settings.gravity);
        let inertia = 1.0 / self.settings.spline.inverse_inertia(self.settings.dx) as f64;
        let mut sum = Energy::default();
        for i in 0..host.len() {
            let Some(material) = self.materials.get(MaterialId(host.material[i])) else {
                continue;
            };
            let state = energy::ParticleState {
                x: pad(&S::components(host.x[i])),
                v: pad(&S::components(host.v[i])),
                c: S::padded(host.c[i]),
                grad_u: S::padded(host.grad_u[i]),
                jp: host.jp[i] as f64,
                mass: host.mass[i] as f64,
                vol: host.vol[i] as f64,
            };
            energy::add(&mut sum, material, &state, gravity, inertia);
        }
        Ok(sum)
    }

    /// Positions and material ids of the live particles.
    pub fn positions(&mut self) -> Result<(Vec<[f32; D]>, Vec<i32>)> {
        self.check()?;
        let n = self.particles.count() as usize;
        let mut x = self.particles.x.download()?;
        let mut m = self.particles.material.download()?;
        x.truncate(n);
        m.truncate(n);
        Ok((x.into_iter().map(S::components).collect(), m))
    }

    /// Everything that evolves during a run, for checkpoints. Dead particles and the status
    /// words are kept as they are, so that a restored run compacts exactly as the original.
    pub fn snapshot(&self) -> Result<Snapshot<S::V, S::M>> {
        Ok(Snapshot {
            particles: self.particles.download()?,
            status: self.status.download()?,
            step: self.step,
            time: self.time,
            dt: self.dt,
            speed_bound: self.speed_bound,
            seed: self.seed,
            removed: self.removed,
            colliders: self.colliders.clone(),
            emitter_times: self.emitters.iter().map(|(_, next)| *next).collect(),
        })
    }

    /// Continues from a snapshot of a solver built the same way (same settings, materials
    /// and emitters).
    pub fn restore(&mut self, s: Snapshot<S::V, S::M>) -> Result<()> {
        if s.emitter_times.len() != self.emitters.len()
            || s.colliders.len() != self.colliders.len()
            || s.status.len() != kernels::STATUS_WORDS as usize
        {
            return Err(SolverError::InvalidParameter(format!(
                "the snapshot has {} emitters and {} colliders, this solver {} and {}",
                s.emitter_times.len(),
                s.colliders.len(),
                self.emitters.len(),
                self.colliders.len()
            )));
        }
        for c in &s.colliders {
            self.check_collider(c)?;
        }
        if let Some(bad) = s.particles.material.iter().find(|&&m| {
            let id = if m < 0 { -1 - m } else { m };
            self.materials.get(MaterialId(id)).is_none()
        }) {
            return Err(SolverError::InvalidParameter(format!(
                "the snapshot holds particles of material {bad}, which this solver lacks"
            )));
        }
        self.particles.upload(&s.particles)?;
        self.status.upload(&s.status)?;
        self.step = s.step;
        self.time = s.time;
        self.dt = s.dt;
        self.speed_bound = s.speed_bound;
        self.seed = s.seed;
        self.removed = s.removed;
        self.colliders = s.colliders;
        for ((_, next), t) in self.emitters.iter_mut().zip(s.emitter_times) {
            *next = t;
        }
        self.upload_colliders()
    }

    /// Makes a sparse grid's pool at least twice the blocks the particles' stencils touch, so
    /// that the next P2G fits (afterwards the pool grows by itself as material spreads, see
    /// [`Tree`]).
    fn reserve_blocks(&mut self) -> Result<()> {
        let (GridLayout::Sparse { block, .. }, Some(tree)) = (self.settings.grid, &self.grid.tree)
        else {
            return Ok(());
        };
        let mut x = self.particles.x.download()?;
        x.truncate(self.particles.count() as usize);
        let dx = self.settings.dx;
        let per_axis = self.settings.res.map(|r| (r / block).max(1));
        let mut touched = std::collections::HashSet::new();
        for p in &x {
            let c = S::components(*p);
            // The stencil reaches from floor(x - 1) to floor(x) + 2 cells (cubic splines).
            let lo: [u32; D] = std::array::from_fn(|a| {
                ((c[a] / dx - 1.0).floor().max(0.0) as u32 / block).min(per_axis[a] - 1)
            });
            let hi: [u32; D] = std::array::from_fn(|a| {
                (((c[a] / dx).floor() + 2.0).max(0.0) as u32 / block).min(per_axis[a] - 1)
            });
            let mut b = lo;
            loop {
                touched.insert(b);
                let mut a = 0;
                while a < D {
                    if b[a] < hi[a] {
                        b[a] += 1;
                        break;
                    }
                    b[a] = lo[a];
                    a += 1;
                }
                if a == D {
                    break;
                }
            }
        }
        Ok(tree.reserve(2 * touched.len() as u32)?)
    }

    /// One launch of the substep kernel (or of the loops `only_loops` picks).
    fn launch_substep(&mut self, scalars: &StepScalars<D>) -> Result<()> {
        S::substep(
            &mut self.particles,
            &mut self.grid,
            &self.materials,
            &self.collider_table,
            &self.sdf_field,
            &mut self.status,
            &mut self.speeds,
            scalars,
        )
    }

    /// A decomposed run's substep: the kernel in parts, each ending with a scatter whose
    /// shared planes the ranks then swap (see [`ranks`]).
    fn substep_in_parts(&mut self, scalars: &StepScalars<D>) -> Result<()> {
        let s = &self.settings;
        let (flip, heat, tension) = (s.flip > 0.0, s.heat.is_some(), s.surface_tension);
        // Sections v, v0, m, heat, color, q, j (see `halo_pack`).
        let scattered = [true, flip, true, heat, tension, false, false];
        let only = |section: usize| std::array::from_fn(|k| k == section);
        let mut parts: Vec<(&str, &str, Option<[bool; 7]>)> = vec![
            ("speeds", "color_p2g", Some(scattered)),
            ("capillary", "conduct", heat.then(|| only(5))),
            ("heat_g2p", "f_bar_scatter", s.f_bar.then(|| only(6))),
            ("f_bar_stress", "f_bar_stress", None),
        ];
        // Parts with no exchange between them run as one launch.
        let mut k = 0;
        while k + 1 < parts.len() {
            if parts[k].2.is_none() {
                parts[k].1 = parts[k + 1].1;
                parts[k].2 = parts[k + 1].2;
                parts.remove(k + 1);
            } else {
                k += 1;
            }
        }
        for (first, last, exchange) in parts {
            crate::only_loops(first, last, || self.launch_substep(scalars))?;
            if let Some(sections) = exchange {
                self.exchange_halo(sections)?;
            }
        }
        Ok(())
    }

    /// Swaps the shared planes of the grid fields in `sections` with the neighbouring ranks
    /// and adds what they sent.
    fn exchange_halo(&mut self, sections: [bool; 7]) -> Result<()> {
        let Some(d) = &mut self.ranks else {
            return Ok(());
        };
        let res = self.settings.res;
        let plane: u32 = res[1..].iter().product();
        let cells = 2 * ranks::HALO * plane;
        let n = sections.map(|on| if on { cells } else { 0 });
        let words = (cells as usize)
            * sections
                .iter()
                .zip([D, D, 1, 2, 4, 1, 2])
                .filter(|(on, _)| **on)
                .map(|(_, w)| w)
                .sum::<usize>();
        let (rank, size) = (d.rank(), d.ranks.size());
        // The first shared plane of each neighbour's cut.
        let first = |r: usize| d.slabs.cuts[r] as i32 - ranks::HALO as i32;
        let neighbours: Vec<(usize, i32)> = [
            (rank > 0).then(|| (rank - 1, first(rank))),
            (rank + 1 < size).then(|| (rank + 1, first(rank + 1))),
        ]
        .into_iter()
        .flatten()
        .collect();
        let halo = match d.halo.take() {
            Some(h) if h.len() >= words => h,
            _ => Field::<f32>::new(&self.backend, [words.max(1) as u32])?,
        };
        let halo = d.halo.insert(halo);
        let mut to = vec![Vec::new(); size];
        for &(r, at) in &neighbours {
            S::halo_pack(&self.grid, halo, at, res, n)?;
            let mut h = halo.download()?;
            h.truncate(words);
            let h: Vec<u32> = h.into_iter().map(f32::to_bits).collect();
            to[r] = ranks::squeeze(&h);
            d.halo_bytes += 4 * to[r].len() as u64;
        }
        let from = d.ranks.exchange(to)?;
        for &(r, at) in &neighbours {
            let Some(got) = ranks::unsqueeze(&from[r], words) else {
                return Err(SolverError::InvalidParameter(format!(
                    "rank {r} sent {} words that are not {words} words of shared grid \
                     planes: do all ranks run the same scene?",
                    from[r].len()
                )));
            };
            let got: Vec<f32> = got.into_iter().map(f32::from_bits).collect();
            halo.upload_at(0, &got)?;
            S::halo_add(&mut self.grid, halo, at, res, n)?;
        }
        Ok(())
    }

    /// Sends the live particles whose cell left this rank's slab to the rank that holds it
    /// and takes in those others send (every rank calls it at once).
    fn migrate(&mut self) -> Result<()> {
        let Some(d) = &mut self.ranks else {
            return Ok(());
        };
        let (rank, size) = (d.rank(), d.ranks.size());
        let n = self.particles.count() as usize;
        let mut x = self.particles.x.download()?;
        let mut material = self.particles.material.download()?;
        x.truncate(n);
        material.truncate(n);
        let owner = owners::<S, D>(d, &x, &material, self.settings.dx);
        let mut to = vec![Vec::new(); size];
        if owner.iter().any(|&o| o != rank) {
            let mut parts = self.particles.download()?.split(&owner, size);
            self.particles.upload(&parts[rank])?;
            parts[rank] = HostParticles::default();
            for (r, p) in parts.iter().enumerate() {
                if !p.is_empty() {
                    to[r] = p.to_words();
                    d.migrated_bytes += 4 * to[r].len() as u64;
                }
            }
        }
        for (r, words) in d.ranks.exchange(to)?.into_iter().enumerate() {
            if words.is_empty() {
                continue;
            }
            let Some(arrived) = HostParticles::from_words(&words) else {
                return Err(SolverError::InvalidParameter(format!(
                    "rank {r} sent {} words that are no whole set of particles",
                    words.len()
                )));
            };
            self.particles.append(&arrived)?;
        }
        Ok(())
    }

    /// Shares the run among the processes of `ranks`, each holding the particles of one
    /// slab of the grid across x (see [`ranks`]): every rank must have built the same
    /// solver, and calls this at the same point; each keeps the particles in its slab, cut
    /// so that the particles added so far are shared evenly. Particles added later go to
    /// the rank whose slab holds them; [`Solver::rebalance`] moves the cuts with the
    /// particles. A single rank runs as without.
    pub fn decompose(&mut self, ranks: Box<dyn Ranks>) -> Result<()> {
        if self.ranks.is_some() {
            return Err(SolverError::InvalidParameter(
                "the solver is decomposed already".into(),
            ));
        }
        if ranks.size() <= 1 {
            return Ok(());
        }
        let weights = self.column_weights()?;
        let slabs = Slabs::balanced(&weights, ranks.size(), self.block())?;
        self.ranks = Some(ranks::Decomposition {
            ranks,
            slabs,
            halo_bytes: 0,
            migrated_bytes: 0,
            halo: None,
        });
        // Everyone holds everything: keep this slab's, send nothing.
        let host = self.particles.download()?;
        if let Some(d) = &self.ranks {
            let owner = owners::<S, D>(d, &host.x, &host.material, self.settings.dx);
            let mine = host.split(&owner, d.slabs.ranks()).swap_remove(d.rank());
            self.particles.upload(&mine)?;
        }
        Ok(())
    }

    /// Moves the cuts so that each rank holds as many particles as it can (all ranks call
    /// it at once, between substeps) and migrates the particles to their new ranks: also
    /// the way to continue from per-rank snapshots (`restore` each rank's, then this).
    pub fn rebalance(&mut self) -> Result<()> {
        if self.ranks.is_none() {
            return Ok(());
        }
        self.check()?;
        let mut weights = self.column_weights()?;
        let unit = self.block();
        if let Some(d) = &mut self.ranks {
            d.ranks.sum(&mut weights)?;
            d.slabs = Slabs::balanced(&weights, d.ranks.size(), unit)?;
        }
        self.agree_on_speed_bound()?;
        self.migrate()
    }

    /// Every rank of a decomposed run takes the fastest signal of any, so that all take the
    /// same next step (and a loop over `next_dt` runs as many substeps on each).
    fn agree_on_speed_bound(&mut self) -> Result<()> {
        if let Some(d) = &self.ranks {
            self.speed_bound = d.ranks.max(self.speed_bound as f64)? as f32;
        }
        Ok(())
    }

    /// How a decomposed run stands on this rank; `None` when the solver is not decomposed.
    pub fn decomposition(&self) -> Option<RankReport> {
        self.ranks.as_ref().map(|d| RankReport {
            rank: d.rank(),
            slabs: d.slabs.clone(),
            particles: self.particles.count(),
            halo_bytes: d.halo_bytes,
            migrated_bytes: d.migrated_bytes,
        })
    }

    /// This rank's live particles per cell across x.
    fn column_weights(&self) -> Result<Vec<f64>> {
        let n = self.particles.count() as usize;
        let (mut x, mut m) = (
            self.particles.x.download()?,
            self.particles.material.download()?,
        );
        x.truncate(n);
        m.truncate(n);
        let res = self.settings.res[0] as i64;
        let mut weights = vec![0.0; res as usize];
        for (p, &id) in x.iter().zip(&m) {
            if id >= 0 {
                let c = ranks::cell_of(S::components(*p)[0], self.settings.dx).clamp(0, res - 1);
                weights[c as usize] += 1.0;
            }
        }
        Ok(weights)
    }

    /// The grid's block: a sparse grid's, 4 cells on a dense grid (slabs are cut at its
    /// multiples, particles sorted by it).
    fn block(&self) -> u32 {
        match self.settings.grid {
            GridLayout::Sparse { block, .. } => block,
            GridLayout::Dense => 4,
        }
    }

    /// Rewrites the particles in the order of their grid blocks (see
    /// `Settings::sort_every`), after a check, so that the status words name no particle by
    /// an index the sort changes (and dead ones are gone first).
    fn sort_particles(&mut self) -> Result<()> {
        self.check()?;
        let sorter = match &mut self.sorter {
            Some(s) => s,
            None => {
                let s = sorting::Sorter::new(&self.backend, &self.settings.res, self.block())?;
                self.sorter.insert(s)
            }
        };
        sorter.sort::<S, D>(&mut self.particles, 1.0 / self.settings.dx)
    }

    fn emit(&mut self) -> Result<()> {
        let mut due = Vec::new();
        for (e, next) in &mut self.emitters {
            // Emissions are scheduled at start + k interval, strictly before stop.
            if self.time + 1e-9 >= *next && *next < e.stop as f64 - 1e-6 {
                due.push(e.clone());
                *next += e.interval as f64;
            }
        }
        for e in due {
            self.add_particles(&e.region, e.sampling, e.spacing, e.material, e.velocity)?;
        }
        Ok(())
    }

    fn run_hooks(&mut self) -> Result<()> {
        for hook in &mut self.hooks {
            hook(&mut self.particles)?;
        }
        Ok(())
    }

    fn upload_colliders(&mut self) -> Result<()> {
        let n = kernels::COLLIDER_ROWS as usize;
        let mut rows = vec![Vec4::ZERO; MAX_COLLIDERS * n];
        for (i, c) in self.colliders.iter().enumerate() {
            rows[n * i..n * (i + 1)].copy_from_slice(&c.rows(&self.sdfs));
        }
        Ok(self.collider_table.upload(&rows)?)
    }

    fn read_speed_bound(&mut self) -> Result<()> {
        let buckets = self.speeds.download()?;
        self.speed_bound = match buckets.iter().rposition(|&b| b != 0) {
            Some(b) => 2f32.powf((b as i32 - kernels::SPEED_BIAS + 1) as f32 / 4.0),
            None => 0.0,
        };
        Ok(())
    }
}

/// The rank each particle at `x` belongs to: its cell's slab's; a dead one (negative
/// `material`) stays with this rank, to be removed by its next check.
fn owners<S: Space<D>, const D: usize>(
    d: &ranks::Decomposition,
    x: &[S::V],
    material: &[i32],
    dx: f32,
) -> Vec<usize> {
    x.iter()
        .zip(material)
        .map(|(p, &m)| match m >= 0 {
            true => d.slabs.owner(ranks::cell_of(S::components(*p)[0], dx)),
            false => d.rank(),
        })
        .collect()
}

/// The evolving state of a solver (see `Solver::snapshot`).
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot<V, M> {
    pub particles: HostParticles<V, M>,
    pub status: Vec<i32>,
    pub step: u64,
    pub time: f64,
    pub dt: f32,
    pub speed_bound: f32,
    pub seed: u32,
    pub removed: u64,
    pub colliders: Vec<Collider>,
    pub emitter_times: Vec<f64>,
}

/// Cells between the border and where particles may be (a cubic stencil reaches two).
pub const MARGIN: f32 = 2.0;

/// Refuses to add about `particles` particles when they would not fit in the memory this
/// machine has available (`MemAvailable` on Linux; no check where it cannot be read): better a
/// message with the estimate than an abort in the allocator. Per particle it counts the host
/// positions and velocities being added, and the particle fields as they grow (a quarter at a
/// time, old and new copies side by side while they move).
fn check_memory<V, M>(particles: f64, what: &str) -> Result<()> {
    let (v, m) = (size_of::<V>() as f64, size_of::<M>() as f64);
    let per_particle = 2.0 * v + 2.25 * (2.0 * v + 3.0 * m + 20.0);
    let needed = particles * per_particle;
    let Some(available) = available_memory() else {
        return Ok(());
    };
    if needed <= available as f64 {
        return Ok(());
    }
    let gib = |b: f64| b / (1u64 << 30) as f64;
    Err(SolverError::InvalidParameter(format!(
        "{what}: about {particles:.3e} particles need about {:.1} GiB ({per_particle:.0} bytes \
         each while they are added), but {:.1} GiB of memory is available; use a larger spacing \
         or a smaller region",
        gib(needed),
        gib(available as f64)
    )))
}

/// Bytes of memory available to new allocations, where the system says (Linux).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// About how many particles fill `region` at `spacing` (on a lattice; fewer with Poisson
/// disks).
fn lattice_count<const D: usize>(region: &Region<D>, spacing: f32) -> f64 {
    region_volume(region) as f64 / (spacing as f64).powi(D as i32)
}

fn region_volume<const D: usize>(region: &Region<D>) -> f32 {
    match region {
        Region::Box { min, max } => (0..D).map(|a| max[a] - min[a]).product(),
        Region::Sphere { radius, .. } => match D {
            2 => std::f32::consts::PI * radius * radius,
            _ => 4.0 / 3.0 * std::f32::consts::PI * radius.powi(3),
        },
    }
}

/// The scalars of one substep, shared by both dimensions.
pub struct StepScalars<const D: usize> {
    pub step: i32,
    pub res: [u32; D],
    pub support: i32,
    pub dt: f32,
    pub dx: f32,
    pub dinv: f32,
    pub gravity: [f32; D],
    pub damping: f32,
    /// `(linear, quadratic)` bulk viscosity coefficients.
    pub viscosity: (f32, f32),
    pub flip: f32,
    pub n_colliders: i32,
    /// `(condition, friction)` of the walls.
    pub walls: (i32, f32),
    pub wall_thickness: i32,
    pub margin: f32,
    pub max_speed: f32,
    pub track_speed: bool,
    pub f_bar: bool,
    pub heat: bool,
    /// `(1 if fixed else 0, temperature)` of the walls (see `HeatBoundary`).
    pub wall_heat: (f32, f32),
    /// Whether any material's stiffness follows its temperature (`Thermal::softening`).
    pub soften: bool,
    /// Surface tension on (see `Settings::surface_tension`).
    pub tension: bool,
}
