//! The solver's kernels: one MLS-MPM substep (Hu et al. 2018, "A Moving Least Squares
//! Material Point Method with Displacement Discontinuity and Two-Way Rigid Body Coupling")
//! and the stress evaluation of freshly added particles.
//!
//! Kernels cannot be generic, so the 2D and 3D kernels are stamped out of one template,
//! `mls_mpm!`, with the few functions that differ by dimension passed in by name. The stencil
//! loops always nest three deep; in 2D the third loop runs once. Each spline gets its own
//! substep kernel so that the stencil loops have constant bounds (unrolled on both backends).

use glam::{IVec2, IVec3, Mat2, Mat3, Vec2, Vec3, Vec4};

use crate::materials::elastic::{
    fixed_corotated_2d, fixed_corotated_3d, neo_hookean_2d, neo_hookean_3d,
};
use crate::materials::sand::{
    hencky_stress_2d, hencky_stress_3d, sand_plasticity_2d, sand_plasticity_3d,
};
use crate::materials::snow::{snow_hardening, snow_plasticity_2d, snow_plasticity_3d};
use crate::materials::water::{water_stress_2d, water_stress_3d};
use crate::{func, kernel, Field};

/// Material kinds as the kernels see them (the variants of `Material` on the host).
pub const WATER: i32 = 0;
pub const NEO_HOOKEAN: i32 = 1;
pub const FIXED_COROTATED: i32 = 2;
pub const SNOW: i32 = 3;
pub const SAND: i32 = 4;
/// Stress written by a user kernel (see `Solver::add_stress_hook`).
pub const USER: i32 = 5;

/// Boundary conditions as the kernels see them.
pub const STICKY: i32 = 0;
pub const SLIP: i32 = 1;
pub const SEPARATE: i32 = 2;

/// Collider shapes as the kernels see them.
pub const PLANE: i32 = 0;
pub const BOX: i32 = 1;
pub const SPHERE: i32 = 2;

/// Rows per collider in the collider table: (shape, condition, friction, -), position,
/// normal or half extents, velocity.
pub const COLLIDER_ROWS: i32 = 4;

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

/// The particle-relative node offsets `(i, k, l)` of a stencil as a grid offset.
#[func]
pub fn offset_2d(i: i32, k: i32, _l: i32) -> IVec2 {
    ivec2(i, k)
}

#[func]
pub fn offset_3d(i: i32, k: i32, l: i32) -> IVec3 {
    ivec3(i, k, l)
}

/// The first components of a table row.
#[func]
pub fn row_2d(r: Vec4) -> Vec2 {
    vec2(r.x, r.y)
}

#[func]
pub fn row_3d(r: Vec4) -> Vec3 {
    vec3(r.x, r.y, r.z)
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

/// The stencil of a particle at `xp` (in cells): its base node, its offset from that node,
/// and its weights along each axis (`w[0][n]`: node `n` along x; in 2D `w[2]` is `(1, 0, 0, 0)`).
#[func]
pub fn stencil_2d(xp: Vec2, support: i32) -> (IVec2, Vec2, [Vec4; 3]) {
    let shift = select(support == 3, 0.5, 1.0);
    let base = floor(xp - Vec2::splat(shift)).as_ivec2();
    let fx = xp - base.as_vec2();
    (
        base,
        fx,
        [
            bspline_weights(fx.x, support),
            bspline_weights(fx.y, support),
            vec4(1.0, 0.0, 0.0, 0.0),
        ],
    )
}

#[func]
pub fn stencil_3d(xp: Vec3, support: i32) -> (IVec3, Vec3, [Vec4; 3]) {
    let shift = select(support == 3, 0.5, 1.0);
    let base = floor(xp - Vec3::splat(shift)).as_ivec3();
    let fx = xp - base.as_vec3();
    (
        base,
        fx,
        [
            bspline_weights(fx.x, support),
            bspline_weights(fx.y, support),
            bspline_weights(fx.z, support),
        ],
    )
}

/// Stamps out one dimension's functions and kernels.
macro_rules! mls_mpm {
    (
        dim: $dim:literal, inv_dim: $inv_dim:literal,
        vec: $V:ident, mat: $M:ident, ivec: $IV:ident, as_vec: $as_vec:ident,
        stencil: $stencil:ident, offset: $offset:ident, row: $row:ident,
        neo_hookean: $neo:ident, fixed_corotated: $fcr:ident, water: $water:ident,
        snow: $snow:ident, sand: $sand:ident, hencky: $hencky:ident,
        boundary: $boundary:ident, collide: $collide:ident, walls: $walls:ident,
        keep_out: $keep_out:ident, volume_change: $volume_change:ident,
        root_change: $root_change:ident,
        constitutive: $constitutive:ident, init_stress: $init:ident,
        substeps: [$(($substep:ident, $support:literal, $depth:literal)),*],
    ) => {
        /// A boundary condition on a grid velocity `v` against a surface with outward normal
        /// `n` moving at `vc`: sticky stops it, slip keeps only its tangential part, separate
        /// does so only while it approaches; the tangential part then loses Coulomb friction
        /// `friction * |v_n|`.
        #[func]
        pub fn $boundary(v: $V, n: $V, vc: $V, condition: i32, friction: f32) -> $V {
            let rel = v - vc;
            let vn = dot(rel, n);
            let mut out = rel;
            if condition == STICKY {
                out = $V::ZERO;
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

        /// Applies a collider (four table rows) to the velocity `v` of the node at `xn`.
        #[func]
        pub fn $collide(
            v: $V,
            xn: $V,
            head: Vec4,
            at: Vec4,
            shape_row: Vec4,
            velocity: Vec4,
        ) -> $V {
            let shape = head.x as i32;
            let centre = $row(at);
            let d = xn - centre;
            let mut inside = true;
            let mut n = $V::ZERO;
            if shape == PLANE {
                n = $row(shape_row);
                inside = dot(d, n) < 0.0;
            } else if shape == SPHERE {
                let r = length(d);
                inside = r < at.w;
                if r > 1e-12 {
                    n = d / r;
                }
            } else {
                // A box: the nearest face's normal.
                let q = abs(d) - $row(shape_row);
                let mut best = -1e30;
                for a in 0..$dim {
                    if q[a] >= 0.0 {
                        inside = false;
                    }
                    if q[a] > best {
                        best = q[a];
                        n = $V::ZERO;
                        n[a] = select(d[a] < 0.0, -1.0, 1.0);
                    }
                }
            }
            let mut out = v;
            if inside {
                out = $boundary(v, n, $row(velocity), head.y as i32, head.z);
            }
            out
        }

        /// Domain walls `thickness` cells thick on every side of a grid of `res` cells (none
        /// for 0): the nodes `cell <= thickness` and `cell >= res - thickness` along any axis
        /// take the walls' condition, mirror images about the domain's centre. See `Walls`
        /// for where the surfaces lie.
        #[func]
        pub fn $walls(
            cell: $IV,
            v: $V,
            res: $IV,
            thickness: i32,
            condition: i32,
            friction: f32,
        ) -> $V {
            let mut out = v;
            if thickness > 0 {
                for a in 0..$dim {
                    let mut n = $V::ZERO;
                    if cell[a] <= thickness {
                        n[a] = 1.0;
                        out = $boundary(out, n, $V::ZERO, condition, friction);
                    } else if cell[a] >= res[a] - thickness {
                        n[a] = -1.0;
                        out = $boundary(out, n, $V::ZERO, condition, friction);
                    }
                }
            }
            out
        }

        /// Puts a particle that crossed a wall's surface, half a cell behind the last held
        /// nodes (see `Walls`), back on it, and applies the walls' condition to its velocity
        /// there (the grid's wall nodes alone let a fast particle sink into the wall).
        /// Returns the new position and velocity.
        #[func]
        pub fn $keep_out(
            x: $V,
            v: $V,
            res: $IV,
            dx: f32,
            thickness: i32,
            condition: i32,
            friction: f32,
        ) -> ($V, $V) {
            let mut xo = x;
            let mut vo = v;
            if thickness > 0 {
                // Cells from the border to the surface, as `Walls::surfaces` has it.
                let surface = thickness as f32 - 0.5;
                for a in 0..$dim {
                    let low = surface * dx;
                    let high = (res[a] as f32 - surface) * dx;
                    let mut n = $V::ZERO;
                    if xo[a] < low {
                        xo[a] = low;
                        n[a] = 1.0;
                        vo = $boundary(vo, n, $V::ZERO, condition, friction);
                    } else if xo[a] > high {
                        xo[a] = high;
                        n[a] = -1.0;
                        vo = $boundary(vo, n, $V::ZERO, condition, friction);
                    }
                }
            }
            (xo, vo)
        }

        /// `det(I + h) - 1`, the volume change of a displacement gradient `h = F - I`, from
        /// `h`'s invariants: `tr h + det h` in 2D, plus the sum of the principal 2x2 minors,
        /// `(tr(h)^2 - tr(h h)) / 2`, in 3D. Forming `det(F) - 1` instead would round changes
        /// below f32's 6e-8 at 1 away.
        #[func]
        pub fn $volume_change(h: $M) -> f32 {
            let t = trace(h);
            let is_3d = $dim as f32 - 2.0;
            t + is_3d * 0.5 * (t * t - trace(h * h)) + determinant(h)
        }

        /// `J^(1/d) - 1` for `J = 1 + dj`, without cancellation: `(r - 1)(1 + r [+ r^2]) = dj`.
        #[func]
        pub fn $root_change(dj: f32) -> f32 {
            let r = pow(max(1.0 + dj, 0.0), $inv_dim);
            let is_3d = $dim as f32 - 2.0;
            dj / (1.0 + r + is_3d * r * r)
        }

        /// One particle's constitutive update: plasticity projects the trial displacement
        /// gradient `h = F - I`, then the Kirchhoff stress follows. Returns `(h, tau, Jp)`.
        /// `elastic` is `(mu, lambda, -, -)`, `params` the material's own (see `Material`).
        /// User materials keep `tau`, which their hook writes.
        #[func]
        pub fn $constitutive(
            kind: i32,
            h: $M,
            c: $M,
            tau: $M,
            jp: f32,
            elastic: Vec4,
            params: Vec4,
        ) -> ($M, $M, f32) {
            let mu = elastic.x;
            let lambda = elastic.y;
            let mut h_new = h;
            let mut tau_new = tau;
            let mut jp_new = jp;
            if kind == WATER {
                // Water keeps only its volume: shear in F would never relax. With a free
                // surface (params.w) it holds no tension: J never exceeds 1.
                let mut dj = $volume_change(h);
                if params.w > 0.0 {
                    dj = min(dj, 0.0);
                }
                h_new = $M::from_diagonal($V::splat($root_change(dj)));
                tau_new = $water(1.0 + dj, c, params.x, params.y, params.z);
            } else if kind == NEO_HOOKEAN {
                tau_new = $neo($M::IDENTITY + h, mu, lambda);
            } else if kind == FIXED_COROTATED {
                tau_new = $fcr($M::IDENTITY + h, mu, lambda);
            } else if kind == SNOW {
                let (hp, jp_p) = $snow(h, jp, params.x, params.y);
                h_new = hp;
                jp_new = jp_p;
                let hardening = snow_hardening(jp_p, params.z);
                tau_new = $fcr($M::IDENTITY + hp, mu * hardening, lambda * hardening);
            } else if kind == SAND {
                h_new = $sand(h, mu, lambda, params.x, params.y);
                tau_new = $hencky($M::IDENTITY + h_new, mu, lambda);
            }
            (h_new, tau_new, jp_new)
        }

        $(
        /// One substep: clear the grid, scatter particles (P2G), update grid velocities
        /// (gravity, damping, colliders, walls), gather back (G2P, APIC with a FLIP blend),
        /// keep particles out of the walls, update deformation and stress. Particles with a
        /// negative material id are dead.
        ///
        /// FLIP's increment is the grid velocity's change over the whole step, stress
        /// included, so `grid_v0` holds the particles' momentum over mass without the stress
        /// impulse (which MLS-MPM folds into P2G); it is scattered only when `flip > 0`.
        ///
        /// `dinv` is the inverse of APIC's inertia-like tensor, `4 / dx^2` for quadratic and
        /// `3 / dx^2` for cubic splines (Jiang et al. 2015, "The affine particle-in-cell
        /// method"). A particle that ends outside `margin` cells of the border is marked dead
        /// and counted in `status[4]`; a non-finite or too fast one is reported in
        /// `status[0..4]`.
        #[kernel]
        pub fn $substep(
            x: &mut Field<$V>,
            v: &mut Field<$V>,
            c: &mut Field<$M>,
            grad_u: &mut Field<$M>,
            tau: &mut Field<$M>,
            jp: &mut Field<f32>,
            mass: &Field<f32>,
            vol: &Field<f32>,
            material: &mut Field<i32>,
            kinds: &Field<i32>,
            elastic: &Field<Vec4>,
            params: &Field<Vec4>,
            colliders: &Field<Vec4>,
            status: &mut Field<i32>,
            speeds: &mut Field<i32>,
            grid_v: &mut Field<$V, $dim>,
            grid_v0: &mut Field<$V, $dim>,
            grid_m: &mut Field<f32, $dim>,
            count: u32,
            step: i32,
            res: $IV,
            dt: f32,
            dx: f32,
            dinv: f32,
            gravity: $V,
            damping: f32,
            flip: f32,
            n_colliders: i32,
            wall_thickness: i32,
            wall_condition: i32,
            wall_friction: f32,
            margin: f32,
            max_speed: f32,
            track_speed: bool,
        ) {
            let inv_dx = 1.0 / dx;
            let support = $support;
            let depth = $depth;
            for b in 0..crate::solver::kernels::SPEED_BUCKETS {
                speeds[b] = 0;
            }
            for cell in grid_m.active() {
                grid_v[cell] = $V::ZERO;
                grid_v0[cell] = $V::ZERO;
                grid_m[cell] = 0.0;
            }
            for p in 0..count {
                let id = material[p];
                if id >= 0 {
                    let (base, fx, w) = $stencil(x[p] * inv_dx, support);
                    let wx = w[0];
                    let wy = w[1];
                    let wz = w[2];
                    let m = mass[p];
                    let apic = m * c[p];
                    let affine = (-dt * vol[p] * dinv) * tau[p] + apic;
                    let momentum = m * v[p];
                    for i in 0..support {
                        for k in 0..support {
                            for l in 0..depth {
                                let o = $offset(i, k, l);
                                let weight = wx[i] * wy[k] * wz[l];
                                let dpos = (o.$as_vec() - fx) * dx;
                                grid_v[base + o] += weight * (momentum + affine * dpos);
                                grid_m[base + o] += weight * m;
                                if flip > 0.0 {
                                    grid_v0[base + o] += weight * (momentum + apic * dpos);
                                }
                            }
                        }
                    }
                }
            }
            for cell in grid_m.active() {
                let m = grid_m[cell];
                if m > 0.0 {
                    // Implicit damping: unconditionally stable, and zero at rest.
                    let mut gv = (grid_v[cell] / m + dt * gravity) / (1.0 + dt * damping);
                    let xn = cell.$as_vec() * dx;
                    for k in 0..n_colliders {
                        let r = k * COLLIDER_ROWS;
                        gv = $collide(
                            gv,
                            xn,
                            colliders[r],
                            colliders[r + 1],
                            colliders[r + 2],
                            colliders[r + 3],
                        );
                    }
                    gv = $walls(cell, gv, res, wall_thickness, wall_condition, wall_friction);
                    grid_v[cell] = gv;
                    if flip > 0.0 {
                        grid_v0[cell] = grid_v0[cell] / m;
                    }
                }
            }
            for p in 0..count {
                let id = material[p];
                if id >= 0 {
                    let (base, fx, w) = $stencil(x[p] * inv_dx, support);
                    let wx = w[0];
                    let wy = w[1];
                    let wz = w[2];
                    let mut v_pic = $V::ZERO;
                    let mut v_change = $V::ZERO;
                    let mut b = $M::ZERO;
                    for i in 0..support {
                        for k in 0..support {
                            for l in 0..depth {
                                let o = $offset(i, k, l);
                                let weight = wx[i] * wy[k] * wz[l];
                                let dpos = (o.$as_vec() - fx) * dx;
                                let g = grid_v[base + o];
                                v_pic += weight * g;
                                b += weight * outer(g, dpos);
                                if flip > 0.0 {
                                    v_change += weight * (g - grid_v0[base + o]);
                                }
                            }
                        }
                    }
                    let new_c = dinv * b;
                    let (new_x, new_v) = $keep_out(
                        x[p] + dt * v_pic,
                        (1.0 - flip) * v_pic + flip * (v[p] + v_change),
                        res,
                        dx,
                        wall_thickness,
                        wall_condition,
                        wall_friction,
                    );
                    // F' = (I + dt C) F, updated by its increment on h = F - I so that
                    // strain increments below f32's resolution at 1 are kept.
                    let dt_c = dt * new_c;
                    let trial = grad_u[p] + dt_c + dt_c * grad_u[p];
                    let (h_new, tau_new, jp_new) = $constitutive(
                        kinds[id],
                        trial,
                        new_c,
                        tau[p],
                        jp[p],
                        elastic[id],
                        params[id],
                    );
                    let speed2 = dot(new_v, new_v);
                    let mut why = 0;
                    if non_finite(speed2)
                        || non_finite(dot(new_x, new_x))
                        || non_finite(trace(transpose(tau_new) * tau_new))
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
                        for a in 0..$dim {
                            if xc[a] < margin || xc[a] > res[a] as f32 - margin {
                                outside = true;
                            }
                        }
                        if outside {
                            status[4] += 1;
                            material[p] = -1 - id;
                        }
                        if track_speed {
                            let bucket = speed_bucket(sqrt(speed2));
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
        }
        )*

        /// The stress of particles `start..end` from their current state (run on new ones).
        #[kernel]
        pub fn $init(
            grad_u: &mut Field<$M>,
            c: &Field<$M>,
            tau: &mut Field<$M>,
            jp: &mut Field<f32>,
            material: &Field<i32>,
            kinds: &Field<i32>,
            elastic: &Field<Vec4>,
            params: &Field<Vec4>,
            start: u32,
            end: u32,
        ) {
            for p in start..end {
                let id = material[p];
                if id >= 0 {
                    let (h_new, tau_new, jp_new) = $constitutive(
                        kinds[id],
                        grad_u[p],
                        c[p],
                        tau[p],
                        jp[p],
                        elastic[id],
                        params[id],
                    );
                    grad_u[p] = h_new;
                    tau[p] = tau_new;
                    jp[p] = jp_new;
                }
            }
        }
    };
}

mls_mpm! {
    dim: 2, inv_dim: 0.5,
    vec: Vec2, mat: Mat2, ivec: IVec2, as_vec: as_vec2,
    stencil: stencil_2d, offset: offset_2d, row: row_2d,
    neo_hookean: neo_hookean_2d, fixed_corotated: fixed_corotated_2d, water: water_stress_2d,
    snow: snow_plasticity_2d, sand: sand_plasticity_2d, hencky: hencky_stress_2d,
    boundary: boundary_2d, collide: collide_2d, walls: walls_2d, keep_out: keep_out_2d,
    volume_change: volume_change_2d, root_change: root_change_2d,
    constitutive: constitutive_2d, init_stress: init_stress_2d,
    substeps: [(substep_2d_quadratic, 3, 1), (substep_2d_cubic, 4, 1)],
}

mls_mpm! {
    dim: 3, inv_dim: 0.33333334,
    vec: Vec3, mat: Mat3, ivec: IVec3, as_vec: as_vec3,
    stencil: stencil_3d, offset: offset_3d, row: row_3d,
    neo_hookean: neo_hookean_3d, fixed_corotated: fixed_corotated_3d, water: water_stress_3d,
    snow: snow_plasticity_3d, sand: sand_plasticity_3d, hencky: hencky_stress_3d,
    boundary: boundary_3d, collide: collide_3d, walls: walls_3d, keep_out: keep_out_3d,
    volume_change: volume_change_3d, root_change: root_change_3d,
    constitutive: constitutive_3d, init_stress: init_stress_3d,
    substeps: [(substep_3d_quadratic, 3, 3), (substep_3d_cubic, 4, 4)],
}

#[cfg(test)]
mod tests {
    use glam::{DMat3, Mat2, Mat3, Vec3};

    use super::*;

    #[test]
    fn volume_change_matches_the_determinant_in_f64() {
        let cases = [
            Mat3::from_cols(
                Vec3::new(0.1, -0.2, 0.05),
                Vec3::new(0.3, -0.15, 0.02),
                Vec3::new(-0.04, 0.07, 0.25),
            ),
            Mat3::from_diagonal(Vec3::new(3e-8, -1e-8, 2e-8)),
            Mat3::from_rotation_y(0.3) - Mat3::IDENTITY,
        ];
        for h in cases {
            // f32 rounds each of h's invariants: the error scales with h's size, not with
            // J - 1, which cancels for a rotation.
            let tol = 1e-6
                * h.to_cols_array()
                    .iter()
                    .map(|x| x.abs() as f64)
                    .sum::<f64>();
            let exact = (DMat3::IDENTITY + h.as_dmat3()).determinant() - 1.0;
            let got = volume_change_3d(h) as f64;
            assert!((got - exact).abs() <= tol, "{h}: {got} vs {exact}");
            let h2 = Mat2::from_cols(h.x_axis.truncate(), h.y_axis.truncate());
            let exact2 = (glam::DMat2::IDENTITY + h2.as_dmat2()).determinant() - 1.0;
            let got2 = volume_change_2d(h2) as f64;
            assert!((got2 - exact2).abs() <= tol, "{h2}: {got2} vs {exact2}");
        }
    }

    #[test]
    fn root_change_inverts_the_volume_change() {
        for dj in [-0.3f32, -1e-3, -4e-8, 0.0, 5e-8, 0.2] {
            let r3 = root_change_3d(dj) as f64;
            let r2 = root_change_2d(dj) as f64;
            let tol = 1e-6 * (dj.abs() as f64).max(1e-12);
            assert!(
                ((1.0 + r3).powi(3) - 1.0 - dj as f64).abs() <= tol,
                "3D {dj}: {r3}"
            );
            assert!(
                ((1.0 + r2).powi(2) - 1.0 - dj as f64).abs() <= tol,
                "2D {dj}: {r2}"
            );
        }
    }
}
