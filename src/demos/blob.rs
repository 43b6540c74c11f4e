//! A 2D blob of particles falling in a box, on a dense or a sparse grid: the scene of the
//! layout benchmarks. `fill` is the fraction of the grid the blob covers.

use std::sync::Arc;

use mpm_core::backend::BackendKind;
use mpm_core::glam::{IVec2, Mat2, Vec2};
use mpm_core::rng::rand_f32;
use mpm_core::solver::kernels::dim2::stencil;
use mpm_core::{kernel, BackendRef, Field, Layout, Memory, Result, Tree};

/// How the grid is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridKind {
    /// dense [n, n]
    Dense,
    /// pointer [n/8, n/8] -> dense [8, 8]: 64 cells a block, as in the 4^3 blocks of 3D grids
    PointerDense,
    /// pointer [n/8, n/8] -> bitmasked [2, 2] -> dense [4, 4]
    PointerBitmaskedDense,
}

impl GridKind {
    pub const ALL: [GridKind; 3] = [
        GridKind::Dense,
        GridKind::PointerDense,
        GridKind::PointerBitmaskedDense,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GridKind::Dense => "dense",
            GridKind::PointerDense => "pointer>dense",
            GridKind::PointerBitmaskedDense => "pointer>bitmasked>dense",
        }
    }
}

#[kernel]
pub fn clear_grid(grid_v: &mut Field<Vec2, 2>, grid_m: &mut Field<f32, 2>) {
    for cell in grid_m.active() {
        grid_v[cell] = Vec2::ZERO;
        grid_m[cell] = 0.0;
    }
}

/// Activates the units (leaf blocks, or a bitmasked cell's block, `unit` cells wide) a P2G
/// will add into: the four corners of each particle's 3x3 stencil, which reach every unit the
/// stencil touches as long as a unit is at least two cells wide. The particles only mark
/// their units (a plain store: every writer stores the same 1), and the activation runs once
/// per unit, clearing the marks for the next substep: a GPU that runs a branch under a mask
/// (lavapipe) pays the allocation path on every `activate` whether or not it allocates. With
/// the units active the P2G runs on a frozen tree, without that path in its `+=`.
#[kernel]
pub fn touch(
    x: &Field<Vec2>,
    marks: &mut Field<u32, 2>,
    grid_m: &mut Field<f32, 2>,
    inv_dx: f32,
    unit: i32,
) {
    'mark: for p in x.indices() {
        let base = (x[p] * inv_dx - 0.5).floor().as_ivec2();
        marks[base / unit] = 1;
        marks[(base + ivec2(2, 0)) / unit] = 1;
        marks[(base + ivec2(0, 2)) / unit] = 1;
        marks[(base + ivec2(2, 2)) / unit] = 1;
    }
    'touch: for u in marks.indices() {
        if marks[u] != 0 {
            activate(grid_m, u * unit);
            marks[u] = 0;
        }
    }
}

/// APIC particle-to-grid transfer of mass and momentum.
#[kernel]
pub fn p2g(
    x: &Field<Vec2>,
    v: &Field<Vec2>,
    c: &Field<Mat2>,
    grid_v: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    inv_dx: f32,
    p_mass: f32,
) {
    for p in x.indices() {
        let (base, fx, w) = stencil(x[p] * inv_dx, 3);
        let wx = w[0];
        let wy = w[1];
        let momentum = p_mass * v[p];
        let affine = p_mass * c[p];
        for i in 0..3 {
            for j in 0..3 {
                let offset = IVec2::new(i, j);
                let dpos = (offset.as_vec2() - fx) / inv_dx;
                let weight = wx[i] * wy[j];
                grid_v[base + offset] += weight * (momentum + affine * dpos);
                grid_m[base + offset] += weight * p_mass;
            }
        }
    }
}

/// Momentum to velocity, gravity, and sticky walls three cells thick.
#[kernel]
pub fn grid_update(
    grid_v: &mut Field<Vec2, 2>,
    grid_m: &Field<f32, 2>,
    n_grid: i32,
    dt: f32,
    gravity: f32,
) {
    for cell in grid_m.active() {
        let m = grid_m[cell];
        if m > 0.0 {
            let mut gv = grid_v[cell] / m;
            gv.y -= dt * gravity;
            if cell.x < 3 || cell.x > n_grid - 3 || cell.y < 3 || cell.y > n_grid - 3 {
                gv = Vec2::ZERO;
            }
            grid_v[cell] = gv;
        }
    }
}

/// APIC grid-to-particle transfer and advection.
#[kernel]
pub fn g2p(
    x: &mut Field<Vec2>,
    v: &mut Field<Vec2>,
    c: &mut Field<Mat2>,
    grid_v: &Field<Vec2, 2>,
    inv_dx: f32,
    dt: f32,
) {
    for p in x.indices() {
        let (base, fx, w) = stencil(x[p] * inv_dx, 3);
        let wx = w[0];
        let wy = w[1];
        let mut new_v = Vec2::ZERO;
        let mut new_c = Mat2::ZERO;
        for i in 0..3 {
            for j in 0..3 {
                let offset = IVec2::new(i, j);
                let g_v = grid_v[base + offset];
                let weight = wx[i] * wy[j];
                new_v += weight * g_v;
                new_c += (4.0 * inv_dx * weight) * outer(g_v, offset.as_vec2() - fx);
            }
        }
        v[p] = new_v;
        c[p] = new_c;
        x[p] = x[p] + dt * new_v;
    }
}

/// The blob scene.
pub struct Blob {
    pub n_grid: u32,
    pub x: Field<Vec2>,
    pub v: Field<Vec2>,
    pub c: Field<Mat2>,
    pub grid_v: Field<Vec2, 2>,
    pub grid_m: Field<f32, 2>,
    pub tree: Option<Arc<Tree<2>>>,
    /// On a sparse grid on a GPU, a mark per activity unit (see `touch`) and the unit's width.
    pub marks: Option<(Field<u32, 2>, i32)>,
    pub dt: f32,
}

impl Blob {
    /// A square blob covering `fill` of an `n_grid`^2 grid, four particles per cell.
    pub fn new(backend: &BackendRef, n_grid: u32, fill: f32, kind: GridKind) -> Result<Self> {
        let side = (fill.clamp(1e-4, 0.8).sqrt() * n_grid as f32).max(1.0) as u32;
        let start = (n_grid - side) / 2;
        let mut x = Vec::with_capacity((side * side * 4) as usize);
        for k in 0..side * side * 4 {
            let (cx, cy) = ((k / 4) % side, (k / 4) / side);
            let (jx, jy) = (rand_f32(1, 2 * k), rand_f32(1, 2 * k + 1));
            x.push(Vec2::new((start + cx) as f32 + jx, (start + cy) as f32 + jy) / n_grid as f32);
        }
        let n = x.len() as u32;
        // Twice the 8x8 blocks the blob's stencils touch: pools grow once more than half full.
        let span = (start + side + 1) / 8 - start.saturating_sub(1) / 8 + 1;
        let blocks = 2 * span * span;
        let tree = match kind {
            GridKind::Dense => None,
            GridKind::PointerDense => Some(Tree::new(
                backend,
                Layout::root()
                    .pointer([n_grid / 8, n_grid / 8])
                    .dense([8, 8])
                    .reserve(blocks),
            )?),
            GridKind::PointerBitmaskedDense => Some(Tree::new(
                backend,
                Layout::root()
                    .pointer([n_grid / 8, n_grid / 8])
                    .bitmasked([2, 2])
                    .dense([4, 4])
                    .reserve(blocks),
            )?),
        };
        // The activity unit: a leaf block, or a bitmasked cell's dense block.
        let unit = match kind {
            GridKind::Dense => None,
            _ if backend.kind() == BackendKind::Cpu => None,
            GridKind::PointerDense => Some(8),
            GridKind::PointerBitmaskedDense => Some(4),
        };
        let marks = match unit {
            Some(u) => Some((Field::new(backend, [n_grid / u, n_grid / u])?, u as i32)),
            None => None,
        };
        let (grid_v, grid_m) = match &tree {
            Some(t) => (Field::place(t)?, Field::place(t)?),
            None => (
                Field::new(backend, [n_grid, n_grid])?,
                Field::new(backend, [n_grid, n_grid])?,
            ),
        };
        Ok(Blob {
            n_grid,
            x: Field::from_slice(backend, [n], &x)?,
            v: Field::new(backend, [n])?,
            c: Field::new(backend, [n])?,
            grid_v,
            grid_m,
            tree,
            marks,
            dt: 1e-4,
        })
    }

    fn inv_dx(&self) -> f32 {
        self.n_grid as f32
    }

    /// Empties the grid: deactivates a sparse one, zeroes a dense one.
    pub fn clear(&mut self) -> Result<()> {
        match &self.tree {
            Some(t) => t.deactivate_all(),
            None => clear_grid(&mut self.grid_v, &mut self.grid_m),
        }
    }

    /// P2G; on a sparse grid on a GPU, a pass that activates the touched units first, then
    /// the P2G on the frozen tree. (The CPU's accesses find their blocks in a per-worker
    /// cache, which skips the activation path already: the pass would only add its time.)
    pub fn p2g(&mut self) -> Result<()> {
        let (p_mass, inv_dx) = (0.25 / (self.n_grid * self.n_grid) as f32, self.inv_dx());
        if let Some((marks, unit)) = &mut self.marks {
            touch(&self.x, marks, &mut self.grid_m, inv_dx, *unit)?;
        }
        let mut p2g = || {
            p2g(
                &self.x,
                &self.v,
                &self.c,
                &mut self.grid_v,
                &mut self.grid_m,
                inv_dx,
                p_mass,
            )
        };
        match self.tree.as_ref().filter(|_| self.marks.is_some()) {
            Some(tree) => tree.while_frozen(p2g),
            None => p2g(),
        }
    }

    pub fn grid_update(&mut self) -> Result<()> {
        grid_update(
            &mut self.grid_v,
            &self.grid_m,
            self.n_grid as i32,
            self.dt,
            9.8,
        )
    }

    pub fn g2p(&mut self) -> Result<()> {
        let (inv_dx, dt) = (self.inv_dx(), self.dt);
        g2p(
            &mut self.x,
            &mut self.v,
            &mut self.c,
            &self.grid_v,
            inv_dx,
            dt,
        )
    }

    /// Clear, P2G, grid update, G2P.
    pub fn substep(&mut self) -> Result<()> {
        self.clear()?;
        self.p2g()?;
        self.grid_update()?;
        self.g2p()
    }

    /// Grid memory (both grid fields and the tree's structure).
    pub fn grid_memory(&self) -> Result<Memory> {
        match &self.tree {
            Some(t) => t.memory(),
            None => {
                let (a, b) = (self.grid_v.memory()?, self.grid_m.memory()?);
                Ok(Memory {
                    reserved: a.reserved + b.reserved,
                    in_use: a.in_use + b.in_use,
                })
            }
        }
    }
}
