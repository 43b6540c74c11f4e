//! The MLS-MPM substep and stress kernels (Hu et al. 2018, "A Moving Least Squares Material
//! Point Method with Displacement Discontinuity and Two-Way Rigid Body Coupling"), written
//! once for both dimensions: compiled as `kernels::dim2` and `kernels::dim3`, whose modules
//! supply `Vec`, `Mat`, `IVec`, `DIM`, `D`, the stencil helpers and the materials.

use glam::{Vec2, Vec4};

use super::{
    frame, materials, offset, plane_cell, row, spin, stencil, to_vec, IVec, Mat, Vec, CORNERS,
    CUBIC_DEPTH, D, DIM, QUADRATIC_DEPTH,
};
use crate::materials::{f_bar_applies, USER_KIND};
use crate::solver::kernels::{
    non_finite, speed_bucket, BOX, COLLIDER_ROWS, CURVE_ROWS, ELASTIC_ROW, HEAT_REACH, KIND_ROW,
    MATERIAL_ROWS, MODEL_ROW, NON_FINITE, PLANE, SDF, SLIP, SPHERE, STICKY, SUBGRID_CONDUCTION,
    SURFACE_CHANNELS, TENSION_ROW, TOO_FAST,
};
use crate::{func, kernel, Field};

/// A boundary condition on a grid velocity `v` against a surface with outward normal
/// `n` moving at `vc`: sticky stops it, slip keeps only its tangential part, separate
/// does so only while it approaches; the tangential part then loses Coulomb friction
/// `friction * |v_n|`.
#[func]
pub fn boundary(v: Vec, n: Vec, vc: Vec, condition: i32, friction: f32) -> Vec {
    let rel = v - vc;
    let vn = dot(rel, n);
    let mut out = rel;
    if condition == STICKY {
        out = Vec::ZERO;
    } else if condition == SLIP || vn < 0.0 {
        let vt = rel - vn * n;
        let vt_len = length(vt);
        let mut keep = 0.0;
        if vt_len > 1e-12 {
            keep = max(1.0 - friction * abs(vn) / vt_len, 0.0);
        }
        out = keep * vt;
    }
    out + vc
}

/// The artificial bulk viscosity's Kirchhoff pressure (see `BulkViscosity`): in
/// compression (`rate = tr C < 0`), `J q` with `J rho = rho0` (the `elastic` row's density,
/// `.z`, and wave speed, `.w`); zero in expansion.
#[func]
pub fn viscous_pressure(rate: f32, elastic: Vec4, dx: f32, linear: f32, quadratic: f32) -> f32 {
    let mut q = 0.0;
    if rate < 0.0 {
        q = elastic.z * dx * (quadratic * dx * rate * rate - linear * elastic.w * rate);
    }
    q
}

/// `x` in a distance-field collider's lattice (in lattice cells; `extra` holds the lattice's
/// origin in the collider's frame and its spacing, `dims` its sample counts), and whether
/// its cell lies inside the lattice. Then the caller interpolates the cell's `CORNERS`
/// samples (`sdf_index`, `sdf_corner`) for `collider_distance`.
#[func]
pub fn sdf_local(x: Vec, at: Vec4, extra: Vec4, rotation: Mat, dims: Vec4) -> (Vec, bool) {
    let local = (transpose(rotation) * (x - row(at)) - row(extra)) / extra.w;
    let size = row(dims);
    let mut within = true;
    for a in 0..DIM {
        if local[a] < 0.0 || local[a] >= size[a] - 1.0 {
            within = false;
        }
    }
    (local, within)
}

/// A collider's signed distance at `x` (negative inside) and its outward normal there, from
/// its table rows (see `Collider::rows`): the analytic shapes', or a distance field's
/// `sampled` value and `gradient` (in the world frame) where `within` its lattice (outside
/// it is outside the body).
#[func]
pub fn collider_distance(
    x: Vec,
    head: Vec4,
    at: Vec4,
    extra: Vec4,
    within: bool,
    sampled: f32,
    gradient: Vec,
) -> (f32, Vec) {
    let shape = head.x as i32;
    let d = x - row(at);
    let mut phi = 1.0;
    let mut n = Vec::ZERO;
    if shape == PLANE {
        n = row(extra);
        phi = dot(d, n);
    } else if shape == SPHERE {
        let r = length(d);
        phi = r - at.w;
        if r > 1e-12 {
            n = d / r;
        }
    } else if shape == BOX {
        // Inside, the distance to the nearest face and its normal.
        let q = abs(d) - row(extra);
        phi = -1e30;
        for a in 0..DIM {
            if q[a] > phi {
                phi = q[a];
                n = Vec::ZERO;
                n[a] = select(d[a] < 0.0, -1.0, 1.0);
            }
        }
    } else if within {
        phi = sampled;
        let g = length(gradient);
        if g > 1e-12 {
            n = gradient / g;
        }
    }
    (phi, n)
}

/// The index in the distance-field storage of corner `corner` (bit `a` for +1 along axis
/// `a`) of the lattice cell holding `local`; `dims` counts the lattice's samples per axis,
/// `first` is the index of its first sample.
#[func]
pub fn sdf_index(local: Vec, corner: i32, dims: Vec4, first: f32) -> i32 {
    let size = row(dims);
    let mut index = first as i32;
    let mut stride = 1;
    for a in 0..DIM {
        index += (floor(local[a]) as i32 + ((corner >> a) & 1)) * stride;
        stride *= size[a] as i32;
    }
    index
}

/// One corner's share of the multilinear interpolation around `local` (in lattice cells of
/// size `spacing`; bit `a` of `corner` for +1 along axis `a`): its weight and the weight's
/// derivative along each axis. The caller sums `weight * sample` and `slope * sample` over
/// the `CORNERS` corners, so that no local array of samples lives in the loop.
#[func]
pub fn sdf_corner(local: Vec, corner: i32, spacing: f32) -> (f32, Vec) {
    let f = local - floor(local);
    let mut weight = 1.0;
    let mut slope = Vec::ONE;
    for a in 0..DIM {
        let high = ((corner >> a) & 1) == 1;
        let w = select(high, f[a], 1.0 - f[a]);
        for b in 0..DIM {
            if b == a {
                slope[b] *= select(high, 1.0, -1.0) / spacing;
            } else {
                slope[b] *= w;
            }
        }
        weight *= w;
    }
    (weight, slope)
}

/// The velocity of a collider's material point at `x`: its translation plus its spin about
/// its position.
#[func]
pub fn collider_velocity(x: Vec, at: Vec4, velocity: Vec4, omega: Vec4) -> Vec {
    row(velocity) + spin(omega, x - row(at))
}

/// The scale of a material's shear modulus at temperature `t` (see `Thermal::softening`):
/// its curve's four points (`temps`, `scales`; shorter curves repeat their last point),
/// linear between them, held beyond the ends.
#[func]
pub fn softening(t: f32, temps: Vec4, scales: Vec4) -> f32 {
    let mut s = scales.x;
    for i in 1..4 {
        if t > temps[i - 1] {
            let span = temps[i] - temps[i - 1];
            let mut f = 1.0;
            if span > 0.0 {
                f = min((t - temps[i - 1]) / span, 1.0);
            }
            s = scales[i - 1] + f * (scales[i] - scales[i - 1]);
        }
    }
    s
}

/// A material's elastic row with its shear modulus scaled by its softening curve (`temps`,
/// `scales`, see `softening`) at temperature `t`.
#[func]
pub fn softened(elastic: Vec4, t: f32, temps: Vec4, scales: Vec4) -> Vec4 {
    vec4(
        elastic.x * softening(t, temps, scales),
        elastic.y,
        elastic.z,
        elastic.w,
    )
}

/// The weights of the node at offset `o` (components -1, 0 or 1) in the central differences
/// of a nodal field's gradient and Hessian at a node, in units of `1 / dx` and `1 / dx^2`:
/// `(f(+a) - f(-a)) / 2`, `f(+a) - 2 f + f(-a)` and, across two axes,
/// `(f(+a+b) - f(+a-b) - f(-a+b) + f(-a-b)) / 4`.
#[func]
pub fn differences(o: IVec) -> (Vec, Mat) {
    let mut g = Vec::ZERO;
    let mut h = Mat::ZERO;
    for a in 0..DIM {
        // Smoothed by (1, 2, 1) / 4 across the other axes.
        let mut across = 1.0;
        for b in 0..DIM {
            if b != a {
                across *= select(o[b] == 0, 0.5, 0.25);
            }
        }
        g[a] = 0.5 * o[a] as f32 * across;
        h[a][a] = select(o[a] == 0, -2.0, 1.0) * across;
        for b in 0..DIM {
            if b != a {
                // The mixed difference, smoothed across the remaining axis in 3D.
                let mut rest = 1.0;
                for e in 0..DIM {
                    if e != a && e != b {
                        rest *= select(o[e] == 0, 0.5, 0.25);
                    }
                }
                h[a][b] = 0.25 * (o[a] * o[b]) as f32 * rest;
            }
        }
    }
    (g, h)
}

/// The capillary force per unit surface tension at a node, `kappa grad c` (Brackbill, Kothe
/// and Zemach 1992, "A continuum method for modeling surface tension", J. Comput. Phys. 100),
/// from the colour's gradient `g` and Hessian `h` there: the curvature of its level set is
/// `kappa = -div(g / |g|) = -(|g|^2 tr h - g.h g) / |g|^3`, zero for a plane whatever the
/// colour's profile across it. Curvatures beyond one over a cell, below the grid's
/// resolution (the colour's faint fringe), are clamped to it.
#[func]
pub fn capillary(g: Vec, h: Mat, dx: f32) -> Vec {
    let g2 = dot(g, g);
    let mut f = Vec::ZERO;
    if g2 * dx * dx > 1e-12 {
        let kappa = (dot(g, h * g) - g2 * trace(h)) / (g2 * sqrt(g2));
        f = clamp(kappa, -1.0 / dx, 1.0 / dx) * g;
    }
    f
}

/// `sum m_ij^2`, the trace of `m^T m` without the rest of the product: non-finite exactly
/// when an entry is (or the sum overflows).
#[func]
pub fn squared_norm(m: Mat) -> f32 {
    let mut sum = 0.0;
    for i in 0..DIM {
        sum += dot(m.col(i), m.col(i));
    }
    sum
}

/// Whether node `cell` has a neighbour on every side (a grid of `res` cells).
#[func]
pub fn has_neighbours(cell: IVec, res: IVec) -> bool {
    let mut inside = true;
    for a in 0..DIM {
        if cell[a] < 1 || cell[a] > res[a] - 2 {
            inside = false;
        }
    }
    inside
}

/// Whether node `cell` lies in the domain walls (see `walls`).
#[func]
pub fn in_walls(cell: IVec, res: IVec, thickness: i32) -> bool {
    let mut inside = false;
    if thickness > 0 {
        for a in 0..DIM {
            if cell[a] <= thickness || cell[a] >= res[a] - thickness {
                inside = true;
            }
        }
    }
    inside
}

/// Domain walls `thickness` cells thick on every side of a grid of `res` cells (none
/// for 0): the nodes `cell <= thickness` and `cell >= res - thickness` along any axis
/// take the walls' condition, mirror images about the domain's centre. See `Walls`
/// for where the surfaces lie.
#[func]
pub fn walls(cell: IVec, v: Vec, res: IVec, thickness: i32, condition: i32, friction: f32) -> Vec {
    let mut out = v;
    if thickness > 0 {
        for a in 0..DIM {
            let mut n = Vec::ZERO;
            if cell[a] <= thickness {
                n[a] = 1.0;
                out = boundary(out, n, Vec::ZERO, condition, friction);
            } else if cell[a] >= res[a] - thickness {
                n[a] = -1.0;
                out = boundary(out, n, Vec::ZERO, condition, friction);
            }
        }
    }
    out
}

/// Puts a particle that crossed a wall's surface, half a cell behind the last held
/// nodes (see `Walls`), back on it, and applies the walls' condition to its velocity
/// there (the grid's wall nodes alone let a fast particle sink into the wall).
/// Returns the new position and velocity.
///
/// Inlined always: as a call, its pair came back through memory in four 4-byte stores that
/// the G2P read back as two 8-byte loads, which cannot be forwarded from them and wait for
/// the stores to retire.
#[func]
#[inline(always)]
pub fn keep_out(
    x: Vec,
    v: Vec,
    res: IVec,
    dx: f32,
    thickness: i32,
    condition: i32,
    friction: f32,
) -> (Vec, Vec) {
    let mut xo = x;
    let mut vo = v;
    if thickness > 0 {
        // Cells from the border to the surface, as `Walls::surfaces` has it.
        let surface = thickness as f32 - 0.5;
        for a in 0..DIM {
            let low = surface * dx;
            let high = (res[a] as f32 - surface) * dx;
            let mut n = Vec::ZERO;
            if xo[a] < low {
                xo[a] = low;
                n[a] = 1.0;
                vo = boundary(vo, n, Vec::ZERO, condition, friction);
            } else if xo[a] > high {
                xo[a] = high;
                n[a] = -1.0;
                vo = boundary(vo, n, Vec::ZERO, condition, friction);
            }
        }
    }
    (xo, vo)
}

/// The substep kernel of one spline: `support` nodes per axis, stencil loops `depth` deep
/// (the third loop runs once in 2D). The loops' bounds are the literals themselves, so that
/// both backends unroll them: bound to a kernel-level `let`, they reached each CPU loop
/// closure as a captured value it loaded at run time, and mpm3d.toml's G2P ran its stencil
/// as a counted loop that picked each weight by compare and branch.
macro_rules! substep {
    ($substep:ident, $support:literal, $depth:ident) => {
        /// One substep: clear the grid, scatter particles (P2G), update grid velocities
        /// (gravity, damping, colliders, walls), gather back (G2P, APIC with a FLIP blend),
        /// keep particles out of the walls, update deformation and stress. Particles with a
        /// negative material id are dead.
        ///
        /// FLIP's increment is the grid velocity's change over the whole step, stress
        /// included, so `grid_v0` holds the particles' momentum over mass without the stress
        /// impulse (which MLS-MPM folds into P2G); it is scattered only `with_flip` (`flip > 0`).
        ///
        /// `dinv` is the inverse of APIC's inertia-like tensor, `4 / dx^2` for quadratic and
        /// `3 / dx^2` for cubic splines (Jiang et al. 2015, "The affine particle-in-cell
        /// method"). A particle that ends outside `margin` cells of the border is marked dead
        /// and counted in `status[4]`; a non-finite or too fast one is reported in
        /// `status[0..4]`.
        ///
        /// With heat (`heat_count` = `count`, else 0; see `Heat`) `'heat_p2g` scatters heat
        /// capacity and energy into `grid_heat`, `'heat_nodes` turns them into the nodes'
        /// temperatures (held where walls and colliders hold them), `'conduct` scatters each
        /// particle's conduction into `grid_q`, and `'heat_g2p` gives the particles their
        /// nodes' change. `table` holds `MATERIAL_ROWS` rows per material (see
        /// `MaterialTable`); the softening curve scales `mu` when `soften`.
        ///
        /// The `#[specialize]` parameters (`with_flip`, `viscous`, `n_colliders`,
        /// `track_speed`, `soften` and `kinds`, the material kinds present as bits) are
        /// constant through a run: GPU code compiled for their values leaves out the FLIP
        /// scatter, bulk viscosity, colliders and the updates of absent kinds where unused
        /// (on lavapipe, which runs untaken branches under a mask, mpm3d.toml's grid update
        /// took 10 ms with its collider loop of zero trips, 3.3 without).
        ///
        /// With surface tension (`tension_count` = `count`, else 0; see
        /// `Settings::surface_tension`) `'color_p2g` scatters each liquid's volume fraction into
        /// its channel of `grid_color`, and `'capillary` adds the force of each channel's
        /// curvature, `sigma kappa grad c` (`sigma` from the table's `TENSION_ROW`), to the
        /// nodes' momentum.
        #[kernel]
        pub fn $substep(
            x: &mut Field<Vec>,
            v: &mut Field<Vec>,
            c: &mut Field<Mat>,
            grad_u: &mut Field<Mat>,
            tau: &mut Field<Mat>,
            jp: &mut Field<f32>,
            mass: &Field<f32>,
            vol: &Field<f32>,
            material: &mut Field<i32>,
            temperature: &mut Field<f32>,
            table: &Field<Vec4>,
            colliders: &Field<Vec4>,
            sdf: &Field<f32>,
            status: &mut Field<i32>,
            speeds: &mut Field<i32>,
            grid_v: &mut Field<Vec, D>,
            grid_v0: &mut Field<Vec, D>,
            grid_m: &mut Field<f32, D>,
            grid_j: &mut Field<Vec2, D>,
            grid_heat: &mut Field<Vec2, D>,
            grid_q: &mut Field<f32, D>,
            grid_color: &mut Field<Vec4, D>,
            count: u32,
            step: i32,
            res: IVec,
            dt: f32,
            dx: f32,
            dinv: f32,
            gravity: Vec,
            damping: f32,
            visc_linear: f32,
            visc_quadratic: f32,
            #[specialize] viscous: bool,
            flip: f32,
            #[specialize] with_flip: bool,
            #[specialize] n_colliders: i32,
            wall_thickness: i32,
            wall_condition: i32,
            wall_friction: f32,
            margin: f32,
            max_speed: f32,
            #[specialize] track_speed: bool,
            f_bar_count: u32,
            heat_count: u32,
            wall_heat: Vec2,
            #[specialize] soften: bool,
            tension_count: u32,
            #[specialize] kinds: u32,
        ) {
            let inv_dx = 1.0 / dx;
            let cell_volume = pow(dx, DIM as f32);
            'speeds: for b in 0..crate::solver::kernels::SPEED_BUCKETS {
                speeds[b] = 0;
            }
            'clear: for cell in grid_m.active() {
                grid_v[cell] = Vec::ZERO;
                if with_flip {
                    grid_v0[cell] = Vec::ZERO;
                }
                grid_m[cell] = 0.0;
                if f_bar_count > 0 {
                    grid_j[cell] = Vec2::ZERO;
                }
            }
            // Heat has loops of its own, so that the others bind no heat field when it is
            // off (each field a loop uses costs every invocation a view in registers); off,
            // `grid_heat` has no cells (the loops over it run nothing).
            'heat_clear: for cell in grid_heat.active() {
                if heat_count > 0 {
                    grid_heat[cell] = Vec2::ZERO;
                    grid_q[cell] = 0.0;
                }
            }
            'p2g: for p in 0..count {
                let id = material[p];
                if id >= 0 {
                    let (base, fx, w) = stencil(x[p] * inv_dx, $support);
                    let wx = w[0];
                    let wy = w[1];
                    let wz = w[2];
                    let m = mass[p];
                    let apic = m * c[p];
                    let affine = (-dt * vol[p] * dinv) * tau[p] + apic;
                    let momentum = m * v[p];
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let weight = wx[i] * wy[k] * wz[l];
                                let dpos = (to_vec(o) - fx) * dx;
                                grid_v[base + o] += weight * (momentum + affine * dpos);
                                grid_m[base + o] += weight * m;
                                if with_flip {
                                    grid_v0[base + o] += weight * (momentum + apic * dpos);
                                }
                            }
                        }
                    }
                }
            }
            // Heat capacity and energy, `(m c, m c T)`.
            'heat_p2g: for p in 0..heat_count {
                let id = material[p];
                if id >= 0 {
                    let (base, _fx, w) = stencil(x[p] * inv_dx, $support);
                    let capacity = mass[p] * table[id * MATERIAL_ROWS + KIND_ROW].z;
                    let heat = vec2(capacity, capacity * temperature[p]);
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                grid_heat[base + o] += (w[0][i] * w[1][k] * w[2][l]) * heat;
                            }
                        }
                    }
                }
            }
            // Surface tension, in loops of its own as heat; off, `grid_color` has no cells.
            'color_clear: for cell in grid_color.active() {
                if tension_count > 0 {
                    grid_color[cell] = Vec4::ZERO;
                }
            }
            // The colour: each node's share of each liquid, `sum w V / dx^d` with the current
            // volume `J V0`.
            'color_p2g: for p in 0..tension_count {
                let id = material[p];
                if id >= 0 {
                    let channel = table[id * MATERIAL_ROWS + KIND_ROW].w as i32;
                    if channel >= 0 {
                        let (base, _fx, w) = stencil(x[p] * inv_dx, $support);
                        let mut share = Vec4::ZERO;
                        share[channel] =
                            vol[p] * (1.0 + materials::volume_change(grad_u[p])) / cell_volume;
                        for i in 0..$support {
                            for k in 0..$support {
                                for l in 0..$depth {
                                    let o = offset(i, k, l);
                                    grid_color[base + o] += (w[0][i] * w[1][k] * w[2][l]) * share;
                                }
                            }
                        }
                    }
                }
            }
            // The capillary impulse `dt dx^d sigma kappa grad c` of every channel, from central
            // differences over the node's 3^d neighbourhood (the loops of a quadratic stencil).
            'capillary: for cell in grid_color.active() {
                if tension_count > 0 && has_neighbours(cell, res) {
                    if grid_m[cell] > 0.0 {
                        let mut force = Vec::ZERO;
                        for channel in 0..SURFACE_CHANNELS {
                            let sigma = table[TENSION_ROW][channel];
                            if sigma > 0.0 {
                                let mut g = Vec::ZERO;
                                let mut h = Mat::ZERO;
                                for i in 0..3 {
                                    for k in 0..3 {
                                        for l in 0..QUADRATIC_DEPTH {
                                            let o = offset(i, k, l) - IVec::ONE;
                                            let (dg, dh) = differences(o);
                                            let colour = grid_color[cell + o][channel];
                                            g += colour * dg;
                                            h += colour * dh;
                                        }
                                    }
                                }
                                force += sigma * capillary(g * inv_dx, h * (inv_dx * inv_dx), dx);
                            }
                        }
                        grid_v[cell] += (dt * cell_volume) * force;
                    }
                }
            }
            'grid_update: for cell in grid_m.active() {
                let m = grid_m[cell];
                if m > 0.0 {
                    // Implicit damping: unconditionally stable, and zero at rest. Two
                    // reciprocals instead of a division per component (lavapipe runs each
                    // as a vector division over the whole grid).
                    let inv_m = 1.0 / m;
                    let keep = 1.0 / (1.0 + dt * damping);
                    let mut gv = (inv_m * grid_v[cell] + dt * gravity) * keep;
                    let xn = to_vec(cell) * dx;
                    for k in 0..n_colliders {
                        let r = k * COLLIDER_ROWS;
                        let head = colliders[r];
                        // A distance field's value and gradient where `x` lies in its lattice.
                        let mut within = false;
                        let mut sampled = 0.0;
                        let mut gradient = Vec::ZERO;
                        if head.x as i32 == SDF {
                            let rotation =
                                frame(colliders[r + 5], colliders[r + 6], colliders[r + 7]);
                            let (local, inside) = sdf_local(
                                xn,
                                colliders[r + 1],
                                colliders[r + 2],
                                rotation,
                                colliders[r + 8],
                            );
                            within = inside;
                            if within {
                                for corner in 0..CORNERS {
                                    let value =
                                        sdf[sdf_index(local, corner, colliders[r + 8], head.w)];
                                    let (weight, slope) =
                                        sdf_corner(local, corner, colliders[r + 2].w);
                                    sampled += weight * value;
                                    gradient += slope * value;
                                }
                                gradient = rotation * gradient;
                            }
                        }
                        let (phi, n) = collider_distance(
                            xn,
                            head,
                            colliders[r + 1],
                            colliders[r + 2],
                            within,
                            sampled,
                            gradient,
                        );
                        if phi < 0.0 {
                            let vc = collider_velocity(
                                xn,
                                colliders[r + 1],
                                colliders[r + 3],
                                colliders[r + 4],
                            );
                            gv = boundary(gv, n, vc, head.y as i32, head.z);
                        }
                    }
                    gv = walls(cell, gv, res, wall_thickness, wall_condition, wall_friction);
                    grid_v[cell] = gv;
                    if with_flip {
                        grid_v0[cell] = inv_m * grid_v0[cell];
                    }
                }
            }
            // Each node's heat capacity and temperature; a node that a wall or collider holds
            // has no capacity of its own (an infinite reservoir at its temperature). A held
            // collider wins over the walls, the last one over the others.
            'heat_nodes: for cell in grid_heat.active() {
                let node = grid_heat[cell];
                if heat_count > 0 && node.x > 0.0 {
                    let xn = to_vec(cell) * dx;
                    let mut out = vec2(node.x, node.y / node.x);
                    if wall_heat.x > 0.0 && in_walls(cell, res, wall_thickness) {
                        out = vec2(0.0, wall_heat.y);
                    }
                    for k in 0..n_colliders {
                        let r = k * COLLIDER_ROWS;
                        let head = colliders[r];
                        if colliders[r + 4].w > 0.0 {
                            // As in the grid update, without the normal.
                            let mut within = false;
                            let mut sampled = 0.0;
                            if head.x as i32 == SDF {
                                let rotation =
                                    frame(colliders[r + 5], colliders[r + 6], colliders[r + 7]);
                                let (local, inside) = sdf_local(
                                    xn,
                                    colliders[r + 1],
                                    colliders[r + 2],
                                    rotation,
                                    colliders[r + 8],
                                );
                                within = inside;
                                if within {
                                    for corner in 0..CORNERS {
                                        let value =
                                            sdf[sdf_index(local, corner, colliders[r + 8], head.w)];
                                        let (weight, _slope) =
                                            sdf_corner(local, corner, colliders[r + 2].w);
                                        sampled += weight * value;
                                    }
                                }
                            }
                            let (phi, _n) = collider_distance(
                                xn,
                                head,
                                colliders[r + 1],
                                colliders[r + 2],
                                within,
                                sampled,
                                Vec::ZERO,
                            );
                            if phi <= HEAT_REACH * dx {
                                out = vec2(0.0, colliders[r + 3].w);
                            }
                        }
                    }
                    grid_heat[cell] = out;
                }
            }
            // Conduction: the particle's temperature gradient from its nodes' temperatures,
            // `D^-1 sum w T_i (x_i - x_p)` (exact for linear fields), and its share
            // `-V k grad T . grad w_i` of each node's heat inflow, with MLS-MPM's
            // `grad w_i = w D^-1 (x_i - x_p)` and the current volume `J V0`.
            'conduct: for p in 0..heat_count {
                let id = material[p];
                if id >= 0 {
                    let (base, fx, w) = stencil(x[p] * inv_dx, $support);
                    let mut gradient = Vec::ZERO;
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let weight = w[0][i] * w[1][k] * w[2][l];
                                let dpos = (to_vec(o) - fx) * dx;
                                gradient += (weight * grid_heat[base + o].y) * dpos;
                            }
                        }
                    }
                    let volume = vol[p] * (1.0 + materials::volume_change(grad_u[p]));
                    let conductivity = table[id * MATERIAL_ROWS + KIND_ROW].y;
                    let flux = (-volume * conductivity * dinv * dinv) * gradient;
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let weight = w[0][i] * w[1][k] * w[2][l];
                                let dpos = (to_vec(o) - fx) * dx;
                                grid_q[base + o] += weight * dot(flux, dpos);
                            }
                        }
                    }
                }
            }
            // The particle's temperature takes its nodes' change, as FLIP takes the velocity's,
            // and relaxes towards their temperature at the rate of `SUBGRID_CONDUCTION` (see
            // `Heat`).
            'heat_g2p: for p in 0..heat_count {
                let id = material[p];
                if id >= 0 {
                    let (base, _fx, w) = stencil(x[p] * inv_dx, $support);
                    // The nodes' temperature change per unit `dt`, their temperature before.
                    let mut warming = 0.0;
                    let mut smooth = 0.0;
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let weight = w[0][i] * w[1][k] * w[2][l];
                                let node = grid_heat[base + o];
                                smooth += weight * node.y;
                                if node.x > 0.0 {
                                    warming += weight * grid_q[base + o] / node.x;
                                }
                            }
                        }
                    }
                    let r = id * MATERIAL_ROWS;
                    let heat = table[r + KIND_ROW];
                    let diffusivity = heat.y / (table[r + ELASTIC_ROW].z * heat.z);
                    let relax = 1.0 - exp(-SUBGRID_CONDUCTION * diffusivity * dt * inv_dx * inv_dx);
                    let t = temperature[p];
                    temperature[p] = t + dt * warming - relax * (t - smooth);
                }
            }
            'g2p_stress: for p in 0..count {
                let id = material[p];
                if id >= 0 {
                    let (base, fx, w) = stencil(x[p] * inv_dx, $support);
                    let wx = w[0];
                    let wy = w[1];
                    let wz = w[2];
                    let mut v_pic = Vec::ZERO;
                    let mut v_change = Vec::ZERO;
                    let mut b = Mat::ZERO;
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let weight = wx[i] * wy[k] * wz[l];
                                let dpos = (to_vec(o) - fx) * dx;
                                let g = grid_v[base + o];
                                v_pic += weight * g;
                                b += weight * outer(g, dpos);
                                if with_flip {
                                    v_change += weight * (g - grid_v0[base + o]);
                                }
                            }
                        }
                    }
                    let new_c = dinv * b;
                    let (mut new_x, mut new_v) = keep_out(
                        x[p] + dt * v_pic,
                        (1.0 - flip) * v_pic + flip * (v[p] + v_change),
                        res,
                        dx,
                        wall_thickness,
                        wall_condition,
                        wall_friction,
                    );
                    // A particle that ended inside a collider goes back to its surface, with
                    // the collider's condition on its velocity (the grid's nodes alone miss a
                    // wall thinner than a cell).
                    for k in 0..n_colliders {
                        let r = k * COLLIDER_ROWS;
                        let head = colliders[r];
                        // A distance field's value and gradient where `x` lies in its lattice.
                        let mut within = false;
                        let mut sampled = 0.0;
                        let mut gradient = Vec::ZERO;
                        if head.x as i32 == SDF {
                            let rotation =
                                frame(colliders[r + 5], colliders[r + 6], colliders[r + 7]);
                            let (local, inside) = sdf_local(
                                new_x,
                                colliders[r + 1],
                                colliders[r + 2],
                                rotation,
                                colliders[r + 8],
                            );
                            within = inside;
                            if within {
                                for corner in 0..CORNERS {
                                    let value =
                                        sdf[sdf_index(local, corner, colliders[r + 8], head.w)];
                                    let (weight, slope) =
                                        sdf_corner(local, corner, colliders[r + 2].w);
                                    sampled += weight * value;
                                    gradient += slope * value;
                                }
                                gradient = rotation * gradient;
                            }
                        }
                        let (phi, n) = collider_distance(
                            new_x,
                            head,
                            colliders[r + 1],
                            colliders[r + 2],
                            within,
                            sampled,
                            gradient,
                        );
                        if phi < 0.0 {
                            new_x -= phi * n;
                            let vc = collider_velocity(
                                new_x,
                                colliders[r + 1],
                                colliders[r + 3],
                                colliders[r + 4],
                            );
                            new_v = boundary(new_v, n, vc, head.y as i32, head.z);
                        }
                    }
                    // F' = (I + dt C) F, updated by its increment on h = F - I so that
                    // strain increments below f32's resolution at 1 are kept.
                    let dt_c = dt * new_c;
                    let mut trial = grad_u[p] + dt_c + dt_c * grad_u[p];
                    let r = id * MATERIAL_ROWS;
                    let kind = table[r + KIND_ROW].x as i32;
                    let model = table[r + MODEL_ROW];
                    // The shear modulus takes the material's scale at the particle's
                    // temperature; molten, the particle keeps only its volume.
                    let mut e = table[r + ELASTIC_ROW];
                    if soften {
                        let curve = r + CURVE_ROWS;
                        e = softened(e, temperature[p], table[curve], table[curve + 1]);
                        if e.x <= 0.0 {
                            let dj = materials::volume_change(trial);
                            trial = Mat::from_diagonal(Vec::splat(materials::root_change(dj)));
                        }
                    }
                    let (h_new, mut tau_new, jp_new) =
                        materials::constitutive(kinds, kind, trial, new_c, tau[p], jp[p], e, model);
                    // Artificial bulk viscosity in compression (see `BulkViscosity`): Kirchhoff
                    // `J (-q I)` with `J rho = rho0`, the row's density.
                    let rate = trace(new_c);
                    let viscous_here = viscous && kind != USER_KIND;
                    if viscous_here {
                        tau_new -= viscous_pressure(
                            rate,
                            table[r + ELASTIC_ROW],
                            dx,
                            visc_linear,
                            visc_quadratic,
                        ) * Mat::IDENTITY;
                    }
                    let speed2 = dot(new_v, new_v);
                    let mut why = 0;
                    if non_finite(speed2)
                        || non_finite(dot(new_x, new_x))
                        || non_finite(squared_norm(tau_new))
                        || non_finite(jp_new)
                    {
                        why = NON_FINITE;
                    } else if speed2 > max_speed * max_speed {
                        why = TOO_FAST;
                    }
                    if why != 0 {
                        let earlier = status[0];
                        status[0] += 1;
                        if earlier == 0 {
                            status[1] = p as i32;
                            status[2] = step;
                            status[3] = why;
                        }
                        material[p] = -1 - id;
                    } else {
                        let xc = new_x * inv_dx;
                        let mut outside = false;
                        for a in 0..DIM {
                            if xc[a] < margin || xc[a] > res[a] as f32 - margin {
                                outside = true;
                            }
                        }
                        if outside {
                            status[4] += 1;
                            material[p] = -1 - id;
                        }
                        if track_speed {
                            // The fastest signal through this particle's cells (see
                            // `TimeStep::Adaptive`): its own speed plus its state's wave
                            // speed, widened by bulk viscosity to `Q + sqrt(Q^2 + c^2)`.
                            // The unsoftened row: a bound on the softened stiffness.
                            let e = table[r + ELASTIC_ROW];
                            let modulus = materials::wave_modulus(
                                kinds, kind, h_new, tau_new, jp_new, e, model,
                            );
                            let wave = sqrt(max(modulus, 0.0) / e.z);
                            let mut signal = wave;
                            if viscous_here {
                                let q = visc_linear * wave + visc_quadratic * dx * max(-rate, 0.0);
                                signal = q + sqrt(q * q + wave * wave);
                            }
                            let bucket = speed_bucket(sqrt(speed2) + signal);
                            if speeds[bucket] == 0 {
                                speeds[bucket] = 1;
                            }
                        }
                    }
                    v[p] = new_v;
                    x[p] = new_x;
                    c[p] = new_c;
                    grad_u[p] = h_new;
                    tau[p] = tau_new;
                    jp[p] = jp_new;
                }
            }
            // F-bar (see `Settings::f_bar`; `f_bar_count` is `count` with it, else 0): the
            // volume change `J - 1` of the new states, averaged at each node over the
            // particles that reach it (weighted by `w V0`), then back at each particle
            // through its weights; the stress is recomputed from
            // `F-bar = (J-bar / J)^(1/d) F`, while F itself evolves as before.
            'f_bar_scatter: for p in 0..f_bar_count {
                let id = material[p];
                if id >= 0 && f_bar_applies(table[id * MATERIAL_ROWS + KIND_ROW].x as i32) {
                    let (base, _fx, w) = stencil(x[p] * inv_dx, $support);
                    let share = vol[p] * vec2(materials::volume_change(grad_u[p]), 1.0);
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                grid_j[base + o] += (w[0][i] * w[1][k] * w[2][l]) * share;
                            }
                        }
                    }
                }
            }
            'f_bar_stress: for p in 0..f_bar_count {
                let id = material[p];
                if id >= 0 && f_bar_applies(table[id * MATERIAL_ROWS + KIND_ROW].x as i32) {
                    let (base, _fx, w) = stencil(x[p] * inv_dx, $support);
                    let mut dj_bar = 0.0;
                    for i in 0..$support {
                        for k in 0..$support {
                            for l in 0..$depth {
                                let o = offset(i, k, l);
                                let node = grid_j[base + o];
                                if node.y > 0.0 {
                                    dj_bar += (w[0][i] * w[1][k] * w[2][l]) * node.x / node.y;
                                }
                            }
                        }
                    }
                    // s = (J-bar / J)^(1/d) by its increment, from the volume changes (f32:
                    // J - 1 is far below 1 in nearly incompressible solids).
                    let h = grad_u[p];
                    let dj = materials::volume_change(h);
                    let grow = materials::root_change((dj_bar - dj) / (1.0 + dj));
                    let h_bar = h + grow * (Mat::IDENTITY + h);
                    let r = id * MATERIAL_ROWS;
                    let mut e = table[r + ELASTIC_ROW];
                    if soften {
                        let curve = r + CURVE_ROWS;
                        e = softened(e, temperature[p], table[curve], table[curve + 1]);
                    }
                    let (_h, mut tau_bar, _jp) = materials::constitutive(
                        kinds,
                        table[r + KIND_ROW].x as i32,
                        h_bar,
                        c[p],
                        tau[p],
                        jp[p],
                        e,
                        table[r + MODEL_ROW],
                    );
                    if viscous {
                        tau_bar -= viscous_pressure(
                            trace(c[p]),
                            table[r + ELASTIC_ROW],
                            dx,
                            visc_linear,
                            visc_quadratic,
                        ) * Mat::IDENTITY;
                    }
                    tau[p] = tau_bar;
                }
            }
        }
    };
}

substep!(substep_quadratic, 3, QUADRATIC_DEPTH);
substep!(substep_cubic, 4, CUBIC_DEPTH);

/// Activates the grid blocks the next P2G adds into, for a sparse grid that the P2G then
/// runs frozen (`Tree::freeze`): the corners of each live particle's stencil, which reach
/// every block the stencil touches when a block is at least `support - 1` cells wide and
/// its cells are dense (one activity unit per block). The particles only mark their blocks
/// (a plain store: every writer stores the same 1), and the activation runs once per block:
/// a GPU that runs a branch under a mask (lavapipe) pays the allocation path on every
/// `activate` whether or not it allocates, so activating per corner cost a 2D blob of half
/// a million particles 20 ms against 6 ms marked (`examples/layout_ratios`).
#[kernel]
pub fn touch_stencils(
    x: &Field<Vec>,
    material: &Field<i32>,
    marks: &mut Field<u32, D>,
    grid_m: &mut Field<f32, D>,
    count: u32,
    inv_dx: f32,
    support: i32,
    block: i32,
) {
    'mark: for p in 0..count {
        if material[p] >= 0 {
            let (base, _fx, _w) = stencil(x[p] * inv_dx, support);
            for corner in 0..CORNERS {
                let mut node = base;
                for a in 0..DIM {
                    if (corner >> a) & 1 == 1 {
                        node[a] += support - 1;
                    }
                }
                marks[node / block] = 1;
            }
        }
    }
    'touch: for b in marks.indices() {
        if marks[b] != 0 {
            activate(grid_m, b * block);
            marks[b] = 0;
        }
    }
}

/// The stress of particles `start..end` from their current state (run on new ones), their
/// shear moduli softened at their temperatures when `soften` (see `substep_quadratic`).
#[kernel]
pub fn init_stress(
    grad_u: &mut Field<Mat>,
    c: &Field<Mat>,
    tau: &mut Field<Mat>,
    jp: &mut Field<f32>,
    material: &Field<i32>,
    temperature: &Field<f32>,
    table: &Field<Vec4>,
    start: u32,
    end: u32,
    #[specialize] soften: bool,
    #[specialize] kinds: u32,
) {
    'stress: for p in start..end {
        let id = material[p];
        if id >= 0 {
            let r = id * MATERIAL_ROWS;
            let mut e = table[r + ELASTIC_ROW];
            if soften {
                let curve = r + CURVE_ROWS;
                e = softened(e, temperature[p], table[curve], table[curve + 1]);
            }
            let kind = table[r + KIND_ROW].x as i32;
            let model = table[r + MODEL_ROW];
            let (h_new, tau_new, jp_new) =
                materials::constitutive(kinds, kind, grad_u[p], c[p], tau[p], jp[p], e, model);
            grad_u[p] = h_new;
            tau[p] = tau_new;
            jp[p] = jp_new;
        }
    }
}

/// Copies the grid nodes of the planes across x from `first` on into `halo`, for the
/// neighbouring rank that shares them (see `solver::ranks`). One section per grid field, in
/// the order v, v0, m, heat, color, q, j; `n_*` is the nodes of a field's section (0 leaves
/// it out), its components follow each other node by node.
#[kernel]
pub fn halo_pack(
    grid_v: &Field<Vec, D>,
    grid_v0: &Field<Vec, D>,
    grid_m: &Field<f32, D>,
    grid_heat: &Field<Vec2, D>,
    grid_color: &Field<Vec4, D>,
    grid_q: &Field<f32, D>,
    grid_j: &Field<Vec2, D>,
    halo: &mut Field<f32>,
    first: i32,
    res: IVec,
    n_v: u32,
    n_v0: u32,
    n_m: u32,
    n_heat: u32,
    n_color: u32,
    n_q: u32,
    n_j: u32,
) {
    let d = DIM as u32;
    let at_v0 = n_v * d;
    let at_m = at_v0 + n_v0 * d;
    let at_heat = at_m + n_m;
    let at_color = at_heat + 2 * n_heat;
    let at_q = at_color + 4 * n_color;
    let at_j = at_q + n_q;
    'pack_v: for i in 0..n_v {
        let v = grid_v[plane_cell(i as i32, first, res)];
        for a in 0..DIM {
            halo[i * d + a as u32] = v[a];
        }
    }
    'pack_v0: for i in 0..n_v0 {
        let v = grid_v0[plane_cell(i as i32, first, res)];
        for a in 0..DIM {
            halo[at_v0 + i * d + a as u32] = v[a];
        }
    }
    'pack_m: for i in 0..n_m {
        halo[at_m + i] = grid_m[plane_cell(i as i32, first, res)];
    }
    'pack_heat: for i in 0..n_heat {
        let h = grid_heat[plane_cell(i as i32, first, res)];
        halo[at_heat + 2 * i] = h.x;
        halo[at_heat + 2 * i + 1] = h.y;
    }
    'pack_color: for i in 0..n_color {
        let c = grid_color[plane_cell(i as i32, first, res)];
        for a in 0..4 {
            halo[at_color + 4 * i + a as u32] = c[a];
        }
    }
    'pack_q: for i in 0..n_q {
        halo[at_q + i] = grid_q[plane_cell(i as i32, first, res)];
    }
    'pack_j: for i in 0..n_j {
        let j = grid_j[plane_cell(i as i32, first, res)];
        halo[at_j + 2 * i] = j.x;
        halo[at_j + 2 * i + 1] = j.y;
    }
}

/// Adds a neighbouring rank's `halo_pack` of the same planes to this rank's nodes, so that
/// both hold the whole sums (`a + b` here, `b + a` there: the same float). Nodes whose
/// share is zero are left alone, so that a sparse grid activates no block for them.
#[kernel]
pub fn halo_add(
    grid_v: &mut Field<Vec, D>,
    grid_v0: &mut Field<Vec, D>,
    grid_m: &mut Field<f32, D>,
    grid_heat: &mut Field<Vec2, D>,
    grid_color: &mut Field<Vec4, D>,
    grid_q: &mut Field<f32, D>,
    grid_j: &mut Field<Vec2, D>,
    halo: &Field<f32>,
    first: i32,
    res: IVec,
    n_v: u32,
    n_v0: u32,
    n_m: u32,
    n_heat: u32,
    n_color: u32,
    n_q: u32,
    n_j: u32,
) {
    let d = DIM as u32;
    let at_v0 = n_v * d;
    let at_m = at_v0 + n_v0 * d;
    let at_heat = at_m + n_m;
    let at_color = at_heat + 2 * n_heat;
    let at_q = at_color + 4 * n_color;
    let at_j = at_q + n_q;
    'add_v: for i in 0..n_v {
        let mut v = Vec::ZERO;
        for a in 0..DIM {
            v[a] = halo[i * d + a as u32];
        }
        if v != Vec::ZERO {
            let cell = plane_cell(i as i32, first, res);
            grid_v[cell] = grid_v[cell] + v;
        }
    }
    'add_v0: for i in 0..n_v0 {
        let mut v = Vec::ZERO;
        for a in 0..DIM {
            v[a] = halo[at_v0 + i * d + a as u32];
        }
        if v != Vec::ZERO {
            let cell = plane_cell(i as i32, first, res);
            grid_v0[cell] = grid_v0[cell] + v;
        }
    }
    'add_m: for i in 0..n_m {
        let m = halo[at_m + i];
        if m != 0.0 {
            let cell = plane_cell(i as i32, first, res);
            grid_m[cell] = grid_m[cell] + m;
        }
    }
    'add_heat: for i in 0..n_heat {
        let h = vec2(halo[at_heat + 2 * i], halo[at_heat + 2 * i + 1]);
        if h != Vec2::ZERO {
            let cell = plane_cell(i as i32, first, res);
            grid_heat[cell] = grid_heat[cell] + h;
        }
    }
    'add_color: for i in 0..n_color {
        let mut c = Vec4::ZERO;
        for a in 0..4 {
            c[a] = halo[at_color + 4 * i + a as u32];
        }
        if c != Vec4::ZERO {
            let cell = plane_cell(i as i32, first, res);
            grid_color[cell] = grid_color[cell] + c;
        }
    }
    'add_q: for i in 0..n_q {
        let q = halo[at_q + i];
        if q != 0.0 {
            let cell = plane_cell(i as i32, first, res);
            grid_q[cell] = grid_q[cell] + q;
        }
    }
    'add_j: for i in 0..n_j {
        let j = vec2(halo[at_j + 2 * i], halo[at_j + 2 * i + 1]);
        if j != Vec2::ZERO {
            let cell = plane_cell(i as i32, first, res);
            grid_j[cell] = grid_j[cell] + j;
        }
    }
}

/// Particle fields rewritten in bin order, one field of each element type per call:
/// `to[k] = from[order[k]]` for `k < n_*` (0 leaves a type out). See `solver::sorting`.
#[kernel]
pub fn gather_particles(
    order: &Field<u32>,
    vec_from: &Field<Vec>,
    vec_to: &mut Field<Vec>,
    mat_from: &Field<Mat>,
    mat_to: &mut Field<Mat>,
    f32_from: &Field<f32>,
    f32_to: &mut Field<f32>,
    i32_from: &Field<i32>,
    i32_to: &mut Field<i32>,
    n_vec: u32,
    n_mat: u32,
    n_f32: u32,
    n_i32: u32,
) {
    'gather_vec: for k in 0..n_vec {
        vec_to[k] = vec_from[order[k]];
    }
    'gather_mat: for k in 0..n_mat {
        mat_to[k] = mat_from[order[k]];
    }
    'gather_f32: for k in 0..n_f32 {
        f32_to[k] = f32_from[order[k]];
    }
    'gather_i32: for k in 0..n_i32 {
        i32_to[k] = i32_from[order[k]];
    }
}
