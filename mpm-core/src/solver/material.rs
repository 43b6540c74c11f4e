//! Materials as the host describes them, and their table on the device.
//!
//! `Material`'s variants, presets, validation, scene-file parameters, device rows, wave speed
//! and energy are generated from `materials::material_table!` by [`define_materials!`]; only
//! `Material::User` is written here.

use std::fmt;

use glam::{DMat3, Mat3, Vec4};

use super::error::{Result, SolverError};
use super::{energy, kernels};
use crate::materials::{dim2, dim3, lame, material_table, USER_KIND};
use crate::{BackendRef, Field};

/// The values a material parameter may take: an interval, finite either way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    low: f32,
    high: f32,
    /// Whether `low` itself is allowed (`high` never is).
    low_included: bool,
}

impl Range {
    /// Finite and above zero.
    pub const POSITIVE: Range = Range::open(0.0, f32::INFINITY);
    /// Finite and not below zero.
    pub const NON_NEGATIVE: Range = Range::closed_open(0.0, f32::INFINITY);
    /// Poisson's ratios of stable isotropic solids.
    pub const POISSON: Range = Range::open(-1.0, 0.5);

    /// `low < x < high`.
    pub const fn open(low: f32, high: f32) -> Range {
        Range {
            low,
            high,
            low_included: false,
        }
    }

    /// `low <= x < high`.
    pub const fn closed_open(low: f32, high: f32) -> Range {
        Range {
            low,
            high,
            low_included: true,
        }
    }

    pub fn contains(&self, x: f32) -> bool {
        let above = if self.low_included {
            x >= self.low
        } else {
            x > self.low
        };
        x.is_finite() && above && x < self.high
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let low = if self.low_included { "<=" } else { "<" };
        if self.high.is_finite() {
            write!(f, "{} {low} x < {}", self.low, self.high)
        } else {
            write!(
                f,
                "finite and {} {}",
                if self.low_included { ">=" } else { ">" },
                self.low
            )
        }
    }
}

/// A parameter's value as a scene file gives it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamValue {
    Number(f64),
    Bool(bool),
}

/// The types a material parameter can have.
trait Param: Sized + Copy {
    /// What a value of the type is, for messages.
    const WHAT: &'static str;
    /// Whether the value lies in `range` (a flag has no range).
    fn valid(self, range: Range) -> bool;
    fn from_value(value: ParamValue) -> Option<Self>;
}

/// A parameter of `model` from a scene file's value.
fn parameter<T: Param>(model: &str, key: &str, value: ParamValue) -> Result<T> {
    T::from_value(value).ok_or_else(|| {
        SolverError::InvalidParameter(format!("model {model}: `{key}` is {}", T::WHAT))
    })
}

impl Param for f32 {
    const WHAT: &'static str = "a number";
    fn valid(self, range: Range) -> bool {
        range.contains(self)
    }
    fn from_value(value: ParamValue) -> Option<Self> {
        match value {
            ParamValue::Number(x) => Some(x as f32),
            ParamValue::Bool(_) => None,
        }
    }
}

impl Param for bool {
    const WHAT: &'static str = "true or false";
    fn valid(self, _: Range) -> bool {
        true
    }
    fn from_value(value: ParamValue) -> Option<Self> {
        match value {
            ParamValue::Bool(b) => Some(b),
            ParamValue::Number(_) => None,
        }
    }
}

/// Builds `Material` from the material table (see `materials::material_table!` for an
/// entry's parts). Parameters and the names an entry's code gives its arguments are bound by
/// name in each arm, so the entries read like ordinary functions of their parameters.
macro_rules! define_materials {
    (
        models { $($model:ident = $file:literal),* $(,)? }
        $(
        $(#[$doc:meta])*
        $variant:ident($name:ident = $kind:literal) {
            params {$(
                $(#[$param_doc:meta])*
                $param:ident: $ty:ty = $default:expr $(, $range:expr)?;
            )*}
            properties {
                lame = $lame:expr;
                row($dimension:ident, $cell:ident) = $row:expr;
                energy($f:ident, $j:ident, $jp:ident, $mu:ident, $lambda:ident) = $energy:expr;
            }
            update $($update:tt)*
        }
        )*
    ) => {
        /// A material. Densities are in kg/m^3 (or per m^2 in 2D), moduli in Pa.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Material {
            $(
                $(#[$doc])*
                $variant { $($(#[$param_doc])* $param: $ty,)* },
            )*
            /// A material whose stress a user kernel writes into `Particles::tau` (registered
            /// with `Solver::add_stress_hook`). `params` reach the kernels in the material's
            /// `params` row; `youngs` and `poisson` set its Lamé row and bound the time step.
            User {
                name: String,
                density: f32,
                youngs: f32,
                poisson: f32,
                params: [f32; 4],
            },
        }

        // Each kind once, and not the user materials'.
        const _: () = assert!(all_distinct(&[$($kind,)* USER_KIND]));

        impl Material {
            $(
                #[doc = concat!("`", stringify!($variant), "` with its defaults.")]
                pub fn $name() -> Self {
                    Material::$variant { $($param: $default,)* }
                }
            )*

            /// The models a scene file can name.
            pub fn models() -> Vec<String> {
                vec![$(model_name(stringify!($name)),)*]
            }

            /// The parameters of a model, in the table's order.
            pub fn parameters(model: &str) -> Option<&'static [&'static str]> {
                $(if model == model_name(stringify!($name)) {
                    return Some(&[$(stringify!($param)),*]);
                })*
                None
            }

            /// A model's defaults with the given parameters set; an unknown model or
            /// parameter, or a value of the wrong type, is an error that names it. (The
            /// values' ranges are checked by `validate`.)
            pub fn from_parameters(model: &str, given: &[(&str, ParamValue)]) -> Result<Self> {
                $(if model == model_name(stringify!($name)) {
                    $(let mut $param: $ty = $default;)*
                    for &(key, value) in given {
                        $(if key == stringify!($param) {
                            $param = parameter(model, key, value)?;
                            continue;
                        })*
                        return Err(SolverError::InvalidParameter(format!(
                            "model {model} takes no `{key}` (it takes {:?})",
                            [$(stringify!($param)),*]
                        )));
                    }
                    return Ok(Material::$variant { $($param,)* });
                })*
                Err(SolverError::InvalidParameter(format!(
                    "unknown material model `{model}`; the models are {:?}",
                    Self::models()
                )))
            }

            /// A short name for messages: the scene files' model name, or the user's.
            pub fn name(&self) -> String {
                match self {
                    $(Material::$variant { .. } => model_name(stringify!($name)),)*
                    Material::User { name, .. } => name.clone(),
                }
            }

            pub fn density(&self) -> f32 {
                match self {
                    $(Material::$variant { density, .. })|* | Material::User { density, .. } => {
                        *density
                    }
                }
            }

            /// Checks the parameters' ranges; the error names the material and the parameter.
            pub fn validate(&self) -> Result<()> {
                let bad = |what: &str, value: String, range: String| {
                    Err(SolverError::InvalidParameter(format!(
                        "{} material: {what} = {value} is out of range ({range})",
                        self.name()
                    )))
                };
                #[allow(unused_variables)]
                match *self {
                    $(Material::$variant { $($param,)* } => {
                        $($(
                            if !Param::valid($param, $range) {
                                return bad(stringify!($param), $param.to_string(), $range.to_string());
                            }
                        )?)*
                    })*
                    Material::User {
                        density,
                        youngs,
                        poisson,
                        ref params,
                        ..
                    } => {
                        for (what, value, range) in [
                            ("density", density, Range::POSITIVE),
                            ("youngs", youngs, Range::POSITIVE),
                            ("poisson", poisson, Range::POISSON),
                        ] {
                            if !range.contains(value) {
                                return bad(what, value.to_string(), range.to_string());
                            }
                        }
                        if let Some(p) = params.iter().find(|p| !p.is_finite()) {
                            return bad("params", p.to_string(), "finite".into());
                        }
                    }
                }
                Ok(())
            }

            /// `(mu, lambda)`; fluids have none.
            #[allow(unused_variables)]
            pub fn lame(&self) -> (f32, f32) {
                match *self {
                    $(Material::$variant { $($param,)* } => $lame,)*
                    Material::User { youngs, poisson, .. } => lame(youngs, poisson),
                }
            }

            /// The fastest elastic wave at rest, `sqrt(M / rho)` for the P-wave modulus `M`
            /// (the model's `modulus` at rest): `lambda + 2 mu` for solids, `bulk gamma` for
            /// Tait water. Deformed states carry waves at the speed of their own modulus
            /// (`materials::dim3::wave_modulus`).
            pub fn wave_speed(&self) -> f32 {
                let (mu, lambda) = self.lame();
                // A row's cell-size dependent entries (the crack band) leave it alone.
                let (kind, row) = self.kind_and_row(3, 1.0);
                let lame = Vec4::new(mu, lambda, 0.0, 0.0);
                let modulus =
                    dim3::wave_modulus(u32::MAX, kind, Mat3::ZERO, Mat3::ZERO, 1.0, lame, row);
                (modulus / self.density()).sqrt()
            }

            /// The material's kind and the rows the kernels read in `dimension` on cells of
            /// size `cell`: `(mu, lambda, density, wave speed)` and the model's own.
            fn rows(&self, dimension: usize, cell: f32) -> (i32, Vec4, Vec4) {
                let (mu, lambda) = self.lame();
                let elastic = Vec4::new(mu, lambda, self.density(), self.wave_speed());
                let (kind, row) = self.kind_and_row(dimension, cell);
                (kind, elastic, row)
            }

            /// The material's kind and its model's row in `dimension` on cells of size
            /// `cell`.
            #[allow(unused_variables)]
            fn kind_and_row(&self, dimension: usize, cell: f32) -> (i32, Vec4) {
                let (kind, row): (i32, [f32; 4]) = match *self {
                    $(Material::$variant { $($param,)* } => {
                        let ($dimension, $cell) = (dimension, cell);
                        ($kind, $row)
                    })*
                    Material::User { params, .. } => (USER_KIND, params),
                };
                (kind, Vec4::from_array(row))
            }

            /// Strain energy per unit reference volume of the displacement gradient `h` and
            /// plastic ratio `jp`, in f64; `None` for user materials.
            #[allow(unused_variables)]
            pub(crate) fn energy_density(&self, h: DMat3, jp: f64) -> Option<f64> {
                let f = DMat3::IDENTITY + h;
                let j = f.determinant();
                let (mu, lambda) = self.lame();
                let (mu, lambda) = (f64::from(mu), f64::from(lambda));
                Some(match *self {
                    $(Material::$variant { $($param,)* } => {
                        let ($f, $j, $jp, $mu, $lambda) = (f, j, jp, mu, lambda);
                        $energy
                    })*
                    Material::User { .. } => return None,
                })
            }
        }
    };
}

material_table!(define_materials);

/// The scene files' name of a model: its table name with `-` for `_`.
fn model_name(table_name: &str) -> String {
    table_name.replace('_', "-")
}

const fn all_distinct(kinds: &[i32]) -> bool {
    let mut i = 0;
    while i < kinds.len() {
        let mut j = i + 1;
        while j < kinds.len() {
            if kinds[i] == kinds[j] {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// A material's thermal properties (see `Settings::heat`). Temperatures are in kelvin by
/// convention; any one unit works, the curve's included.
#[derive(Clone, Debug, PartialEq)]
pub struct Thermal {
    /// Thermal conductivity `k`, W/(m K) (W/K in 2D, per metre of depth).
    pub conductivity: f32,
    /// Specific heat capacity `c`, J/(kg K).
    pub specific_heat: f32,
    /// The temperature particles of the material start at when added.
    pub temperature: f32,
    /// Temperature-dependent stiffness: points `(temperature, scale)` in increasing
    /// temperature, at most [`Thermal::MAX_POINTS`], interpolated linearly and held beyond the
    /// ends. The scale multiplies the shear modulus `mu` (the bulk response stays, so a
    /// softened solid keeps its volume); at scale 0 the material is molten: a liquid whose
    /// deformation keeps only its volume, as an isotropic `J^(1/d) I`, so that it sets again
    /// stress-free in its new shape when it cools. Empty: no dependence.
    pub softening: Vec<(f32, f32)>,
}

impl Default for Thermal {
    /// No conduction, water's specific heat, 293.15 K, no softening.
    fn default() -> Self {
        Thermal {
            conductivity: 0.0,
            specific_heat: 4186.0,
            temperature: 293.15,
            softening: Vec::new(),
        }
    }
}

impl Thermal {
    /// Points a softening curve holds at most.
    pub const MAX_POINTS: usize = 4;

    /// Checks the ranges, and that `material` can soften as asked: water and user materials
    /// have no shear modulus of the engine's to scale, and sand's return mapping divides by
    /// it (its scale stays above 0). The error names the material and the value.
    pub fn validate(&self, material: &Material) -> Result<()> {
        let bad = |m: String| {
            Err(SolverError::InvalidParameter(format!(
                "{} material's thermal properties: {m}",
                material.name()
            )))
        };
        if !Range::NON_NEGATIVE.contains(self.conductivity) {
            return bad(format!(
                "conductivity = {} must be finite and >= 0",
                self.conductivity
            ));
        }
        if !Range::POSITIVE.contains(self.specific_heat) {
            return bad(format!(
                "specific_heat = {} must be finite and > 0",
                self.specific_heat
            ));
        }
        if !self.temperature.is_finite() {
            return bad(format!("temperature = {} is not finite", self.temperature));
        }
        let curve = &self.softening;
        if curve.is_empty() {
            return Ok(());
        }
        if curve.len() > Self::MAX_POINTS {
            return bad(format!(
                "`softening` has {} points, at most {} are allowed",
                curve.len(),
                Self::MAX_POINTS
            ));
        }
        if let Some((t, s)) = curve
            .iter()
            .find(|(t, s)| !t.is_finite() || !Range::NON_NEGATIVE.contains(*s))
        {
            return bad(format!(
                "`softening` point ({t}, {s}): the temperature must be finite, the scale \
                 finite and >= 0"
            ));
        }
        if curve.windows(2).any(|w| w[1].0 <= w[0].0) {
            return bad(format!(
                "`softening` temperatures {:?} must increase",
                curve.iter().map(|p| p.0).collect::<Vec<_>>()
            ));
        }
        match material {
            Material::Water { .. } | Material::User { .. } => bad(
                "`softening` scales the shear modulus, which this material does not have"
                    .to_string(),
            ),
            Material::Sand { .. } if curve.iter().any(|p| p.1 <= 0.0) => {
                bad("sand cannot melt: its `softening` scales must stay above 0".to_string())
            }
            _ => Ok(()),
        }
    }

    /// Thermal diffusivity `k / (rho c)`, m^2/s.
    pub fn diffusivity(&self, density: f32) -> f32 {
        self.conductivity / (density * self.specific_heat)
    }

    /// The softening curve's temperatures and scales as two table rows, padded with its last
    /// point (scale 1 everywhere without one).
    fn curve_rows(&self) -> [Vec4; 2] {
        let point = |i: usize| match self.softening.len() {
            0 => (0.0, 1.0),
            n => self.softening[i.min(n - 1)],
        };
        [
            Vec4::from_array(std::array::from_fn(|i| point(i).0)),
            Vec4::from_array(std::array::from_fn(|i| point(i).1)),
        ]
    }
}

/// Checks a surface tension coefficient `sigma` for the material called `name`, given how
/// many other materials have one: finite and >= 0, and at most `SURFACE_CHANNELS` materials
/// with one (scene files check their materials with it before building a solver).
pub fn check_surface_tension(name: &str, sigma: f32, others: usize) -> Result<()> {
    let bad = |m: String| {
        Err(SolverError::InvalidParameter(format!(
            "{name} material: {m}"
        )))
    };
    if !Range::NON_NEGATIVE.contains(sigma) {
        return bad(format!("surface_tension = {sigma} must be finite and >= 0"));
    }
    if sigma > 0.0 && others >= kernels::SURFACE_CHANNELS as usize {
        return bad(format!(
            "at most {} materials have a surface tension",
            kernels::SURFACE_CHANNELS
        ));
    }
    Ok(())
}

/// Rows per material in the device table.
const MATERIAL_ROWS: usize = kernels::MATERIAL_ROWS as usize;

/// The index of a material in a solver's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaterialId(pub i32);

/// The materials of a solver, and their table on the device: `kernels::MATERIAL_ROWS` rows
/// per material in one field (one storage buffer: the substep kernel binds many), the row
/// of material `id` at `id * MATERIAL_ROWS`: `(mu, lambda, density, wave speed)`, the
/// model's own row (`Material::User`'s `params`), `(kind, conductivity, specific heat,
/// surface channel)` (the channel of its colour, -1 without surface tension), the softening
/// curve's temperatures and its scales; after all materials' rows, the colour channels'
/// surface tension coefficients (`kernels::TENSION_ROW`).
pub struct MaterialTable {
    pub materials: Vec<Material>,
    pub thermal: Vec<Thermal>,
    /// Each material's surface tension coefficient (0: none; see
    /// `Settings::surface_tension`).
    pub tension: Vec<f32>,
    /// 2 or 3: sand's cone coefficient depends on it.
    dimension: usize,
    /// The grid's cell size: a brittle material's crack band is a cell wide.
    cell: f32,
    pub rows: Field<Vec4>,
}

/// Materials one solver holds at most.
pub const MAX_MATERIALS: usize = kernels::MAX_MATERIALS as usize;

impl MaterialTable {
    pub fn new(backend: &BackendRef, dimension: usize, cell: f32) -> Result<Self> {
        Ok(MaterialTable {
            materials: Vec::new(),
            thermal: Vec::new(),
            tension: Vec::new(),
            dimension,
            cell,
            rows: Field::new(backend, [kernels::TENSION_ROW as u32 + 1])?,
        })
    }

    /// Validates and adds a material with the default thermal properties, uploading the
    /// table.
    pub fn add(&mut self, material: Material) -> Result<MaterialId> {
        material.validate()?;
        if self.materials.len() == MAX_MATERIALS {
            return Err(SolverError::InvalidParameter(format!(
                "a solver holds at most {MAX_MATERIALS} materials"
            )));
        }
        self.materials.push(material);
        self.thermal.push(Thermal::default());
        self.tension.push(0.0);
        self.upload()?;
        Ok(MaterialId(self.materials.len() as i32 - 1))
    }

    /// The material `id`, or an error that says there is none.
    pub(crate) fn existing(&self, id: MaterialId) -> Result<&Material> {
        self.get(id).ok_or_else(|| {
            SolverError::InvalidParameter(format!(
                "material id {} is not one of the {} materials",
                id.0,
                self.materials.len()
            ))
        })
    }

    /// Validates and sets a material's thermal properties, uploading the table.
    pub fn set_thermal(&mut self, id: MaterialId, thermal: Thermal) -> Result<()> {
        let material = self.existing(id)?;
        thermal.validate(material)?;
        self.thermal[id.0 as usize] = thermal;
        self.upload()
    }

    /// Sets a material's surface tension coefficient (N/m; N in 2D, per metre of depth),
    /// uploading the table: finite and >= 0 (0 for none), and at most `SURFACE_CHANNELS`
    /// materials with one.
    pub fn set_surface_tension(&mut self, id: MaterialId, sigma: f32) -> Result<()> {
        let material = self.existing(id)?;
        let others = (self.tension.iter().enumerate())
            .filter(|&(i, &t)| i != id.0 as usize && t > 0.0)
            .count();
        check_surface_tension(&material.name(), sigma, others)?;
        self.tension[id.0 as usize] = sigma;
        self.upload()
    }

    /// Each material's colour channel: the materials with a surface tension in order.
    fn channels(&self) -> impl Iterator<Item = Option<usize>> + '_ {
        let mut next = 0;
        self.tension.iter().map(move |&t| {
            (t > 0.0).then(|| {
                next += 1;
                next - 1
            })
        })
    }

    /// The surface tension coefficient of each colour channel (0 where unused).
    pub fn tension_channels(&self) -> [f32; 4] {
        let mut out = [0.0; 4];
        for (channel, &t) in self.channels().zip(&self.tension) {
            if let Some(c) = channel {
                out[c] = t;
            }
        }
        out
    }

    /// The shortest capillary time `sqrt(rho dx^3 / sigma)` among the materials with surface
    /// tension (the step is `CAPILLARY_STEP` times it; see `Settings::surface_tension`).
    pub fn capillary_time(&self, dx: f32) -> Option<f32> {
        (self.materials.iter().zip(&self.tension))
            .filter(|(_, &t)| t > 0.0)
            .map(|(m, &t)| (m.density() * dx.powi(3) / t).sqrt())
            .reduce(f32::min)
    }

    /// The thermal properties of a material.
    pub fn thermal(&self, id: MaterialId) -> Option<&Thermal> {
        usize::try_from(id.0).ok().and_then(|i| self.thermal.get(i))
    }

    /// Whether any material's stiffness depends on temperature.
    /// Bit `k` set for each material kind `k` in the table (the kernels' `kinds`, on which
    /// they specialise: a scene compiles only its materials' updates for the GPU).
    pub fn kinds(&self) -> u32 {
        self.materials.iter().fold(0, |bits, m| {
            bits | 1 << m.kind_and_row(self.dimension, self.cell).0
        })
    }

    pub fn softens(&self) -> bool {
        self.thermal.iter().any(|t| !t.softening.is_empty())
    }

    /// The largest thermal diffusivity `k / (rho c)` among the materials.
    pub fn max_diffusivity(&self) -> f32 {
        self.materials
            .iter()
            .zip(&self.thermal)
            .map(|(m, t)| t.diffusivity(m.density()))
            .fold(0.0, f32::max)
    }

    fn upload(&mut self) -> Result<()> {
        let mut rows = vec![Vec4::ZERO; kernels::TENSION_ROW as usize + 1];
        rows[kernels::TENSION_ROW as usize] = Vec4::from_array(self.tension_channels());
        let materials = self
            .materials
            .iter()
            .zip(&self.thermal)
            .zip(self.channels());
        for (i, ((m, t), channel)) in materials.enumerate() {
            let (kind, elastic, params) = m.rows(self.dimension, self.cell);
            let [temperatures, scales] = t.curve_rows();
            let channel = channel.map_or(-1.0, |c| c as f32);
            let kind_row = Vec4::new(kind as f32, t.conductivity, t.specific_heat, channel);
            let row = |offset: i32| MATERIAL_ROWS * i + offset as usize;
            rows[row(kernels::ELASTIC_ROW)] = elastic;
            rows[row(kernels::MODEL_ROW)] = params;
            rows[row(kernels::KIND_ROW)] = kind_row;
            rows[row(kernels::CURVE_ROWS)] = temperatures;
            rows[row(kernels::CURVE_ROWS) + 1] = scales;
        }
        Ok(self.rows.upload(&rows)?)
    }

    pub fn get(&self, id: MaterialId) -> Option<&Material> {
        usize::try_from(id.0)
            .ok()
            .and_then(|i| self.materials.get(i))
    }
}

#[cfg(test)]
mod tests {
    use glam::{DMat3, DVec3, Mat2, Mat3, Vec3};

    use super::*;

    fn presets() -> Vec<Material> {
        Material::models()
            .iter()
            .map(|model| Material::from_parameters(model, &[]).expect("a model"))
            .collect()
    }

    /// `P F^T` for `P = d psi / dF`, by central differences of the f64 energy density.
    fn stress_of_energy(m: &Material, h: DMat3, jp: f64) -> DMat3 {
        let step = 1e-6;
        let psi = |h: DMat3| m.energy_density(h, jp).expect("modelled");
        let mut p = DMat3::ZERO;
        for col in 0..3 {
            for row in 0..3 {
                let mut e = DMat3::ZERO;
                e.col_mut(col)[row] = step;
                p.col_mut(col)[row] = (psi(h + e) - psi(h - e)) / (2.0 * step);
            }
        }
        p * (DMat3::IDENTITY + h).transpose()
    }

    /// A deformation each model takes elastically (inside snow's clamps and sand's cone),
    /// large enough that the models' energies differ at second order, so that an entry's
    /// update paired with another entry's energy fails.
    fn elastic_deformation(m: &Material) -> Mat3 {
        let shear = Mat3::from_cols(
            Vec3::new(0.0, 1.0, -0.5),
            Vec3::new(1.0, 0.0, 0.7),
            Vec3::new(-0.5, 0.7, 0.0),
        );
        match m {
            Material::NeoHookean { .. } | Material::FixedCorotated { .. } => {
                Mat3::from_diagonal(Vec3::new(0.2, -0.1, 0.05)) + 0.1 * shear
            }
            Material::Snow { .. } => {
                Mat3::from_diagonal(Vec3::new(-0.01, 0.004, -0.015)) + 1e-3 * shear
            }
            Material::Sand { .. } => {
                Mat3::from_diagonal(Vec3::new(-0.03, -0.025, -0.028)) + 1e-3 * shear
            }
            _ => Mat3::from_diagonal(Vec3::new(-0.004, 0.001, -0.003)) + 1e-3 * shear,
        }
    }

    #[test]
    fn every_entrys_stress_derives_from_its_energy() {
        // The kernels' update, reached through the kind the host writes in the table, is the
        // derivative of the energy the report uses: tau = (d psi / dF) F^T.
        for m in presets() {
            // Hardens snow, which must show in both; a brittle particle's jp is its
            // integrity: intact.
            let jp = match m {
                Material::Brittle { .. } => 1.0f32,
                _ => 0.97,
            };
            let h = elastic_deformation(&m);
            let close = |got: DMat3, want: DMat3, what: &str| {
                let scale = want
                    .to_cols_array()
                    .iter()
                    .fold(0f64, |a, x| a.max(x.abs()));
                let err = (got - want)
                    .to_cols_array()
                    .iter()
                    .fold(0f64, |a, x| a.max(x.abs()));
                assert!(
                    err <= 2e-5 * scale,
                    "{} {what}: update {got} vs energy {want}",
                    m.name()
                );
            };

            let (kind, elastic, row) = m.rows(3, 0.01);
            let (h3, tau3, jp3) =
                dim3::constitutive(u32::MAX, kind, h, Mat3::ZERO, Mat3::ZERO, jp, elastic, row);
            assert_eq!(jp3, jp, "{}: no plastic flow expected", m.name());
            let want = stress_of_energy(&m, h3.as_dmat3(), jp.into());
            close(tau3.as_dmat3(), want, "3D");

            // 2D: the energy of the gradient padded with F_zz = 1.
            let h2 = Mat2::from_cols(h.x_axis.truncate(), h.y_axis.truncate());
            let (kind, elastic, row) = m.rows(2, 0.01);
            let (h2_new, tau2, _) =
                dim2::constitutive(u32::MAX, kind, h2, Mat2::ZERO, Mat2::ZERO, jp, elastic, row);
            let padded = DMat3::from_cols(
                h2_new.x_axis.as_dvec2().extend(0.0),
                h2_new.y_axis.as_dvec2().extend(0.0),
                DVec3::ZERO,
            );
            let want = stress_of_energy(&m, padded, jp.into());
            let tau2 = DMat3::from_cols(
                tau2.x_axis.as_dvec2().extend(0.0),
                tau2.y_axis.as_dvec2().extend(0.0),
                DVec3::new(0.0, 0.0, want.z_axis.z),
            );
            close(tau2, want, "2D");
        }
    }

    #[test]
    fn presets_are_valid_and_distinct() {
        let presets = presets();
        assert_eq!(presets.len(), Material::models().len());
        let mut kinds: Vec<i32> = presets.iter().map(|m| m.rows(3, 0.01).0).collect();
        kinds.push(USER_KIND);
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), presets.len() + 1);
        for m in &presets {
            m.validate().expect("a valid preset");
            assert_eq!(
                Material::parameters(&m.name()).map(|p| p[0]),
                Some("density")
            );
        }
        assert_eq!(Material::water(), presets[0]);
    }

    #[test]
    fn parameters_are_read_by_name_and_checked() {
        let m = Material::from_parameters(
            "sand",
            &[
                ("friction_angle", ParamValue::Number(35.0)),
                ("density", ParamValue::Number(1500.0)),
            ],
        )
        .expect("sand");
        let Material::Sand {
            friction_angle,
            density,
            youngs,
            ..
        } = m
        else {
            panic!("{m:?}")
        };
        assert_eq!((friction_angle, density, youngs), (35.0, 1500.0, 3.537e5));

        let message = |model: &str, given: &[(&str, ParamValue)]| {
            Material::from_parameters(model, given)
                .and_then(|m| m.validate())
                .expect_err("an error")
                .to_string()
        };
        let e = message("lava", &[]);
        assert!(
            e.contains("unknown material model `lava`") && e.contains("neo-hookean"),
            "{e}"
        );
        let e = message("water", &[("youngs", ParamValue::Number(1.0))]);
        assert!(
            e.contains("takes no `youngs`") && e.contains("free_surface"),
            "{e}"
        );
        let e = message("water", &[("free_surface", ParamValue::Number(1.0))]);
        assert!(e.contains("`free_surface` is true or false"), "{e}");
        let e = message("snow", &[("theta_c", ParamValue::Number(1.0))]);
        assert!(e.contains("theta_c = 1 is out of range (0 < x < 1)"), "{e}");
        let e = message("neo-hookean", &[("poisson", ParamValue::Number(0.5))]);
        assert!(
            e.contains("poisson = 0.5 is out of range (-1 < x < 0.5)"),
            "{e}"
        );
        let e = message("sand", &[("friction_angle", ParamValue::Number(90.0))]);
        assert!(e.contains("friction_angle = 90"), "{e}");
        let e = message("water", &[("viscosity", ParamValue::Number(f64::NAN))]);
        assert!(
            e.contains("viscosity = NaN is out of range (finite and >= 0)"),
            "{e}"
        );
    }
}
