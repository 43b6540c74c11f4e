//! The materials: their constitutive models as `#[func]`s, shared by both backends and user
//! kernels, and the one table ([`material_table!`]) that every other part of the engine reads
//! a material from.
//!
//! Every elastic model returns the Kirchhoff stress `tau = P F^T` (P the first
//! Piola-Kirchhoff stress), which MLS-MPM's P2G uses directly:
//! `affine = -dt * V0 * (4 / dx^2) * tau + m C` (Hu et al. 2018, eq. 29).
//! Plasticity models return the projected deformation gradient.
//!
//! Each model is written once (`elastic.rs`, `water.rs`, `snow.rs`, `sand.rs`, in terms of
//! the dimension's `Vec`, `Mat` and `DIM`) and compiled for each dimension as [`dim2`] and
//! [`dim3`] (see [`crate::dim`]): `materials::dim2::neo_hookean`, `materials::dim3::neo_hookean`.
//!
//! A new material is its model file and one entry in [`material_table!`]: the solver's
//! `Material` variant, its defaults, validation and scene-file parameters, its rows in the
//! device table, its energy and its branch of the kernels' constitutive update all follow
//! from that entry.

pub mod dim2;
pub mod dim3;

/// The materials, one entry each. The table is read by two macros, which it is handed:
/// `solver::material`'s `define_materials!` builds the host's `Material` (variants, defaults,
/// validation, scene-file parameters, device rows, wave speed, energy) and
/// [`compile_models!`] compiles the model files and the constitutive update per dimension.
///
/// `models` lists the model files (each compiled per dimension, its public funcs in scope of
/// every `update`). An entry:
/// * `Variant(name = kind)`: the `Material` variant; `name` is the scene files'
///   model (with `-` for `_`), the preset `Material::name()` and the module of its update;
///   `kind` the material's number in the kernels (unique; `USER_KIND` is taken);
/// * `params`: the parameters, each `name: f32 | bool = default, valid range;` (ranges are
///   [`Range`]s; every material has a `density`);
/// * `properties`, host code over the parameters (by name): `lame` (mu, lambda; zero for
///   fluids), `row(dimension)` (the four floats the kernels get as `row`),
///   `energy(f, j, jp, mu, lambda)` (the strain energy per reference volume, in f64, of the
///   deformation gradient `f`, its determinant `j` and the plastic ratio `jp`);
/// * `update(h, c, tau, jp, mu, lambda, row)`: kernel code (a func body in the dimension's
///   `Vec`/`Mat`, the model files' funcs in scope) that returns the new displacement gradient
///   `h = F - I`, Kirchhoff stress and `jp` of a particle from its trial `h`, velocity
///   gradient `c`, old stress and `jp`.
/// * `modulus(h, tau, jp, mu, lambda, row)`: kernel code that returns the P-wave modulus `M`
///   of a particle's updated state (`h`, Kirchhoff stress `tau`, `jp`): its fastest
///   longitudinal wave runs at `sqrt(M / rho0)` through the current configuration, which sets
///   the adaptive time step. Along a principal stretch `s_i` of F this is
///   `d tau_ii / d ln s_i - tau_ii` (the Cauchy stress's tangent over the current density);
///   models that stiffen in compression (Tait water) or stretch (neo-Hookean) must say so
///   here, or an impact outruns the step. At rest it is the rest wave modulus
///   (`Material::wave_speed`): `lambda + 2 mu`, `bulk gamma` for water.
macro_rules! material_table {
    ($($consumer:ident)::+) => {
        $($consumer)::+! {
            models {
                brittle = "brittle.rs",
                elastic = "elastic.rs",
                sand = "sand.rs",
                snow = "snow.rs",
                water = "water.rs",
            }

            /// Weakly compressible water: Tait's `p = bulk (J^-gamma - 1)` and optional
            /// viscosity.
            Water(water = 0) {
                params {
                    /// kg/m^3 (kg/m^2 in 2D); Taichi's examples' scale.
                    density: f32 = 1000.0, Range::POSITIVE;
                    /// Pa: a tenth of real water's stiffness divided by gamma keeps the sound
                    /// speed near 26 m/s.
                    bulk: f32 = 1e5, Range::POSITIVE;
                    gamma: f32 = 7.0, Range::POSITIVE;
                    /// Dynamic viscosity, Pa s.
                    viscosity: f32 = 0.0, Range::NON_NEGATIVE;
                    /// Water that holds no tension: `J` is clamped to at most 1, so pressure
                    /// never goes negative and water neither hangs from walls nor sticks
                    /// together in jets (the density threshold of Taichi's tuning advice).
                    /// Off, Tait's law pulls expanded water back together, as a liquid with
                    /// surface cohesion would.
                    free_surface: bool = true;
                }
                properties {
                    lame = (0.0, 0.0);
                    row(_dimension, _cell) = [bulk, gamma, viscosity, f32::from(u8::from(free_surface))];
                    energy(_f, j, _jp, _mu, _lambda) = energy::tait(j, bulk.into(), gamma.into());
                }
                update(h, c, _tau, jp, _mu, _lambda, row) {
                    // Water keeps only its volume: shear in F would never relax. With a free
                    // surface (row.w) it holds no tension: J never exceeds 1.
                    let mut dj = volume_change(h);
                    if row.w > 0.0 {
                        dj = min(dj, 0.0);
                    }
                    (volume_only(dj), water_stress(dj, c, row.x, row.y, row.z), jp)
                }
                modulus(h, _tau, _jp, _mu, _lambda, row) {
                    // c^2 = dp/drho = bulk gamma J^(1 - gamma) / rho0: compressed by a
                    // tenth, water carries sound 1.37x faster (gamma = 7).
                    let j = max(1.0 + volume_change(h), 1e-6);
                    row.x * row.y * pow(j, 1.0 - row.y)
                }
            }

            /// Neo-Hookean elastic solid.
            NeoHookean(neo_hookean = 1) {
                params {
                    density: f32 = 1000.0, Range::POSITIVE;
                    /// Young's modulus, Pa.
                    youngs: f32 = 1e5, Range::POSITIVE;
                    poisson: f32 = 0.3, Range::POISSON;
                }
                properties {
                    lame = lame(youngs, poisson);
                    row(_dimension, _cell) = [0.0; 4];
                    energy(f, j, _jp, mu, lambda) = energy::neo_hookean(f, j, mu, lambda);
                }
                update(h, _c, _tau, jp, mu, lambda, _row) {
                    (h, neo_hookean(h, mu, lambda), jp)
                }
                modulus(h, _tau, _jp, mu, lambda, _row) {
                    neo_hookean_modulus(h, mu, lambda)
                }
            }

            /// Fixed-corotated elastic solid (jelly).
            FixedCorotated(fixed_corotated = 2) {
                params {
                    density: f32 = 1000.0, Range::POSITIVE;
                    youngs: f32 = 1e5, Range::POSITIVE;
                    poisson: f32 = 0.3, Range::POISSON;
                }
                properties {
                    lame = lame(youngs, poisson);
                    row(_dimension, _cell) = [0.0; 4];
                    energy(f, j, _jp, mu, lambda) = energy::fixed_corotated(f, j, mu, lambda);
                }
                update(h, _c, _tau, jp, mu, lambda, _row) {
                    (h, fixed_corotated(Mat::IDENTITY + h, mu, lambda), jp)
                }
                modulus(h, _tau, _jp, mu, lambda, _row) {
                    fixed_corotated_modulus(h, mu, lambda)
                }
            }

            /// A brittle solid: fixed corotated until its largest principal stress reaches
            /// `strength`, then cracking with exponential softening whose crack band (one
            /// cell wide) dissipates `fracture_energy` per unit crack area (see
            /// `brittle.rs`). The particle's `jp` holds its integrity, 1 - damage.
            Brittle(brittle = 6) {
                params {
                    density: f32 = 1000.0, Range::POSITIVE;
                    youngs: f32 = 1e5, Range::POSITIVE;
                    poisson: f32 = 0.3, Range::POISSON;
                    /// Tensile strength, Pa.
                    strength: f32 = 1e3, Range::POSITIVE;
                    /// J/m^2 (J/m in 2D): the work that opens a unit area of crack.
                    fracture_energy: f32 = 10.0, Range::POSITIVE;
                }
                properties {
                    lame = lame(youngs, poisson);
                    row(_dimension, cell) = {
                        // A band one cell wide dissipates G_f / cell per volume: the area
                        // under the law, strength (onset / 2 + soft).
                        let onset = strength / youngs;
                        let soft = fracture_energy / (cell * strength) - 0.5 * onset;
                        [strength, youngs, soft, 0.0]
                    };
                    // Intact (jp = 1) exact; a damaged particle's energy scaled by its
                    // integrity (the tensile part alone is degraded: an estimate).
                    energy(f, j, jp, mu, lambda) = jp * energy::fixed_corotated(f, j, mu, lambda);
                }
                update(h, _c, _tau, jp, mu, lambda, row) {
                    brittle_update(h, jp, mu, lambda, row)
                }
                modulus(h, _tau, jp, mu, lambda, _row) {
                    // The intact modulus weighted by the integrity, and the rest modulus for
                    // the compression a crack keeps: a broken particle may be stretched far
                    // without stress, which the intact modulus would read as a fast wave.
                    jp * fixed_corotated_modulus(h, mu, lambda) + (1.0 - jp) * (lambda + 2.0 * mu)
                }
            }

            /// Snow: fixed-corotated with plasticity and hardening (Stomakhin et al. 2013,
            /// with the paper's parameters).
            Snow(snow = 3) {
                params {
                    density: f32 = 400.0, Range::POSITIVE;
                    youngs: f32 = 1.4e5, Range::POSITIVE;
                    poisson: f32 = 0.2, Range::POISSON;
                    /// Critical compression, 2.5e-2 in the paper.
                    theta_c: f32 = 2.5e-2, Range::open(0.0, 1.0);
                    /// Critical stretch, 7.5e-3 in the paper.
                    theta_s: f32 = 7.5e-3, Range::POSITIVE;
                    /// Hardening coefficient, 10 in the paper.
                    hardening: f32 = 10.0, Range::NON_NEGATIVE;
                }
                properties {
                    lame = lame(youngs, poisson);
                    row(_dimension, _cell) = [theta_c, theta_s, hardening, 0.0];
                    energy(f, j, jp, mu, lambda) = {
                        let hard = (f64::from(hardening) * (1.0 - jp)).exp();
                        energy::fixed_corotated(f, j, mu * hard, lambda * hard)
                    };
                }
                update(h, _c, _tau, jp, mu, lambda, row) {
                    let (hp, jp_new, r) = snow_return(h, jp, row.x, row.y);
                    let hard = snow_hardening(jp_new, row.z);
                    let tau = fixed_corotated_of(Mat::IDENTITY + hp, r, mu * hard, lambda * hard);
                    (hp, tau, jp_new)
                }
                modulus(h, _tau, jp, mu, lambda, row) {
                    // Fixed corotated with the hardened moduli.
                    snow_hardening(jp, row.z) * fixed_corotated_modulus(h, mu, lambda)
                }
            }

            /// Sand: Drucker-Prager plasticity (Klar et al. 2016, with their values for dry
            /// sand).
            Sand(sand = 4) {
                params {
                    density: f32 = 2200.0, Range::POSITIVE;
                    youngs: f32 = 3.537e5, Range::POSITIVE;
                    poisson: f32 = 0.3, Range::POISSON;
                    /// Friction angle in degrees (30-35 for dry sand).
                    friction_angle: f32 = 30.0, Range::closed_open(0.0, 90.0);
                    /// Cohesion as a tensile strain (0 for dry sand).
                    cohesion: f32 = 0.0, Range::NON_NEGATIVE;
                }
                properties {
                    lame = lame(youngs, poisson);
                    row(dimension, _cell) = {
                        let phi = friction_angle.to_radians();
                        let alpha = if dimension == 2 {
                            dim2::drucker_prager_alpha(phi)
                        } else {
                            dim3::drucker_prager_alpha(phi)
                        };
                        [alpha, cohesion, 0.0, 0.0]
                    };
                    energy(f, _j, _jp, mu, lambda) = energy::hencky(f, mu, lambda);
                }
                update(h, _c, _tau, jp, mu, lambda, row) {
                    let (hp, u, sig) = sand_return(h, mu, lambda, row.x, row.y);
                    (hp, hencky_stress_of(u, sig, mu, lambda), jp)
                }
                modulus(_h, tau, _jp, mu, lambda, _row) {
                    // Hencky: lambda + 2 mu - tau_ii, stiffer under pressure.
                    let (lowest, _hi) = eigen_bounds(tau);
                    lambda + 2.0 * mu - lowest
                }
            }
        }
    };
}
pub(crate) use material_table;

/// The kind of `Material::User`, whose stress a user kernel writes (no table entry may take
/// it).
pub const USER_KIND: i32 = 5;

/// Whether F-bar anti-locking (`Settings::f_bar`) applies to a kind: the hyperelastic solids
/// (`NeoHookean` = 1, `FixedCorotated` = 2), whose stress is a function of F alone. Water
/// keeps only its volume already; the plastic models' return mapping would have to be redone
/// on F-bar.
#[crate::func]
pub fn f_bar_applies(kind: i32) -> bool {
    kind == 1 || kind == 2
}

/// Compiles, in a dimension's module ([`dim2`], [`dim3`]), the shared strain measures, each
/// model file of [`material_table!`] (its public funcs re-exported), and `constitutive`, the
/// update of a particle of any kind: the entries' `update`s, one branch each.
macro_rules! compile_models {
    (
        models { $($model:ident = $file:literal),* $(,)? }
        $(
        $(#[$doc:meta])*
        $variant:ident($name:ident = $kind:literal) {
            params { $($params:tt)* }
            properties { $($properties:tt)* }
            update($h:ident, $c:ident, $tau:ident, $jp:ident, $mu:ident, $lambda:ident, $row:ident)
                { $($update:tt)* }
            modulus($mh:ident, $mtau:ident, $mjp:ident, $mmu:ident, $mlambda:ident, $mrow:ident)
                { $($modulus:tt)* }
        }
    )*) => {
        #[path = "strain.rs"]
        #[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
        mod strain;
        pub use strain::*;

        $(
            #[path = $file]
            #[allow(clippy::duplicate_mod)] // compiled once per dimension, on purpose
            mod $model;
            pub use $model::*;
        )*

        /// The entries' updates, one module each.
        pub mod updates {$(
            pub mod $name {
                #[allow(unused_imports)]
                use super::super::*;
                #[doc = concat!("The constitutive update of `Material::", stringify!($variant), "`.")]
                #[allow(clippy::too_many_arguments)]
                #[$crate::func]
                pub fn update($h: Mat, $c: Mat, $tau: Mat, $jp: f32, $mu: f32, $lambda: f32, $row: Vec4)
                    -> (Mat, Mat, f32) { $($update)* }

                #[doc = concat!("The P-wave modulus of a state of `Material::", stringify!($variant), "`.")]
                #[$crate::func]
                pub fn modulus($mh: Mat, $mtau: Mat, $mjp: f32, $mmu: f32, $mlambda: f32, $mrow: Vec4)
                    -> f32 { $($modulus)* }
            }
        )*}

        /// One particle's constitutive update: the trial displacement gradient `h = F - I`
        /// through the update of its material's `kind`. Returns `(h, tau, Jp)`. `elastic` is
        /// `(mu, lambda, -, -)`, `params` the material's row (see `Material`). User materials
        /// keep `tau`, which their hook writes. `kinds` has bit `k` set for each kind present
        /// (`MaterialTable::kinds`): a kernel that specialises on it compiles only their
        /// updates. Inlined always: as a call on the CPU it took a sixth of the solver's
        /// G2P time, passing and returning its matrices through memory.
        #[inline(always)]
        #[$crate::func]
        pub fn constitutive(
            kinds: u32,
            kind: i32,
            h: Mat,
            c: Mat,
            tau: Mat,
            jp: f32,
            elastic: Vec4,
            params: Vec4,
        ) -> (Mat, Mat, f32) {
            let mu = elastic.x;
            let lambda = elastic.y;
            let mut h_new = h;
            let mut tau_new = tau;
            let mut jp_new = jp;
            $(if kind == $kind && (kinds & (1u32 << ($kind as u32))) != 0u32 {
                let (h1, tau1, jp1) = updates::$name::update(h, c, tau, jp, mu, lambda, params);
                h_new = h1;
                tau_new = tau1;
                jp_new = jp1;
            } else)* {}
            (h_new, tau_new, jp_new)
        }

        /// The P-wave modulus of a particle's updated state (see [`material_table!`]), so
        /// that its fastest wave runs at `sqrt(M / rho0)`; a user material's rest modulus
        /// `lambda + 2 mu` (its stress is the hook's: the engine cannot see it stiffen).
        /// `kinds` as for [`constitutive`].
        #[$crate::func]
        pub fn wave_modulus(
            kinds: u32,
            kind: i32,
            h: Mat,
            tau: Mat,
            jp: f32,
            elastic: Vec4,
            params: Vec4,
        ) -> f32 {
            let mu = elastic.x;
            let lambda = elastic.y;
            let mut modulus = lambda + 2.0 * mu;
            $(if kind == $kind && (kinds & (1u32 << ($kind as u32))) != 0u32 {
                modulus = updates::$name::modulus(h, tau, jp, mu, lambda, params);
            } else)* {}
            modulus
        }
    };
}
pub(crate) use compile_models;

/// Lamé parameters from Young's modulus and Poisson's ratio: `(mu, lambda)`.
pub fn lame(youngs: f32, poisson: f32) -> (f32, f32) {
    (
        youngs / (2.0 * (1.0 + poisson)),
        youngs * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson)),
    )
}

#[cfg(test)]
mod tests {
    use glam::{DMat3, Mat2, Mat3, Vec2, Vec3};

    use super::{dim2, dim3, lame};

    fn close2(a: Mat2, b: Mat2, tol: f32) -> bool {
        (a - b).to_cols_array().iter().all(|x| x.abs() <= tol)
    }
    fn close3(a: Mat3, b: Mat3, tol: f32) -> bool {
        (a - b).to_cols_array().iter().all(|x| x.abs() <= tol)
    }

    /// Tait's pressure `k (J^-gamma - 1)` in the Kirchhoff stress `-p J I`, against the
    /// closed form in f64: the J-fluid's `gamma = 1` (where it is `k (J - 1)`, to f32's
    /// rounding of the product even for changes of 1e-6, which `1 / J - 1` loses) and
    /// water's 7, compressed and stretched.
    #[test]
    fn water_stress_is_taits_pressure() {
        let bulk = 400.0f32;
        for gamma in [1.0f32, 7.0] {
            for dj in [-0.1f32, -1e-3, -1e-6, 1e-6, 1e-4, 0.1] {
                let (jd, gd, kd) = (1.0 + dj as f64, gamma as f64, bulk as f64);
                let want = (-kd * (jd.powf(-gd) - 1.0) * jd) as f32;
                let tol = match gamma == 1.0 {
                    true => 2.0 * f32::EPSILON * want.abs(),
                    // A few roundings of `J^-gamma` near 1, each `bulk` times f32's epsilon.
                    false => 4.0 * f32::EPSILON * bulk * gamma + 1e-6 * want.abs(),
                };
                let got2 = dim2::water_stress(dj, Mat2::ZERO, bulk, gamma, 0.0);
                let got3 = dim3::water_stress(dj, Mat3::ZERO, bulk, gamma, 0.0);
                assert!(
                    close2(got2, Mat2::from_diagonal(Vec2::splat(want)), tol),
                    "gamma {gamma}, J - 1 = {dj}: {got2} against {want}"
                );
                assert!(
                    close3(got3, Mat3::from_diagonal(Vec3::splat(want)), tol),
                    "gamma {gamma}, J - 1 = {dj}: {got3} against {want}"
                );
            }
        }
    }

    #[test]
    fn rest_state_is_stress_free() {
        let (mu, la) = lame(1e3, 0.2);
        assert!(close2(
            dim2::neo_hookean(Mat2::ZERO, mu, la),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::neo_hookean(Mat3::ZERO, mu, la),
            Mat3::ZERO,
            1e-4
        ));
        assert!(close2(
            dim2::fixed_corotated(Mat2::IDENTITY, mu, la),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::fixed_corotated(Mat3::IDENTITY, mu, la),
            Mat3::ZERO,
            1e-4
        ));
        assert!(close2(
            dim2::water_stress(0.0, Mat2::ZERO, 1e3, 7.0, 0.1),
            Mat2::ZERO,
            1e-4
        ));
        assert!(close3(
            dim3::water_stress(0.0, Mat3::ZERO, 1e3, 7.0, 0.1),
            Mat3::ZERO,
            1e-4
        ));
    }

    /// The wave moduli against the models' own stress: along principal stretches `s_i` the
    /// longitudinal modulus is `d tau_ii / d ln s_i - tau_ii`, here by central differences
    /// of each model's stress function, and `wave_modulus` must give the largest over `i`
    /// (exactly for a diagonal F, where its eigenvalue bounds are exact), and never less
    /// for a rotated F. A model whose modulus ignored compression or stretch fails.
    #[test]
    fn wave_moduli_are_the_stress_tangents_of_each_model() {
        macro_rules! check {
            ($dim:ident, $mat:ident, $vec:ident, $stretches:expr, $rotation:expr) => {{
                let (mu, la) = lame(1e4, 0.3);
                let (bulk, gamma, jp, hardening) = (2e5f32, 7.0f32, 0.97f32, 10.0f32);
                let hard = $dim::snow_hardening(jp, hardening);
                let zero = $mat::ZERO;
                // (kind, stress of F, params row)
                let models: [(i32, &dyn Fn($mat) -> $mat, glam::Vec4); 5] = [
                    (0, &|f: $mat| $dim::water_stress(f.determinant() - 1.0, zero, bulk, gamma, 0.0),
                        glam::Vec4::new(bulk, gamma, 0.0, 1.0)),
                    (1, &|f| $dim::neo_hookean(f - $mat::IDENTITY, mu, la), glam::Vec4::ZERO),
                    (2, &|f| $dim::fixed_corotated(f, mu, la), glam::Vec4::ZERO),
                    (3, &|f| $dim::fixed_corotated(f, mu * hard, la * hard),
                        glam::Vec4::new(0.1, 0.1, hardening, 0.0)),
                    (4, &|f| $dim::hencky_stress(f, mu, la), glam::Vec4::ZERO),
                ];
                let elastic = glam::Vec4::new(mu, la, 1000.0, 0.0);
                for s in $stretches {
                    let s = $vec::from_array(s);
                    for (kind, stress, row) in &models {
                        let delta = 1e-3f32;
                        let exact = (0..s.to_array().len())
                            .map(|i| {
                                let mut up = s;
                                let mut down = s;
                                up[i] *= delta.exp();
                                down[i] *= (-delta).exp();
                                let tangent = (stress($mat::from_diagonal(up)).col(i)[i]
                                    - stress($mat::from_diagonal(down)).col(i)[i])
                                    / (2.0 * delta);
                                tangent - stress($mat::from_diagonal(s)).col(i)[i]
                            })
                            .fold(f32::MIN, f32::max);
                        let modulus = |f: $mat| {
                            $dim::wave_modulus(u32::MAX, *kind, f - $mat::IDENTITY, stress(f), jp, elastic, *row)
                        };
                        let diagonal = modulus($mat::from_diagonal(s));
                        assert!(
                            (diagonal - exact).abs() <= 2e-3 * exact,
                            "kind {kind}, stretches {s}: modulus {diagonal}, tangent {exact}"
                        );
                        let rotated = modulus($rotation * $mat::from_diagonal(s) * $rotation.transpose());
                        assert!(
                            rotated >= exact * (1.0 - 2e-3) && rotated <= 2.0 * exact,
                            "kind {kind}, stretches {s}, rotated: modulus {rotated}, tangent {exact}"
                        );
                    }
                }
            }};
        }
        check!(
            dim2,
            Mat2,
            Vec2,
            [[1.0, 1.0], [0.8, 1.0], [0.9, 0.9], [1.3, 0.95]],
            Mat2::from_angle(0.5)
        );
        check!(
            dim3,
            Mat3,
            Vec3,
            [[1.0, 1.0, 1.0], [0.85, 1.05, 1.2], [0.9, 0.9, 0.9]],
            (Mat3::from_rotation_y(0.4) * Mat3::from_rotation_x(-0.3))
        );
    }

    #[test]
    fn elastic_stress_is_frame_indifferent() {
        // tau(R F) = R tau(F) R^T for a rotation R.
        let (mu, la) = lame(1e3, 0.3);
        let f = Mat3::from_cols(
            Vec3::new(1.1, 0.05, -0.02),
            Vec3::new(0.1, 0.9, 0.03),
            Vec3::new(0.0, 0.04, 1.05),
        );
        let r = Mat3::from_rotation_y(0.7) * Mat3::from_rotation_x(-0.3);
        // Both models as functions of F (neo-Hookean takes F - I).
        let neo3 = |f: Mat3, mu, la| dim3::neo_hookean(f - Mat3::IDENTITY, mu, la);
        let neo2 = |f: Mat2, mu, la| dim2::neo_hookean(f - Mat2::IDENTITY, mu, la);
        let models3: [&dyn Fn(Mat3, f32, f32) -> Mat3; 2] = [&neo3, &dim3::fixed_corotated];
        for model in models3 {
            let lhs = model(r * f, mu, la);
            let rhs = r * model(f, mu, la) * r.transpose();
            assert!(close3(lhs, rhs, 1e-2), "{lhs:?} vs {rhs:?}");
        }
        let f2 = Mat2::from_cols(Vec2::new(1.2, 0.1), Vec2::new(-0.05, 0.8));
        let r2 = Mat2::from_angle(0.4);
        let models2: [&dyn Fn(Mat2, f32, f32) -> Mat2; 2] = [&neo2, &dim2::fixed_corotated];
        for model in models2 {
            assert!(close2(
                model(r2 * f2, mu, la),
                r2 * model(f2, mu, la) * r2.transpose(),
                1e-2
            ));
        }
    }

    #[test]
    fn uniaxial_stretch_pulls_back() {
        // A bar stretched along x is under tension along x (positive tau_xx).
        let (mu, la) = lame(1e3, 0.2);
        let f = Mat2::from_diagonal(Vec2::new(1.1, 1.0));
        assert!(dim2::neo_hookean(f - Mat2::IDENTITY, mu, la).x_axis.x > 0.0);
        assert!(dim2::fixed_corotated(f, mu, la).x_axis.x > 0.0);
        // Compressed water pushes out: negative (compressive) Kirchhoff stress is -p J < 0.
        assert!(dim2::water_stress(-0.1, Mat2::ZERO, 1e3, 7.0, 0.0).x_axis.x < 0.0);
    }

    #[test]
    fn snow_clamps_and_hardens() {
        let f = Mat3::from_diagonal(Vec3::new(1.2, 0.9, 1.0));
        let (he, jp) = dim3::snow_plasticity(f - Mat3::IDENTITY, 1.0, 2.5e-2, 4.5e-3);
        let fe = he + Mat3::IDENTITY;
        let d = Vec3::new(fe.x_axis.x, fe.y_axis.y, fe.z_axis.z);
        assert!(
            (d - Vec3::new(1.0045, 0.975, 1.0)).abs().max_element() < 1e-4,
            "{fe:?}"
        );
        // Plastic volume change: det(F) / det(Fe).
        assert!((jp - 1.2 * 0.9 / (1.0045 * 0.975)).abs() < 1e-4, "{jp}");
        assert!(dim3::snow_hardening(jp, 10.0) < 1.0);
        let (he2, jp2) = dim2::snow_plasticity(Mat2::ZERO, 1.0, 2.5e-2, 4.5e-3);
        assert!(close2(he2, Mat2::ZERO, 1e-5) && (jp2 - 1.0).abs() < 1e-6);
        // Inside the bounds the displacement gradient comes back exactly, however small.
        let tiny = Mat3::from_diagonal(Vec3::new(3e-8, -2e-8, 0.0));
        assert_eq!(
            dim3::snow_plasticity(tiny, 1.0, 2.5e-2, 4.5e-3),
            (tiny, 1.0)
        );
    }

    #[test]
    fn sand_projects_onto_the_cone() {
        let (mu, la) = lame(3.537e5, 0.3);
        let alpha = dim3::drucker_prager_alpha(30f32.to_radians());
        // Pure hydrostatic compression is inside the cone: unchanged.
        // (The models take and return the displacement gradient h = F - I.)
        let h = Mat3::from_diagonal(Vec3::splat(-0.02));
        assert_eq!(dim3::sand_plasticity(h, mu, la, alpha, 0.0), h);
        // Expansion without cohesion: the sand falls apart (F becomes a rotation).
        let h = Mat3::from_diagonal(Vec3::new(0.05, 0.02, 0.0));
        assert!(close3(
            dim3::sand_plasticity(h, mu, la, alpha, 0.0),
            Mat3::ZERO,
            1e-4
        ));
        // Strong shear under light compression yields: the deviatoric strain shrinks.
        let h = Mat2::from_diagonal(Vec2::new(0.1, -0.12));
        let fp = dim2::sand_plasticity(h, mu, la, alpha, 0.0) + Mat2::IDENTITY;
        let (sx, sy) = (fp.x_axis.x.ln(), fp.y_axis.y.ln());
        assert!(
            (sx - sy).abs() < (1.1f32.ln() - 0.88f32.ln()).abs(),
            "{fp:?}"
        );
    }

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
            let got = dim3::volume_change(h) as f64;
            assert!((got - exact).abs() <= tol, "{h}: {got} vs {exact}");
            let h2 = Mat2::from_cols(h.x_axis.truncate(), h.y_axis.truncate());
            let exact2 = (glam::DMat2::IDENTITY + h2.as_dmat2()).determinant() - 1.0;
            let got2 = dim2::volume_change(h2) as f64;
            assert!((got2 - exact2).abs() <= tol, "{h2}: {got2} vs {exact2}");
        }
    }

    /// Water's update keeps the trial state's volume change to the bit, sheds its shear, and
    /// with a free surface holds no tension.
    #[test]
    fn water_keeps_its_volume_change_exactly() {
        let shear = 0.3f32;
        for dj in [-0.2f32, -1e-3, -3e-8, 0.0, 4e-8, 1e-4, 0.15] {
            for free in [0.0f32, 1.0] {
                let want = if free > 0.0 { dj.min(0.0) } else { dj };
                let row = glam::Vec4::new(400.0, 1.0, 0.0, free);
                // A sheared trial state with volume change dj: F = diag(1 + dj, 1) + shear.
                let h2 = Mat2::from_cols(Vec2::new(dj, 0.0), Vec2::new(shear, 0.0));
                let h3 = Mat3::from_cols(
                    Vec3::new(dj, 0.0, 0.0),
                    Vec3::new(shear, 0.0, 0.0),
                    Vec3::new(0.0, shear, 0.0),
                );
                let (a2, a3) = (dim2::volume_change(h2), dim3::volume_change(h3));
                assert_eq!((a2, a3), (dj, dj), "trial states of {dj}");
                let (n2, _, _) =
                    dim2::updates::water::update(h2, Mat2::ZERO, Mat2::ZERO, 1.0, 0.0, 0.0, row);
                let (n3, _, _) =
                    dim3::updates::water::update(h3, Mat3::ZERO, Mat3::ZERO, 1.0, 0.0, 0.0, row);
                assert_eq!(dim2::volume_change(n2).to_bits(), want.to_bits(), "2D {dj}");
                assert_eq!(dim3::volume_change(n3).to_bits(), want.to_bits(), "3D {dj}");
                // No shear left: F is diagonal.
                assert_eq!(n2, Mat2::from_diagonal(Vec2::new(want, 0.0)));
                assert_eq!(n3, Mat3::from_diagonal(Vec3::new(want, 0.0, 0.0)));
            }
        }
    }

    #[test]
    fn root_change_inverts_the_volume_change() {
        for dj in [-0.3f32, -1e-3, -4e-8, 0.0, 5e-8, 0.2] {
            let r3 = dim3::root_change(dj) as f64;
            let r2 = dim2::root_change(dj) as f64;
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
