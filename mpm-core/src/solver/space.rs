//! What differs between 2D and 3D on the host: the vector types and which kernels run.

use glam::{DMat3, IVec2, IVec3, Mat2, Mat3, Vec2, Vec3, Vec4};

use super::error::Result;
use super::kernels::{dim2, dim3};
use super::{Grid, MaterialTable, Particles, StepScalars};
use crate::binning::Position;
use crate::{Elem, Field};

/// A dimension: its vector and matrix types and its kernels.
pub trait Space<const D: usize>: 'static {
    type V: Position;
    type M: Elem;
    const IDENTITY: Self::M;
    fn vector(a: [f32; D]) -> Self::V;
    fn components(v: Self::V) -> [f32; D];
    /// A matrix in f64, padded with zeros to 3x3.
    fn padded(m: Self::M) -> DMat3;

    #[allow(clippy::too_many_arguments)]
    fn substep(
        particles: &mut Particles<Self::V, Self::M>,
        grid: &mut Grid<Self::V, D>,
        materials: &MaterialTable,
        colliders: &Field<Vec4>,
        sdf: &Field<f32>,
        status: &mut Field<i32>,
        speeds: &mut Field<i32>,
        s: &StepScalars<D>,
    ) -> Result<()>;

    fn init_stress(
        particles: &mut Particles<Self::V, Self::M>,
        materials: &MaterialTable,
        start: u32,
        end: u32,
    ) -> Result<()>;

    /// One round of `gather_particles`: `to[k] = from[order[k]]` for the first `n[t]`
    /// particles of each type `t` (vector, matrix, f32, i32).
    #[allow(clippy::too_many_arguments)]
    fn gather(
        order: &Field<u32>,
        vec: (&Field<Self::V>, &mut Field<Self::V>),
        mat: (&Field<Self::M>, &mut Field<Self::M>),
        scalar: (&Field<f32>, &mut Field<f32>),
        int: (&Field<i32>, &mut Field<i32>),
        n: [u32; 4],
    ) -> Result<()>;

    /// Copies the grid's planes `first..` across x into `halo` (`halo_pack`); `n` is the
    /// nodes of each field's section (v, v0, m, heat, color, q, j), 0 to leave it out.
    fn halo_pack(
        grid: &Grid<Self::V, D>,
        halo: &mut Field<f32>,
        first: i32,
        res: [u32; D],
        n: [u32; 7],
    ) -> Result<()>;

    /// Adds a neighbour's `halo_pack` of the same planes into the grid (`halo_add`).
    fn halo_add(
        grid: &mut Grid<Self::V, D>,
        halo: &Field<f32>,
        first: i32,
        res: [u32; D],
        n: [u32; 7],
    ) -> Result<()>;

    /// Activates the sparse grid's blocks the next P2G adds into (see `touch_stencils`).
    fn touch_stencils(
        particles: &Particles<Self::V, Self::M>,
        grid: &mut Grid<Self::V, D>,
        s: &StepScalars<D>,
    ) -> Result<()>;
}

/// Two dimensions.
pub struct D2;
/// Three dimensions.
pub struct D3;

/// One call of a substep kernel with the solver's fields and scalars.
macro_rules! substep_call {
    ($kernel:path, $p:ident, $grid:ident, $t:ident, $colliders:ident, $sdf:ident, $status:ident, $speeds:ident, $s:ident, $V:ident, $IV:ident) => {{
        let count = $p.count();
        Ok($kernel(
            &mut $p.x,
            &mut $p.v,
            &mut $p.c,
            &mut $p.grad_u,
            &mut $p.tau,
            &mut $p.jp,
            &$p.mass,
            &$p.vol,
            &mut $p.material,
            &mut $p.temperature,
            &$t.rows,
            $colliders,
            $sdf,
            $status,
            $speeds,
            &mut $grid.v,
            &mut $grid.v0,
            &mut $grid.m,
            &mut $grid.j,
            &mut $grid.heat,
            &mut $grid.q,
            &mut $grid.color,
            count,
            $s.step,
            $IV::from_array($s.res.map(|r| r as i32)),
            $s.dt,
            $s.dx,
            $s.dinv,
            $V::from_array($s.gravity),
            $s.damping,
            $s.viscosity.0,
            $s.viscosity.1,
            $s.viscosity.0 + $s.viscosity.1 > 0.0,
            $s.flip,
            $s.flip > 0.0,
            $s.n_colliders,
            $s.wall_thickness,
            $s.walls.0,
            $s.walls.1,
            $s.margin,
            $s.max_speed,
            $s.track_speed,
            if $s.f_bar { count } else { 0 },
            if $s.heat { count } else { 0 },
            Vec2::new($s.wall_heat.0, $s.wall_heat.1),
            $s.soften,
            if $s.tension { count } else { 0 },
            $t.kinds(),
        )?)
    }};
}

macro_rules! space {
    ($space:ident, $d:literal, $V:ident, $M:ident, $IV:ident, $kernels:ident) => {
        impl Space<$d> for $space {
            type V = $V;
            type M = $M;
            const IDENTITY: $M = $M::IDENTITY;

            fn vector(a: [f32; $d]) -> $V {
                $V::from_array(a)
            }

            fn components(v: $V) -> [f32; $d] {
                v.to_array()
            }

            fn padded(m: $M) -> DMat3 {
                let a = m.to_cols_array();
                let mut out = [0.0f64; 9];
                for col in 0..$d {
                    for row in 0..$d {
                        out[3 * col + row] = a[$d * col + row] as f64;
                    }
                }
                DMat3::from_cols_array(&out)
            }

            fn substep(
                p: &mut Particles<$V, $M>,
                grid: &mut Grid<$V, $d>,
                t: &MaterialTable,
                colliders: &Field<Vec4>,
                sdf: &Field<f32>,
                status: &mut Field<i32>,
                speeds: &mut Field<i32>,
                s: &StepScalars<$d>,
            ) -> Result<()> {
                // One kernel per spline, so that the stencil loops have constant bounds.
                let kernel = if s.support == 3 {
                    $kernels::substep_quadratic
                } else {
                    $kernels::substep_cubic
                };
                substep_call!(kernel, p, grid, t, colliders, sdf, status, speeds, s, $V, $IV)
            }

            fn gather(
                order: &Field<u32>,
                vec: (&Field<$V>, &mut Field<$V>),
                mat: (&Field<$M>, &mut Field<$M>),
                scalar: (&Field<f32>, &mut Field<f32>),
                int: (&Field<i32>, &mut Field<i32>),
                n: [u32; 4],
            ) -> Result<()> {
                Ok($kernels::gather_particles(
                    order, vec.0, vec.1, mat.0, mat.1, scalar.0, scalar.1, int.0, int.1, n[0],
                    n[1], n[2], n[3],
                )?)
            }

            fn halo_pack(
                g: &Grid<$V, $d>,
                halo: &mut Field<f32>,
                first: i32,
                res: [u32; $d],
                n: [u32; 7],
            ) -> Result<()> {
                let res = $IV::from_array(res.map(|r| r as i32));
                Ok($kernels::halo_pack(
                    &g.v, &g.v0, &g.m, &g.heat, &g.color, &g.q, &g.j, halo, first, res, n[0], n[1],
                    n[2], n[3], n[4], n[5], n[6],
                )?)
            }

            fn halo_add(
                g: &mut Grid<$V, $d>,
                halo: &Field<f32>,
                first: i32,
                res: [u32; $d],
                n: [u32; 7],
            ) -> Result<()> {
                let res = $IV::from_array(res.map(|r| r as i32));
                Ok($kernels::halo_add(
                    &mut g.v,
                    &mut g.v0,
                    &mut g.m,
                    &mut g.heat,
                    &mut g.color,
                    &mut g.q,
                    &mut g.j,
                    halo,
                    first,
                    res,
                    n[0],
                    n[1],
                    n[2],
                    n[3],
                    n[4],
                    n[5],
                    n[6],
                )?)
            }

            fn touch_stencils(
                p: &Particles<$V, $M>,
                grid: &mut Grid<$V, $d>,
                s: &StepScalars<$d>,
            ) -> Result<()> {
                // A mark per block: the marks' shape is the grid's divided by the block.
                let block = grid.m.shape()[0] / grid.marks.shape()[0].max(1);
                Ok($kernels::touch_stencils(
                    &p.x,
                    &p.material,
                    &mut grid.marks,
                    &mut grid.m,
                    p.count(),
                    1.0 / s.dx,
                    s.support,
                    block as i32,
                )?)
            }

            fn init_stress(
                p: &mut Particles<$V, $M>,
                t: &MaterialTable,
                start: u32,
                end: u32,
            ) -> Result<()> {
                Ok($kernels::init_stress(
                    &mut p.grad_u,
                    &p.c,
                    &mut p.tau,
                    &mut p.jp,
                    &p.material,
                    &p.temperature,
                    &t.rows,
                    start,
                    end,
                    t.softens(),
                    t.kinds(),
                )?)
            }
        }
    };
}

space!(D2, 2, Vec2, Mat2, IVec2, dim2);
space!(D3, 3, Vec3, Mat3, IVec3, dim3);
