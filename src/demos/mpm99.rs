//! Taichi's `mpm99.py`: water, jelly and snow in one 2D MLS-MPM grid (Hu et al. 2018,
//! "A Moving Least Squares Material Point Method"; snow after Stomakhin et al. 2013).
//!
//! 9000 particles in three groups, 128^2 grid, dt = 1e-4, E = 1e3, nu = 0.2, gravity 50,
//! hardening h = exp(10 (1 - Jp)) (jelly h = 0.3, water mu = 0), snow's singular values
//! clamped to [1 - 2.5e-2, 1 + 4.5e-3], quadratic B-splines, walls 3 cells thick.

use std::sync::Arc;

use mpm_core::glam::{IVec2, Mat2, Vec2};
use mpm_core::linalg::clamp_singular_values2;
use mpm_core::rng::rand_f32;
use mpm_core::solver::kernels::dim2::stencil;
use mpm_core::{func, kernel, BackendRef, Field, Layout, Result, Tree};

/// Material ids of the scene.
pub const WATER: i32 = 0;
pub const JELLY: i32 = 1;
pub const SNOW: i32 = 2;

/// Physical constants of a run, as kernel scalars.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub n_grid: i32,
    pub dt: f32,
    pub dx: f32,
    pub inv_dx: f32,
    pub p_vol: f32,
    pub p_mass: f32,
    pub mu_0: f32,
    pub lambda_0: f32,
    pub gravity: f32,
}

impl Params {
    pub fn mpm99() -> Self {
        let n_grid = 128;
        let dx = 1.0 / n_grid as f32;
        let p_vol = (dx * 0.5) * (dx * 0.5);
        let (e, nu) = (1e3f32, 0.2f32);
        Params {
            n_grid,
            dt: 1e-4,
            dx,
            inv_dx: n_grid as f32,
            p_vol,
            p_mass: p_vol, // density 1
            mu_0: e / (2.0 * (1.0 + nu)),
            lambda_0: e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)),
            gravity: 50.0,
        }
    }
}

/// A particle's state update at the head of its scatter (Taichi's mpm99 P2G): the new
/// deformation gradient `(I + dt C) F` after the material's return mapping (water keeps
/// only its volume, snow's singular values are clamped and the rest goes into `Jp`), the
/// new `Jp`, and the affine momentum it scatters, `-dt V0 (4 / dx^2) P F^T + m C` with the
/// fixed-corotated Kirchhoff stress `2 mu (F - R) F^T + lambda J (J - 1) I`, its Lamé
/// parameters hardened by `exp(10 (1 - Jp))` (jelly: 0.3; water: no shear).
///
/// Taichi's mpm99 takes the SVD of every particle; this takes none, with the same results
/// up to rounding (on the CPU the SVD was a fifth of mpm99's time). Water and jelly keep
/// `F`, so `J = det F`, and `R` is the rotation of `F`'s polar decomposition (`U V^T`),
/// which water, without shear, does not need; snow clamps its singular values by
/// scaling `F`'s rotation and reflection parts (`linalg::clamp_singular_values2`).
#[func]
#[allow(clippy::too_many_arguments)]
pub fn particle_update(
    f: Mat2,
    c: Mat2,
    jp: f32,
    mat: i32,
    dt: f32,
    inv_dx: f32,
    p_vol: f32,
    p_mass: f32,
    mu_0: f32,
    lambda_0: f32,
) -> (Mat2, f32, Mat2) {
    // By its increment, `F + dt C F`, where Taichi writes `(I + dt C) F`: in f32, `I + dt C`
    // keeps of a strain increment only the digits above 1.2e-7, the resolution at 1.
    let mut fp = f + dt * (c * f);
    let mut h = 0.3;
    if mat != JELLY {
        h = exp(10.0 * (1.0 - jp));
    }
    let mut mu = mu_0 * h;
    let la = lambda_0 * h;
    let mut j = determinant(fp);
    let mut jp_new = jp;
    let mut rot = Mat2::IDENTITY;
    if mat == SNOW {
        let (clamped, sig, r) = clamp_singular_values2(fp, 1.0 - 2.5e-2, 1.0 + 4.5e-3);
        jp_new *= (sig.x / sig.z) * (sig.y / sig.w);
        j = sig.z * sig.w;
        fp = clamped;
        rot = r;
    } else if mat == WATER {
        mu = 0.0;
        fp = Mat2::IDENTITY * sqrt(j);
    } else {
        let (r, _s) = polar(fp);
        rot = r;
    }
    let stress = 2.0 * mu * (fp - rot) * transpose(fp) + Mat2::IDENTITY * (la * j * (j - 1.0));
    let affine = (-dt * p_vol * 4.0 * inv_dx * inv_dx) * stress + p_mass * c;
    (fp, jp_new, affine)
}

/// Taichi's substep as two passes over the particles fused into one (G2P2G, Wang et al.
/// 2020, "A massively parallel and scalable multi-GPU material point method"): each particle
/// gathers its new velocity from `grid`, moves, and at once scatters into `next` for the
/// following substep, so that a substep reads the particles once and runs two loops instead
/// of four; the host then swaps `grid` and `next`. The first launch only scatters
/// (`gather` false: `grid` holds no scatter yet). The particle sequence is Taichi's; between
/// substeps `f` and `jp` are already those of the next one's scatter.
#[kernel]
pub fn substep(
    x: &mut Field<Vec2>,
    v: &mut Field<Vec2>,
    c: &mut Field<Mat2>,
    f: &mut Field<Mat2>,
    jp: &mut Field<f32>,
    material: &Field<i32>,
    grid_v: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    next_v: &mut Field<Vec2, 2>,
    next_m: &mut Field<f32, 2>,
    gather: bool,
    n_grid: i32,
    dt: f32,
    dx: f32,
    inv_dx: f32,
    p_vol: f32,
    p_mass: f32,
    mu_0: f32,
    lambda_0: f32,
    gravity: f32,
) {
    // Also clears `next` for the scatter that follows: every cell on a dense grid; on a
    // sparse one none, as the host emptied its tree (new blocks come zeroed), which spares
    // a loop of its own (lavapipe: 0.13 ms of mpm99's substep).
    'grid_update: for cell in grid_m.active() {
        if is_active(next_m, cell) {
            next_v[cell] = Vec2::ZERO;
            next_m[cell] = 0.0;
        }
        let m = grid_m[cell];
        if m > 0.0 {
            let mut gv = grid_v[cell] / m;
            gv.y -= dt * gravity;
            if cell.x < 3 && gv.x < 0.0 {
                gv.x = 0.0;
            }
            if cell.x > n_grid - 3 && gv.x > 0.0 {
                gv.x = 0.0;
            }
            if cell.y < 3 && gv.y < 0.0 {
                gv.y = 0.0;
            }
            if cell.y > n_grid - 3 && gv.y > 0.0 {
                gv.y = 0.0;
            }
            grid_v[cell] = gv;
        }
    }
    'g2p2g: for p in x.indices() {
        let mut xp = x[p];
        let mut vp = v[p];
        let mut cp = c[p];
        if gather {
            let (base, fx, w) = stencil(xp * inv_dx, 3);
            let wx = w[0];
            let wy = w[1];
            let mut new_v = Vec2::ZERO;
            let mut new_c = Mat2::ZERO;
            for i in 0..3 {
                for jj in 0..3 {
                    let offset = IVec2::new(i, jj);
                    let dpos = offset.as_vec2() - fx;
                    let g_v = grid_v[base + offset];
                    let weight = wx[i] * wy[jj];
                    new_v += weight * g_v;
                    new_c += (4.0 * inv_dx * weight) * outer(g_v, dpos);
                }
            }
            xp += dt * new_v;
            vp = new_v;
            cp = new_c;
            v[p] = vp;
            c[p] = cp;
            x[p] = xp;
        }
        // The next substep's scatter, from the state just gathered. The solver's quadratic
        // stencil: weights per axis in `wx`, `wy`.
        let (base, fx, w) = stencil(xp * inv_dx, 3);
        let wx = w[0];
        let wy = w[1];
        let (fp, jp_new, affine) = particle_update(
            f[p],
            cp,
            jp[p],
            material[p],
            dt,
            inv_dx,
            p_vol,
            p_mass,
            mu_0,
            lambda_0,
        );
        f[p] = fp;
        jp[p] = jp_new;
        let momentum = p_mass * vp;
        for i in 0..3 {
            for jj in 0..3 {
                let offset = IVec2::new(i, jj);
                let dpos = (offset.as_vec2() - fx) * dx;
                let weight = wx[i] * wy[jj];
                next_v[base + offset] += weight * (momentum + affine * dpos);
                next_m[base + offset] += weight * p_mass;
            }
        }
    }
}

/// The mpm99 scene on one backend. Its substeps run fused (see [`substep`]): `grid` holds
/// the particles' scatter between substeps, so particle fields written by hand between them
/// move the particles from the next scatter on, not in the next gather.
pub struct Mpm99 {
    pub params: Params,
    pub x: Field<Vec2>,
    pub v: Field<Vec2>,
    pub c: Field<Mat2>,
    /// The deformation gradient and plastic volume ratio: once the scene has run, those of
    /// the next substep's scatter (see [`substep`]).
    pub f: Field<Mat2>,
    pub jp: Field<f32>,
    pub material: Field<i32>,
    /// The grid the next substep updates and gathers from.
    pub grid: Grid,
    /// The grid it scatters into for the substep after.
    pub next: Grid,
    /// Whether `grid` holds the particles' scatter (the first substep makes it first).
    primed: bool,
}

/// One background grid: nodal momentum (then velocity) and mass.
pub struct Grid {
    pub v: Field<Vec2, 2>,
    pub m: Field<f32, 2>,
    /// The layout tree when the grid is sparse.
    pub tree: Option<Arc<Tree<2>>>,
}

impl Grid {
    fn new(backend: &BackendRef, layout: GridLayout, g: u32) -> Result<Self> {
        let blocks = Layout::root().pointer([g / 4, g / 4]);
        let leaves = match layout {
            GridLayout::Dense => None,
            GridLayout::PointerDense => Some(blocks.dense([4, 4])),
            GridLayout::PointerBitmasked => Some(blocks.bitmasked([4, 4])),
        };
        let tree = match leaves {
            Some(l) => Some(Tree::new(backend, l.reserve(512))?),
            None => None,
        };
        let (v, m) = match &tree {
            Some(t) => (Field::place(t)?, Field::place(t)?),
            None => (Field::new(backend, [g, g])?, Field::new(backend, [g, g])?),
        };
        Ok(Grid { v, m, tree })
    }

    /// Empties a sparse grid before it is scattered into.
    fn deactivate(&self) -> Result<()> {
        match &self.tree {
            Some(tree) => tree.deactivate_all(),
            None => Ok(()),
        }
    }

    /// Bytes of its fields.
    pub fn bytes(&self) -> usize {
        self.v.bytes() + self.m.bytes()
    }
}

/// How the background grid is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridLayout {
    Dense,
    /// pointer [32 x 32] -> dense [4 x 4]
    PointerDense,
    /// pointer [32 x 32] -> bitmasked [4 x 4]
    PointerBitmasked,
}

/// Particle count of the scene.
pub const PARTICLES: usize = 9000;

impl Mpm99 {
    /// The initial state (Taichi's `reset()`), with positions from the counter-based RNG.
    pub fn new(backend: &BackendRef, seed: u32) -> Result<Self> {
        Self::with_grid(backend, seed, GridLayout::Dense)
    }

    /// The initial state with the grid stored as `layout`.
    pub fn with_grid(backend: &BackendRef, seed: u32, layout: GridLayout) -> Result<Self> {
        let params = Params::mpm99();
        let n = PARTICLES;
        let group = n / 3;
        let mut x = Vec::with_capacity(n);
        let mut material = Vec::with_capacity(n);
        for i in 0..n {
            let g = (i / group) as f32;
            let (rx, ry) = (
                rand_f32(seed, 2 * i as u32),
                rand_f32(seed, 2 * i as u32 + 1),
            );
            x.push(Vec2::new(
                rx * 0.2 + 0.3 + 0.10 * g,
                ry * 0.2 + 0.05 + 0.32 * g,
            ));
            material.push((i / group) as i32);
        }
        let g = params.n_grid as u32;
        let grid = Grid::new(backend, layout, g)?;
        let next = Grid::new(backend, layout, g)?;
        Ok(Mpm99 {
            params,
            x: Field::from_slice(backend, [n as u32], &x)?,
            v: Field::new(backend, [n as u32])?,
            c: Field::new(backend, [n as u32])?,
            f: Field::from_slice(backend, [n as u32], &vec![Mat2::IDENTITY; n])?,
            jp: Field::from_slice(backend, [n as u32], &vec![1.0; n])?,
            material: Field::from_slice(backend, [n as u32], &material)?,
            grid,
            next,
            primed: false,
        })
    }

    /// Advances one substep of `params.dt`: the first call scatters the particles into a
    /// grid first; every call updates that grid, gathers from it and scatters into the other,
    /// and the two swap.
    pub fn substep(&mut self) -> Result<()> {
        if !self.primed {
            self.launch(false)?;
            self.primed = true;
        }
        self.launch(true)
    }

    /// One launch of [`substep`] (the kernel) into an emptied `next`, which then becomes
    /// `grid`.
    fn launch(&mut self, gather: bool) -> Result<()> {
        let p = self.params;
        self.next.deactivate()?;
        substep(
            &mut self.x,
            &mut self.v,
            &mut self.c,
            &mut self.f,
            &mut self.jp,
            &self.material,
            &mut self.grid.v,
            &mut self.grid.m,
            &mut self.next.v,
            &mut self.next.m,
            gather,
            p.n_grid,
            p.dt,
            p.dx,
            p.inv_dx,
            p.p_vol,
            p.p_mass,
            p.mu_0,
            p.lambda_0,
            p.gravity,
        )?;
        std::mem::swap(&mut self.grid, &mut self.next);
        Ok(())
    }

    /// Substeps per rendered frame (Taichi: 2e-3 / dt).
    pub fn substeps_per_frame(&self) -> usize {
        (2e-3 / self.params.dt).round() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpm_core::linalg::svd2;

    /// Entry by entry within `tol` of the largest entry of `b` (or of 1).
    fn close(a: Mat2, b: Mat2, tol: f32) -> bool {
        let (a, b) = (a.to_cols_array(), b.to_cols_array());
        let size = b.iter().fold(1.0f32, |m, x| m.max(x.abs()));
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= tol * size)
    }

    /// Taichi's mpm99 update, SVD and all (`(I + dt C) F`, the singular values clamped for
    /// snow and multiplied for `J`, `R = U V^T`), as the reference for `particle_update`.
    fn taichi_update(f: Mat2, c: Mat2, jp: f32, mat: i32, p: &Params) -> (Mat2, f32, Mat2) {
        let mut fp = (Mat2::IDENTITY + p.dt * c) * f;
        let mut h = (10.0 * (1.0 - jp)).exp();
        if mat == JELLY {
            h = 0.3;
        }
        let (mut mu, la) = (p.mu_0 * h, p.lambda_0 * h);
        if mat == WATER {
            mu = 0.0;
        }
        let (u, mut sig, v) = svd2(fp);
        let (mut j, mut jp_new) = (1.0, jp);
        for d in 0..2 {
            let mut new_sig = sig[d];
            if mat == SNOW {
                new_sig = sig[d].clamp(1.0 - 2.5e-2, 1.0 + 4.5e-3);
            }
            jp_new *= sig[d] / new_sig;
            sig[d] = new_sig;
            j *= new_sig;
        }
        if mat == WATER {
            fp = Mat2::IDENTITY * j.sqrt();
        } else if mat == SNOW {
            fp = u * Mat2::from_diagonal(sig) * v.transpose();
        }
        let stress = 2.0 * mu * (fp - u * v.transpose()) * fp.transpose()
            + Mat2::IDENTITY * (la * j * (j - 1.0));
        let scale = -p.dt * p.p_vol * 4.0 * p.inv_dx * p.inv_dx;
        (fp, jp_new, scale * stress + p.p_mass * c)
    }

    #[test]
    fn particle_update_is_taichis_without_the_svd() {
        let p = Params::mpm99();
        for k in 0..600u32 {
            let r = |j: u32| rand_f32(k, j) * 2.0 - 1.0;
            // A rotation times a symmetric stretch within 0.3%, 3% or 30% of the identity:
            // inside snow's clamp and past it on either side, never inverted (water's J goes
            // under a square root).
            let strain = [0.003, 0.03, 0.3][k as usize % 3];
            let (a, b, d) = (strain * r(0), strain * r(1), strain * r(2));
            let stretch = Mat2::from_cols(Vec2::new(1.0 + a, b), Vec2::new(b, 1.0 + d));
            let f = Mat2::from_angle(3.0 * r(3)) * stretch;
            let c = 50.0 * Mat2::from_cols(Vec2::new(r(4), r(5)), Vec2::new(r(6), r(7)));
            let jp = 1.0 + 0.05 * r(8);
            for mat in [WATER, JELLY, SNOW] {
                let (fp, jp_new, affine) = particle_update(
                    f, c, jp, mat, p.dt, p.inv_dx, p.p_vol, p.p_mass, p.mu_0, p.lambda_0,
                );
                let (fp_ref, jp_ref, affine_ref) = taichi_update(f, c, jp, mat, &p);
                assert!(
                    close(fp, fp_ref, 2e-5),
                    "material {mat}, F {f:?}: {fp:?} against {fp_ref:?}"
                );
                assert!(
                    (jp_new - jp_ref).abs() <= 2e-5 * jp_ref.abs(),
                    "material {mat}, F {f:?}: Jp {jp_new} against {jp_ref}"
                );
                assert!(
                    close(affine, affine_ref, 1e-4),
                    "material {mat}, F {f:?}: {affine:?} against {affine_ref:?}"
                );
            }
        }
    }
}
