//! Taichi's `mpm88.py` (2D) and `mpm3d.py` (3D): a weakly compressible fluid whose only
//! state is the volume ratio J, MLS-MPM with quadratic B-splines (Hu et al. 2018).
//!
//! mpm88: 8192 particles in [0.2, 0.6]^2 falling at 1 m/s, 128^2 grid, dt = 2e-4, E = 400.
//! mpm3d: n^3 / 4 particles in [0.15, 0.55]^3, n^3 grid (dt = 2e-4 at n = 64, 8e-5 at 128),
//! E = 400. Both: density 1, particle volume (dx / 2)^2, gravity 9.8, walls 3 cells thick.

use mpm_core::backend::BackendKind;
use mpm_core::binning::{Bins, Position};
use mpm_core::glam::{Mat2, Mat3, Vec2, Vec3};
use mpm_core::rng::rand_f32;
use mpm_core::{BackendRef, Elem, Field, Result};

/// The substep and its walls, written once for both dimensions with the solver's stencil
/// (`solver::kernels::dimN::{stencil, offset, to_vec}`), and compiled as [`dim2`] (mpm88) and
/// [`dim3`] (mpm3d). The third stencil loop runs once in 2D.
macro_rules! fluid_substep {
    () => {
        /// One substep: clear, P2G with the J-based pressure, grid update, G2P. The P2G runs
        /// either over the particles (`plain_count` of them; 0 to skip it) or through shared
        /// tiles per block of binned particles (`bins` blocks; 0 to skip it): each block adds
        /// its particles into tiles, which are added into the grid once per node, and a
        /// particle whose stencil left its block's tile (it moved since it was binned) adds
        /// into the grid directly. The unused one is an empty loop.
        #[kernel]
        pub fn substep(
            x: &mut Field<Vec>,
            v: &mut Field<Vec>,
            c: &mut Field<Mat>,
            j: &mut Field<f32>,
            grid_v: &mut Field<Vec, D>,
            grid_m: &mut Field<f32, D>,
            order: &Field<u32>,
            starts: &Field<u32>,
            n_grid: i32,
            dt: f32,
            dx: f32,
            p_vol: f32,
            p_mass: f32,
            e: f32,
            gravity: f32,
            plain_count: u32,
            blocks_per_axis: i32,
            bins: u32,
        ) {
            'clear: for cell in grid_m.active() {
                grid_v[cell] = Vec::ZERO;
                grid_m[cell] = 0.0;
            }
            'p2g: for p in 0..plain_count {
                let (base, fx, w) = stencil(x[p] / dx, 3);
                let wx = w[0];
                let wy = w[1];
                let wz = w[2];
                let affine = affine_momentum(j[p], c[p], dt, dx, p_vol, p_mass, e);
                let momentum = p_mass * v[p];
                for i in 0..3 {
                    for k in 0..3 {
                        for l in 0..QUADRATIC_DEPTH {
                            let o = offset(i, k, l);
                            let dpos = (to_vec(o) - fx) * dx;
                            let weight = wx[i] * wy[k] * wz[l];
                            grid_v[base + o] += weight * (momentum + affine * dpos);
                            grid_m[base + o] += weight * p_mass;
                        }
                    }
                }
            }
            'p2g_tiled: for b in blocks(0..bins) {
                let (first, end) = (starts[b], starts[b + 1]);
                if first == end {
                    continue;
                }
                let origin = block_origin(b, blocks_per_axis);
                let tile_v = shared([Vec::ZERO; TILE_NODES]);
                let tile_m = shared([0.0f32; TILE_NODES]);
                for k in lanes(first..end) {
                    let p = order[k];
                    let (base, fx, w) = stencil(x[p] / dx, 3);
                    let wx = w[0];
                    let wy = w[1];
                    let wz = w[2];
                    let affine = affine_momentum(j[p], c[p], dt, dx, p_vol, p_mass, e);
                    let momentum = p_mass * v[p];
                    let inside = in_tile(base - origin);
                    for i in 0..3 {
                        for k in 0..3 {
                            for l in 0..QUADRATIC_DEPTH {
                                let o = offset(i, k, l);
                                let dpos = (to_vec(o) - fx) * dx;
                                let weight = wx[i] * wy[k] * wz[l];
                                let dv = weight * (momentum + affine * dpos);
                                if inside {
                                    let t = tile_slot(base + o - origin);
                                    tile_v[t] += dv;
                                    tile_m[t] += weight * p_mass;
                                } else {
                                    grid_v[base + o] += dv;
                                    grid_m[base + o] += weight * p_mass;
                                }
                            }
                        }
                    }
                }
                for t in lanes(0..TILE_COUNT) {
                    let m = tile_m[t];
                    if m != 0.0 {
                        let node = origin + tile_node(t);
                        grid_v[node] += tile_v[t];
                        grid_m[node] += m;
                    }
                }
            }
            'grid_update: for cell in grid_m.active() {
                let m = grid_m[cell];
                if m > 0.0 {
                    let mut gv = grid_v[cell] / m;
                    gv.y -= dt * gravity;
                    grid_v[cell] = walls(cell, gv, n_grid);
                }
            }
            'g2p: for p in x.indices() {
                // APIC's `4 / dx^2` once per particle, not a division per node (`dx` is a
                // run-time scalar here, where Taichi folds its constant).
                let c_scale = 4.0 / (dx * dx);
                let (base, fx, w) = stencil(x[p] / dx, 3);
                let wx = w[0];
                let wy = w[1];
                let wz = w[2];
                let mut new_v = Vec::ZERO;
                let mut new_c = Mat::ZERO;
                for i in 0..3 {
                    for k in 0..3 {
                        for l in 0..QUADRATIC_DEPTH {
                            let o = offset(i, k, l);
                            let dpos = (to_vec(o) - fx) * dx;
                            let g_v = grid_v[base + o];
                            let weight = wx[i] * wy[k] * wz[l];
                            new_v += weight * g_v;
                            new_c += (c_scale * weight) * outer(g_v, dpos);
                        }
                    }
                }
                v[p] = new_v;
                x[p] = x[p] + dt * new_v;
                j[p] = j[p] * (1.0 + dt * trace(new_c));
                c[p] = new_c;
            }
        }

        /// The affine momentum a particle scatters: the J-based pressure's stress impulse
        /// and APIC's `m C`.
        #[func]
        pub fn affine_momentum(
            j: f32,
            c: Mat,
            dt: f32,
            dx: f32,
            p_vol: f32,
            p_mass: f32,
            e: f32,
        ) -> Mat {
            let stress = -dt * 4.0 * e * p_vol * (j - 1.0) / (dx * dx);
            Mat::from_diagonal(Vec::splat(stress)) + p_mass * c
        }

        /// Whether the stencil whose base node is at `local` (relative to a tile's origin)
        /// lies inside the tile.
        #[func]
        pub fn in_tile(local: IVec) -> bool {
            let mut inside = true;
            for a in 0..DIM {
                if local[a] < 0 || local[a] + 2 >= TILE_SIDE {
                    inside = false;
                }
            }
            inside
        }

        /// The particles rewritten in `order` (bin by bin, from `Bins`): the particles of a
        /// block then sit together in memory, and a P2G's adds and a G2P's reads stay in few
        /// cache lines.
        #[kernel]
        pub fn reorder(
            x: &Field<Vec>,
            v: &Field<Vec>,
            c: &Field<Mat>,
            j: &Field<f32>,
            order: &Field<u32>,
            x_to: &mut Field<Vec>,
            v_to: &mut Field<Vec>,
            c_to: &mut Field<Mat>,
            j_to: &mut Field<f32>,
            count: u32,
        ) {
            for k in 0..count {
                let p = order[k];
                x_to[k] = x[p];
                v_to[k] = v[p];
                c_to[k] = c[p];
                j_to[k] = j[p];
            }
        }

        /// Walls three cells thick: no velocity into a wall (particles may leave it).
        #[func]
        pub fn walls(cell: IVec, v: Vec, n_grid: i32) -> Vec {
            let mut out = v;
            for a in 0..DIM {
                if (cell[a] < 3 && v[a] < 0.0) || (cell[a] > n_grid - 3 && v[a] > 0.0) {
                    out[a] = 0.0;
                }
            }
            out
        }
    };
}

/// mpm88's kernels.
pub mod dim2 {
    use mpm_core::dim::d2::{IVec, Mat, Vec, D, DIM};
    use mpm_core::solver::kernels::dim2::{offset, stencil, to_vec, QUADRATIC_DEPTH};
    use mpm_core::{func, kernel, Field};

    /// Cells per side of a tiled P2G's block, and the side of its tile (the block's
    /// quadratic stencils reach one node before it and two after).
    pub const TILE_BLOCK: i32 = 8;
    const TILE_SIDE: i32 = TILE_BLOCK + 3;
    const TILE_COUNT: i32 = TILE_SIDE * TILE_SIDE;
    const TILE_NODES: usize = TILE_COUNT as usize;

    /// The node of tile slot `t`, relative to the tile's origin.
    #[func]
    fn tile_node(t: i32) -> IVec {
        ivec2(t / TILE_SIDE, t % TILE_SIDE)
    }

    /// The tile slot of a node relative to the tile's origin.
    #[func]
    fn tile_slot(local: IVec) -> i32 {
        local.x * TILE_SIDE + local.y
    }

    /// The first node of bin `b`'s tile (bins row-major, `per_axis` along each axis).
    #[func]
    fn block_origin(b: u32, per_axis: i32) -> IVec {
        let b = b as i32;
        ivec2(b / per_axis, b % per_axis) * TILE_BLOCK - IVec::ONE
    }

    fluid_substep!();
}

/// mpm3d's kernels.
pub mod dim3 {
    use mpm_core::dim::d3::{IVec, Mat, Vec, D, DIM};
    use mpm_core::solver::kernels::dim3::{offset, stencil, to_vec, QUADRATIC_DEPTH};
    use mpm_core::{func, kernel, Field};

    /// As in 2D; 4 cells per side keeps the two tiles (7^3 nodes) in 5.4 KiB of workgroup
    /// memory.
    pub const TILE_BLOCK: i32 = 4;
    const TILE_SIDE: i32 = TILE_BLOCK + 3;
    const TILE_COUNT: i32 = TILE_SIDE * TILE_SIDE * TILE_SIDE;
    const TILE_NODES: usize = TILE_COUNT as usize;

    #[func]
    fn tile_node(t: i32) -> IVec {
        ivec3(
            t / (TILE_SIDE * TILE_SIDE),
            (t / TILE_SIDE) % TILE_SIDE,
            t % TILE_SIDE,
        )
    }

    #[func]
    fn tile_slot(local: IVec) -> i32 {
        (local.x * TILE_SIDE + local.y) * TILE_SIDE + local.z
    }

    #[func]
    fn block_origin(b: u32, per_axis: i32) -> IVec {
        let b = b as i32;
        let plane = per_axis * per_axis;
        ivec3(b / plane, (b / per_axis) % per_axis, b % per_axis) * TILE_BLOCK - IVec::ONE
    }

    fluid_substep!();
}

/// How a scene's substep runs: the same physics, with the particles kept in block order
/// and / or the P2G through a block's shared tiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Rewrite the particles bin by bin every this many substeps (0: never).
    pub sort_every: u32,
    /// The tiled P2G (the `'p2g_tiled` loop of `substep`), the particles rebinned every
    /// substep.
    pub tiled: bool,
}

impl Schedule {
    /// The fastest measured schedule, the same on both backends so far: the particles
    /// rewritten in block order every 16 substeps, the P2G plain. mpm3d on lavapipe at
    /// 64^3: P2G 33 -> 26 ms sorted, 76 ms tiled; on the CPU at 64^3: substep 3% faster
    /// sorted, P2G 9.5 -> 12.4 ms tiled; on the CPU at 128^3, whose 32 MiB grid unsorted
    /// particles hit at random: substep 217 -> 143 ms sorted. (On the CPU the bins are
    /// stable, so that sorting keeps runs reproducible.)
    pub const FASTEST: Schedule = Schedule {
        sort_every: 16,
        tiled: false,
    };
}

/// A dimension's `reorder` kernel.
type Reorder<V, M> = fn(
    &Field<V>,
    &Field<V>,
    &Field<M>,
    &Field<f32>,
    &Field<u32>,
    &mut Field<V>,
    &mut Field<V>,
    &mut Field<M>,
    &mut Field<f32>,
    u32,
) -> Result<()>;

/// A dimension's `substep` kernel.
type Substep<V, M, const D: usize> = fn(
    &mut Field<V>,
    &mut Field<V>,
    &mut Field<M>,
    &mut Field<f32>,
    &mut Field<V, D>,
    &mut Field<f32, D>,
    &Field<u32>,
    &Field<u32>,
    i32,
    f32,
    f32,
    f32,
    f32,
    f32,
    f32,
    u32,
    i32,
    u32,
) -> Result<()>;

/// What the schedule keeps: the bins (one entry when unused), and spare particle arrays to
/// rewrite the particles into (empty when unused).
pub struct Blocks<V: Elem, M: Elem> {
    pub schedule: Schedule,
    pub bins: Bins,
    spare: (Field<V>, Field<V>, Field<M>, Field<f32>),
    since_sort: u32,
}

impl<V: Position, M: Elem> Blocks<V, M> {
    fn new(
        backend: &BackendRef,
        schedule: Schedule,
        shape: &[u32],
        block: i32,
        n: u32,
    ) -> Result<Self> {
        let spare = match schedule.sort_every {
            0 => [0; 4],
            _ => [n; 4],
        };
        let binned = if schedule == Schedule::default() {
            1
        } else {
            n
        };
        let bins = Bins::new(backend, shape, block, binned)?;
        // The CPU's runs are reproducible: a bin's particles in a fixed order.
        let bins = match backend.kind() {
            BackendKind::Cpu => bins.stable(),
            _ => bins,
        };
        Ok(Blocks {
            schedule,
            bins,
            spare: (
                Field::new(backend, [spare[0]])?,
                Field::new(backend, [spare[1]])?,
                Field::new(backend, [spare[2]])?,
                Field::new(backend, [spare[3]])?,
            ),
            since_sort: 0,
        })
    }

    /// Before a substep: rewrites the particles in block order when that is due, and
    /// rebins them for a tiled P2G.
    fn prepare(
        &mut self,
        (x, v, c, j): (&mut Field<V>, &mut Field<V>, &mut Field<M>, &mut Field<f32>),
        inv_dx: f32,
        reorder: Reorder<V, M>,
    ) -> Result<()> {
        let n = x.len() as u32;
        let every = self.schedule.sort_every;
        if every > 0 && self.since_sort.is_multiple_of(every) {
            self.bins.update(x, n, inv_dx)?;
            let (xs, vs, cs, js) = &mut self.spare;
            reorder(x, v, c, j, &self.bins.order, xs, vs, cs, js, n)?;
            std::mem::swap(x, xs);
            std::mem::swap(v, vs);
            std::mem::swap(c, cs);
            std::mem::swap(j, js);
        }
        self.since_sort += 1;
        if self.schedule.tiled {
            self.bins.update(x, n, inv_dx)?;
        }
        Ok(())
    }

    /// One substep with `kernel`, the particles `x, v, c, j` on `grid_v, grid_m` (`D`
    /// dimensions, blocks of `block` cells).
    #[allow(clippy::too_many_arguments)]
    fn substep<const D: usize>(
        &mut self,
        kernel: Substep<V, M, D>,
        reorder: Reorder<V, M>,
        block: i32,
        (x, v, c, j): (&mut Field<V>, &mut Field<V>, &mut Field<M>, &mut Field<f32>),
        (grid_v, grid_m): (&mut Field<V, D>, &mut Field<f32, D>),
        p: FluidParams,
    ) -> Result<()> {
        self.prepare((x, v, c, j), p.n_grid as f32, reorder)?;
        let n = x.len() as u32;
        let per_axis = p.n_grid.div_ceil(block as u32);
        let (plain_count, bins) = match self.schedule.tiled {
            true => (0, per_axis.pow(D as u32)),
            false => (n, 0),
        };
        kernel(
            x,
            v,
            c,
            j,
            grid_v,
            grid_m,
            &self.bins.order,
            &self.bins.starts,
            p.n_grid as i32,
            p.dt,
            p.dx,
            p.p_vol,
            p.p_mass,
            p.e,
            p.gravity,
            plain_count,
            per_axis as i32,
            bins,
        )
    }

    /// Bytes held beyond the plain schedule's.
    pub fn bytes(&self) -> usize {
        let (x, v, c, j) = &self.spare;
        self.bins.bytes() + x.bytes() + v.bytes() + c.bytes() + j.bytes()
    }
}

/// Constants shared by both scenes.
#[derive(Clone, Copy, Debug)]
pub struct FluidParams {
    pub n_grid: u32,
    pub dt: f32,
    pub dx: f32,
    pub p_vol: f32,
    pub p_mass: f32,
    pub e: f32,
    pub gravity: f32,
}

impl FluidParams {
    fn new(n_grid: u32, dt: f32) -> Self {
        let dx = 1.0 / n_grid as f32;
        let p_vol = (dx * 0.5) * (dx * 0.5);
        FluidParams {
            n_grid,
            dt,
            dx,
            p_vol,
            p_mass: p_vol,
            e: 400.0,
            gravity: 9.8,
        }
    }
}

/// Taichi's mpm88.
pub struct Mpm88 {
    pub params: FluidParams,
    pub x: Field<Vec2>,
    pub v: Field<Vec2>,
    pub c: Field<Mat2>,
    pub j: Field<f32>,
    pub grid_v: Field<Vec2, 2>,
    pub grid_m: Field<f32, 2>,
    pub blocks: Blocks<Vec2, Mat2>,
}

impl Mpm88 {
    pub fn new(backend: &BackendRef, seed: u32, schedule: Schedule) -> Result<Self> {
        let params = FluidParams::new(128, 2e-4);
        let n = 8192u32;
        let x: Vec<Vec2> = (0..n)
            .map(|i| {
                Vec2::new(rand_f32(seed, 2 * i), rand_f32(seed, 2 * i + 1)) * 0.4 + Vec2::splat(0.2)
            })
            .collect();
        let g = params.n_grid;
        Ok(Mpm88 {
            params,
            x: Field::from_slice(backend, [n], &x)?,
            v: Field::from_slice(backend, [n], &vec![Vec2::new(0.0, -1.0); n as usize])?,
            c: Field::new(backend, [n])?,
            j: Field::from_slice(backend, [n], &vec![1.0; n as usize])?,
            grid_v: Field::new(backend, [g, g])?,
            grid_m: Field::new(backend, [g, g])?,
            blocks: Blocks::new(backend, schedule, &[g, g], dim2::TILE_BLOCK, n)?,
        })
    }

    pub fn substep(&mut self) -> Result<()> {
        let p = self.params;
        self.blocks.substep(
            dim2::substep,
            dim2::reorder,
            dim2::TILE_BLOCK,
            (&mut self.x, &mut self.v, &mut self.c, &mut self.j),
            (&mut self.grid_v, &mut self.grid_m),
            p,
        )
    }
}

/// Taichi's mpm3d.
pub struct Mpm3d {
    pub params: FluidParams,
    pub x: Field<Vec3>,
    pub v: Field<Vec3>,
    pub c: Field<Mat3>,
    pub j: Field<f32>,
    pub grid_v: Field<Vec3, 3>,
    pub grid_m: Field<f32, 3>,
    pub blocks: Blocks<Vec3, Mat3>,
}

impl Mpm3d {
    /// `n_grid` 64 (65,536 particles, dt 2e-4) or 128 (524,288 particles, dt 8e-5).
    pub fn new(backend: &BackendRef, n_grid: u32, seed: u32, schedule: Schedule) -> Result<Self> {
        let dt = if n_grid >= 128 { 8e-5 } else { 2e-4 };
        let params = FluidParams::new(n_grid, dt);
        let n = n_grid.pow(3) / 4;
        let x: Vec<Vec3> = (0..n)
            .map(|i| {
                let r = |k: u32| rand_f32(seed, 3 * i + k);
                Vec3::new(r(0), r(1), r(2)) * 0.4 + Vec3::splat(0.15)
            })
            .collect();
        Ok(Mpm3d {
            params,
            x: Field::from_slice(backend, [n], &x)?,
            v: Field::new(backend, [n])?,
            c: Field::new(backend, [n])?,
            j: Field::from_slice(backend, [n], &vec![1.0; n as usize])?,
            grid_v: Field::new(backend, [n_grid; 3])?,
            grid_m: Field::new(backend, [n_grid; 3])?,
            blocks: Blocks::new(backend, schedule, &[n_grid; 3], dim3::TILE_BLOCK, n)?,
        })
    }

    pub fn substep(&mut self) -> Result<()> {
        let p = self.params;
        self.blocks.substep(
            dim3::substep,
            dim3::reorder,
            dim3::TILE_BLOCK,
            (&mut self.x, &mut self.v, &mut self.c, &mut self.j),
            (&mut self.grid_v, &mut self.grid_m),
            p,
        )
    }
}
