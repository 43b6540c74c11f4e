//! Taichi's `mpm88.py` (2D) and `mpm3d.py` (3D): a weakly compressible fluid whose only
//! state is the volume ratio J, MLS-MPM with quadratic B-splines (Hu et al. 2018).
//!
//! mpm88: 8192 particles in [0.2, 0.6]^2 falling at 1 m/s, 128^2 grid, dt = 2e-4, E = 400.
//! mpm3d: n^3 / 4 particles in [0.15, 0.55]^3, n^3 grid (dt = 2e-4 at n = 64, 8e-5 at 128),
//! E = 400. Both: density 1, particle volume (dx / 2)^2, gravity 9.8, walls 3 cells thick.

use mpm_core::glam::{Mat2, Mat3, Vec2, Vec3};
use mpm_core::rng::rand_f32;
use mpm_core::{BackendRef, Field, Result};

/// The substep and its walls, written once for both dimensions with the solver's stencil
/// (`solver::kernels::dimN::{stencil, offset, to_vec}`), and compiled as [`dim2`] (mpm88) and
/// [`dim3`] (mpm3d). The third stencil loop runs once in 2D.
macro_rules! fluid_substep {
    () => {
        /// One substep: clear, P2G with the J-based pressure, grid update, G2P.
        #[kernel]
        pub fn substep(
            x: &mut Field<Vec>,
            v: &mut Field<Vec>,
            c: &mut Field<Mat>,
            j: &mut Field<f32>,
            grid_v: &mut Field<Vec, D>,
            grid_m: &mut Field<f32, D>,
            n_grid: i32,
            dt: f32,
            dx: f32,
            p_vol: f32,
            p_mass: f32,
            e: f32,
            gravity: f32,
        ) {
            'clear: for cell in grid_m.active() {
                grid_v[cell] = Vec::ZERO;
                grid_m[cell] = 0.0;
            }
            'p2g: for p in x.indices() {
                let (base, fx, w) = stencil(x[p] / dx, 3);
                let wx = w[0];
                let wy = w[1];
                let wz = w[2];
                let stress = -dt * 4.0 * e * p_vol * (j[p] - 1.0) / (dx * dx);
                let affine = Mat::from_diagonal(Vec::splat(stress)) + p_mass * c[p];
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
            'grid_update: for cell in grid_m.active() {
                let m = grid_m[cell];
                if m > 0.0 {
                    let mut gv = grid_v[cell] / m;
                    gv.y -= dt * gravity;
                    grid_v[cell] = walls(cell, gv, n_grid);
                }
            }
            'g2p: for p in x.indices() {
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
                            new_c += (4.0 * weight / (dx * dx)) * outer(g_v, dpos);
                        }
                    }
                }
                v[p] = new_v;
                x[p] = x[p] + dt * new_v;
                j[p] = j[p] * (1.0 + dt * trace(new_c));
                c[p] = new_c;
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

    fluid_substep!();
}

/// mpm3d's kernels.
pub mod dim3 {
    use mpm_core::dim::d3::{IVec, Mat, Vec, D, DIM};
    use mpm_core::solver::kernels::dim3::{offset, stencil, to_vec, QUADRATIC_DEPTH};
    use mpm_core::{func, kernel, Field};

    fluid_substep!();
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
}

impl Mpm88 {
    pub fn new(backend: &BackendRef, seed: u32) -> Result<Self> {
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
        })
    }

    pub fn substep(&mut self) -> Result<()> {
        let p = self.params;
        dim2::substep(
            &mut self.x,
            &mut self.v,
            &mut self.c,
            &mut self.j,
            &mut self.grid_v,
            &mut self.grid_m,
            p.n_grid as i32,
            p.dt,
            p.dx,
            p.p_vol,
            p.p_mass,
            p.e,
            p.gravity,
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
}

impl Mpm3d {
    /// `n_grid` 64 (65,536 particles, dt 2e-4) or 128 (524,288 particles, dt 8e-5).
    pub fn new(backend: &BackendRef, n_grid: u32, seed: u32) -> Result<Self> {
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
        })
    }

    pub fn substep(&mut self) -> Result<()> {
        let p = self.params;
        dim3::substep(
            &mut self.x,
            &mut self.v,
            &mut self.c,
            &mut self.j,
            &mut self.grid_v,
            &mut self.grid_m,
            p.n_grid as i32,
            p.dt,
            p.dx,
            p.p_vol,
            p.p_mass,
            p.e,
            p.gravity,
        )
    }
}
