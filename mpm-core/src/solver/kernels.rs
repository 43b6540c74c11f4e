//! The solver's kernels: one MLS-MPM substep (Hu et al. 2018, "A Moving Least Squares
//! Material Point Method with Displacement Discontinuity and Two-Way Rigid Body Coupling")
//! and the stress evaluation of freshly added particles.
//!
//! The kernels are written once, in `kernels/mls_mpm.rs`, and compiled for each dimension as
//! [`dim2`] and [`dim3`] (see [`crate::dim`]); those modules hold the little that differs
//! (stencil weights per axis, offsets, vector construction). The stencil loops always nest
//! three deep; in 2D the third loop runs once. Each spline gets its own substep kernel so
//! that the stencil loops have constant bounds (unrolled on both backends). This module holds
//! what both dimensions share: the kernels' constants and scalar funcs.

use glam::Vec4;

use crate::func;

pub mod dim2;
pub mod dim3;

/// Boundary conditions as the kernels see them.
pub const STICKY: i32 = 0;
pub const SLIP: i32 = 1;
pub const SEPARATE: i32 = 2;

/// Collider shapes as the kernels see them.
pub const PLANE: i32 = 0;
pub const BOX: i32 = 1;
pub const SPHERE: i32 = 2;
pub const SDF: i32 = 3;

/// Rows per collider in the collider table (see `Collider::rows`): (shape, condition,
/// friction, first distance sample), position (and radius), normal or half extents or the
/// distance lattice's origin and spacing, velocity, angular velocity, the three columns of
/// the rotation, the distance lattice's sample counts. The velocity row's `w` holds a fixed
/// temperature, the angular velocity row's `w` whether it is held (see `HeatBoundary`).
pub const COLLIDER_ROWS: i32 = 9;

/// Rows per material in the material table (see `MaterialTable`): `(mu, lambda, density,
/// wave speed)`, the model's own row, `(kind, conductivity, specific heat, surface channel)`,
/// the softening curve's temperatures and its scales.
pub const MATERIAL_ROWS: i32 = 5;
/// Materials one solver holds at most.
pub const MAX_MATERIALS: i32 = 64;

/// The table's row after every material's: the surface tension coefficient of each colour
/// channel (see `SURFACE_CHANNELS`).
pub const TENSION_ROW: i32 = MAX_MATERIALS * MATERIAL_ROWS;

/// Offsets of those rows.
pub const ELASTIC_ROW: i32 = 0;
pub const MODEL_ROW: i32 = 1;
pub const KIND_ROW: i32 = 2;
pub const CURVE_ROWS: i32 = 3;

/// The rate, in units of `alpha / dx^2`, at which a particle's temperature relaxes towards
/// its nodes' (see `Heat` for the choice).
pub const SUBGRID_CONDUCTION: f32 = 0.2;

/// How far outside a held collider's surface its nodes take its temperature, in cells: to
/// the nearest node, as the walls' nodes lie half a cell outside their surfaces.
pub const HEAT_REACH: f32 = 0.5;

/// Liquids with a surface tension of their own at most (see `Settings::surface_tension`): each has a
/// channel of the nodes' colour, a `Vec4`.
pub const SURFACE_CHANNELS: i32 = 4;

/// Words of the status field: count of bad particles, one bad particle, the step it went bad
/// on, why (`NON_FINITE` or `TOO_FAST`), and particles that left the domain.
pub const STATUS_WORDS: u32 = 5;
pub const NON_FINITE: i32 = 1;
pub const TOO_FAST: i32 = 2;

/// Buckets of the speed histogram: bucket `b` holds speeds in
/// `[2^((b - SPEED_BIAS) / 4), 2^((b - SPEED_BIAS + 1) / 4))`.
pub const SPEED_BUCKETS: u32 = 128;
pub const SPEED_BIAS: i32 = 80;

/// The histogram bucket of a speed (at least 0, at most `SPEED_BUCKETS - 1`).
#[func]
pub fn speed_bucket(speed: f32) -> i32 {
    let b = floor(4.0 * ln(max(speed, 1e-9)) / 0.6931472) + SPEED_BIAS as f32;
    clamp(b, 0.0, (SPEED_BUCKETS - 1) as f32) as i32
}

/// Whether a float is infinite or NaN (its exponent bits are all ones); fast-math shader
/// compilers may fold `x != x`, they cannot fold this.
#[func]
pub fn non_finite(value: f32) -> bool {
    (to_bits(value) & 0x7f80_0000u32) == 0x7f80_0000u32
}

/// B-spline weights along one axis for a particle `fx` cells from its base node: quadratic
/// (support 3, `fx` in [0.5, 1.5)) or cubic (support 4, `fx` in [1, 2)); unused entries are
/// zero. Formulas: Steffen, Kirby and Berzins 2008, "Analysis and reduction of quadrature
/// errors in the material point method", eqs. 16 and 17.
#[func]
pub fn bspline_weights(fx: f32, support: i32) -> Vec4 {
    let a = 1.5 - fx;
    let b = fx - 1.0;
    let c = fx - 0.5;
    let mut w = vec4(0.5 * a * a, 0.75 - b * b, 0.5 * c * c, 0.0);
    if support == 4 {
        // Distances to the nodes: fx, fx - 1, 2 - fx, 3 - fx.
        let far0 = 2.0 - fx;
        let near1 = fx - 1.0;
        let near2 = 2.0 - fx;
        let far3 = fx - 1.0;
        w = vec4(
            far0 * far0 * far0 / 6.0,
            0.5 * near1 * near1 * near1 - near1 * near1 + 2.0 / 3.0,
            0.5 * near2 * near2 * near2 - near2 * near2 + 2.0 / 3.0,
            far3 * far3 * far3 / 6.0,
        );
    }
    w
}
