//! Scene files: a TOML description of a simulation (domain, grid, materials, bodies,
//! colliders, emitters, output), checked and turned into a solver.
//!
//! Every error names the file, line and column and says what was expected; parameter ranges
//! are checked where they are read, so that the error points at the entry that holds them.
//! The format is documented in `scenes/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use mpm_core::solver::{
    check_surface_tension, BulkViscosity, Collider, Condition, Emitter, GridLayout, Heat,
    HeatBoundary, Material, MaterialId, ParamValue, Region, Sampling, SdfId, Settings, Shape,
    Solver, SolverError, Space, Spline, Thermal, TimeStep, Walls, MARGIN,
};
use mpm_core::BackendRef;

use crate::mesh::{MeshError, TriMesh};

mod locate;
use locate::{Locator, Table};

/// What went wrong with a scene file.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error("{file}:{line}:{column}: {message}")]
    At {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}: building the scene failed: {source}")]
    Build {
        file: String,
        #[source]
        source: mpm_core::solver::SolverError,
    },
}

/// A parsed and checked scene.
#[derive(Debug, Clone)]
pub struct Scene {
    /// Where it came from, for messages.
    pub file: String,
    pub source: String,
    pub simulation: Simulation,
    pub materials: Vec<Spanned<MaterialSpec>>,
    pub bodies: Vec<Spanned<Body>>,
    pub colliders: Vec<Spanned<ColliderSpec>>,
    pub emitters: Vec<Spanned<EmitterSpec>>,
    pub output: Output,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScene {
    simulation: Spanned<Simulation>,
    #[serde(default)]
    materials: Vec<Spanned<MaterialSpec>>,
    #[serde(default)]
    bodies: Vec<Spanned<Body>>,
    #[serde(default)]
    colliders: Vec<Spanned<ColliderSpec>>,
    #[serde(default)]
    emitters: Vec<Spanned<EmitterSpec>>,
    #[serde(default)]
    output: Output,
}

/// `[simulation]`: the domain, grid and time stepping.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Simulation {
    /// 2 or 3.
    pub dimension: u32,
    /// Grid cells per axis.
    pub resolution: Vec<u32>,
    /// Cell size in metres (default: 1 / resolution[0], a unit-wide domain).
    pub dx: Option<f32>,
    /// Default: 9.8 m/s^2 down the y axis.
    pub gravity: Option<Vec<f32>>,
    #[serde(default)]
    pub spline: SplineName,
    /// FLIP fraction (0: APIC).
    #[serde(default)]
    pub flip: f32,
    /// Damping rate in 1/s (default 0): motion decays like exp(-damping t); for settling
    /// quasi-static scenes.
    #[serde(default)]
    pub damping: f32,
    /// F-bar anti-locking for the hyperelastic solids (see `Settings::f_bar`).
    #[serde(default)]
    pub f_bar: bool,
    /// Artificial bulk viscosity for impacts: `{ linear = 0.06, quadratic = 1.5 }` (off when
    /// absent; see `BulkViscosity`).
    pub bulk_viscosity: Option<ViscositySpec>,
    /// Heat conduction: `heat = {}` (insulating walls) or `heat = { wall_temperature = 300 }`
    /// (off when absent; see `Heat`).
    pub heat: Option<HeatSpec>,
    /// A fixed time step in seconds; leave out for an adaptive one.
    pub dt: Option<f32>,
    /// Adaptive stepping: CFL number (default 0.5) and largest step (default 1e-3 s).
    pub cfl: Option<f32>,
    pub max_dt: Option<f32>,
    /// Simulated seconds per output frame.
    pub frame_time: f32,
    /// Frames to run (the command line may override it).
    pub frames: u32,
    /// Seed of the random (jittered, Poisson-disk) particle placement.
    #[serde(default)]
    pub seed: u32,
    #[serde(default)]
    pub grid: GridSpec,
    #[serde(default)]
    pub walls: WallSpec,
    /// Substeps between rewrites of the particles in grid-block order (default 0: never;
    /// see `Settings::sort_every`).
    #[serde(default)]
    pub sort_every: u32,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SplineName {
    #[default]
    Quadratic,
    Cubic,
}

impl SplineName {
    /// As a scene file writes it.
    pub fn name(self) -> &'static str {
        match self {
            SplineName::Quadratic => "quadratic",
            SplineName::Cubic => "cubic",
        }
    }
}

/// `bulk_viscosity = { linear = 0.06, quadratic = 1.5 }`: the coefficients default to these.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViscositySpec {
    #[serde(default = "default_linear_viscosity")]
    pub linear: f32,
    #[serde(default = "default_quadratic_viscosity")]
    pub quadratic: f32,
}

fn default_linear_viscosity() -> f32 {
    BulkViscosity::STANDARD.linear
}

fn default_quadratic_viscosity() -> f32 {
    BulkViscosity::STANDARD.quadratic
}

/// `heat = { wall_temperature = 300.0 }`: walls held at a temperature; insulating without it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeatSpec {
    pub wall_temperature: Option<f32>,
}

/// `grid = { layout = "sparse", block = 4, reserve = 4096 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    #[serde(default)]
    pub layout: LayoutName,
    #[serde(default = "default_block")]
    pub block: u32,
    /// Blocks in the sparse pool at the start (default 64); the solver grows the pool to
    /// twice what the bodies touch, and the tree doubles it whenever it is more than half full.
    pub reserve: Option<u32>,
}

impl Default for GridSpec {
    fn default() -> Self {
        GridSpec {
            layout: LayoutName::Dense,
            block: default_block(),
            reserve: None,
        }
    }
}

fn default_block() -> u32 {
    4
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LayoutName {
    #[default]
    Dense,
    /// Pointer blocks, dense inside.
    Sparse,
    /// Pointer blocks, bitmasked inside.
    Bitmasked,
}

impl LayoutName {
    /// As a scene file writes it.
    pub fn name(self) -> &'static str {
        match self {
            LayoutName::Dense => "dense",
            LayoutName::Sparse => "sparse",
            LayoutName::Bitmasked => "bitmasked",
        }
    }
}

/// `walls = { thickness = 3, condition = "separate", friction = 0.0 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WallSpec {
    #[serde(default = "default_thickness")]
    pub thickness: u32,
    #[serde(default = "default_condition")]
    pub condition: ConditionName,
    #[serde(default)]
    pub friction: f32,
}

impl Default for WallSpec {
    fn default() -> Self {
        WallSpec {
            thickness: default_thickness(),
            condition: default_condition(),
            friction: 0.0,
        }
    }
}

fn default_thickness() -> u32 {
    3
}

fn default_condition() -> ConditionName {
    ConditionName::Separate
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ConditionName {
    Sticky,
    Slip,
    Separate,
}

impl ConditionName {
    fn with(self, friction: f32) -> Condition {
        match self {
            ConditionName::Sticky => Condition::Sticky,
            ConditionName::Slip => Condition::Slip { friction },
            ConditionName::Separate => Condition::Separate { friction },
        }
    }
}

/// `[[materials]]`: a named material of one of `Material::models()`, with that model's
/// parameters (`Material::parameters`); what the file leaves out takes the model's default,
/// and parameters the model does not take are errors. The thermal keys are every model's
/// (see `Thermal`); conductivity and specific heat need `heat` on.
#[derive(Debug, Clone, Deserialize)]
pub struct MaterialSpec {
    pub name: String,
    pub model: String,
    pub conductivity: Option<f32>,
    pub specific_heat: Option<f32>,
    /// The starting temperature of its particles.
    pub temperature: Option<f32>,
    /// `[[temperature, scale], ...]`: the shear modulus's scale by temperature.
    pub softening: Option<Vec<[f32; 2]>>,
    /// The surface tension coefficient, N/m (N in 2D, per metre of depth); any material
    /// with one turns surface tension on (see `Settings::surface_tension`).
    pub surface_tension: Option<f32>,
    /// Everything else in the table: the model's parameters.
    #[serde(flatten)]
    pub parameters: BTreeMap<String, toml::Value>,
}

/// `[[bodies]]`: a region filled with particles at the start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Body {
    pub material: String,
    pub shape: ShapeName,
    pub min: Option<Vec<f32>>,
    pub max: Option<Vec<f32>>,
    pub centre: Option<Vec<f32>>,
    pub radius: Option<f32>,
    /// A watertight OBJ or STL mesh (3D), relative to the scene file, fitted into
    /// `min`..`max` keeping its proportions.
    pub file: Option<String>,
    #[serde(default)]
    pub sampling: SamplingName,
    /// Particle spacing in metres (default: half a cell).
    pub spacing: Option<f32>,
    pub velocity: Option<Vec<f32>>,
}

/// Shapes of bodies, emitters and colliders: a box takes `min` and `max` (colliders:
/// `centre` and `half`), a sphere `centre` and `radius`, a plane `point` and `normal`, a mesh
/// (bodies only) `file`, `min` and `max`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeName {
    Box,
    Sphere,
    Plane,
    Mesh,
}

/// Where particles go.
#[derive(Debug, Clone)]
pub enum RegionSpec {
    Box {
        min: Vec<f32>,
        max: Vec<f32>,
    },
    Sphere {
        centre: Vec<f32>,
        radius: f32,
    },
    Mesh {
        file: String,
        min: Vec<f32>,
        max: Vec<f32>,
    },
}

/// Picks the fields a shape takes, refusing missing and extra ones.
fn region_of(
    shape: ShapeName,
    min: &Option<Vec<f32>>,
    max: &Option<Vec<f32>>,
    centre: &Option<Vec<f32>>,
    radius: Option<f32>,
    file: &Option<String>,
) -> Result<RegionSpec, String> {
    match (shape, file) {
        (ShapeName::Mesh, Some(file)) => {
            return match (min, max, centre, radius) {
                (Some(min), Some(max), None, None) => Ok(RegionSpec::Mesh {
                    file: file.clone(),
                    min: min.clone(),
                    max: max.clone(),
                }),
                _ => Err("a mesh takes `file`, `min` and `max` (the box it is fitted into)".into()),
            };
        }
        (ShapeName::Mesh, None) => return Err("a mesh needs `file` (an OBJ or STL)".into()),
        (_, Some(_)) => return Err("only a mesh takes `file`".into()),
        _ => {}
    }
    match (shape, min, max, centre, radius) {
        (ShapeName::Box, Some(min), Some(max), None, None) => Ok(RegionSpec::Box {
            min: min.clone(),
            max: max.clone(),
        }),
        (ShapeName::Sphere, None, None, Some(centre), Some(radius)) => Ok(RegionSpec::Sphere {
            centre: centre.clone(),
            radius,
        }),
        (ShapeName::Box, ..) => {
            Err("a box takes `min` and `max` (and no `centre` or `radius`)".into())
        }
        (ShapeName::Sphere, ..) => {
            Err("a sphere takes `centre` and `radius` (and no `min` or `max`)".into())
        }
        (ShapeName::Plane | ShapeName::Mesh, ..) => {
            Err("particles fill a box, a sphere or a mesh, not a plane".into())
        }
    }
}

impl Body {
    pub fn region(&self) -> Result<RegionSpec, String> {
        region_of(
            self.shape,
            &self.min,
            &self.max,
            &self.centre,
            self.radius,
            &self.file,
        )
    }
}

impl EmitterSpec {
    pub fn region(&self) -> Result<RegionSpec, String> {
        match self.shape {
            ShapeName::Mesh => Err("emitters fill a box or a sphere, not a mesh".into()),
            shape => region_of(
                shape,
                &self.min,
                &self.max,
                &self.centre,
                self.radius,
                &None,
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingName {
    Regular,
    #[default]
    Jittered,
    PoissonDisk,
}

/// `[[colliders]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColliderSpec {
    pub shape: ShapeName,
    pub point: Option<Vec<f32>>,
    pub normal: Option<Vec<f32>>,
    pub centre: Option<Vec<f32>>,
    pub half: Option<Vec<f32>>,
    pub radius: Option<f32>,
    /// A watertight OBJ or STL mesh (3D), relative to the scene file, fitted into
    /// `min`..`max` keeping its proportions: a distance-field collider.
    pub file: Option<String>,
    pub min: Option<Vec<f32>>,
    pub max: Option<Vec<f32>>,
    #[serde(default = "default_collider_condition")]
    pub condition: ConditionName,
    #[serde(default)]
    pub friction: f32,
    pub velocity: Option<Vec<f32>>,
    /// Spin in rad/s about the centre of `min`..`max` (mesh colliders).
    pub angular_velocity: Option<Vec<f32>>,
    /// Held at this temperature (with `heat` on); insulating without it.
    pub temperature: Option<f32>,
}

fn default_collider_condition() -> ConditionName {
    ConditionName::Sticky
}

/// A collider's shape with its fields.
#[derive(Debug, Clone)]
pub enum ColliderShape {
    Plane {
        point: Vec<f32>,
        normal: Vec<f32>,
    },
    Box {
        centre: Vec<f32>,
        half: Vec<f32>,
    },
    Sphere {
        centre: Vec<f32>,
        radius: f32,
    },
    Mesh {
        file: String,
        min: Vec<f32>,
        max: Vec<f32>,
    },
}

/// `[[emitters]]`: a body added again every `interval` seconds from `start` to `stop`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmitterSpec {
    pub material: String,
    pub shape: ShapeName,
    pub min: Option<Vec<f32>>,
    pub max: Option<Vec<f32>>,
    pub centre: Option<Vec<f32>>,
    pub radius: Option<f32>,
    #[serde(default)]
    pub sampling: SamplingName,
    pub spacing: Option<f32>,
    pub velocity: Option<Vec<f32>>,
    pub interval: f32,
    #[serde(default)]
    pub start: f32,
    pub stop: f32,
}

/// `[output]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Output {
    /// PNG frames (2D: particles; 3D: splats).
    #[serde(default = "yes")]
    pub png: bool,
    #[serde(default)]
    pub color: ColorBy,
    /// `[low, high]`: the scale of `color = "speed"` (from 0 to `high`) or `"temperature"`,
    /// the same in every frame; without it each frame takes its own (speeds up to their
    /// 99th percentile, temperatures from the 1st to the 99th).
    pub color_range: Option<[f32; 2]>,
    /// Binary PLY per frame (position, velocity, material).
    #[serde(default)]
    pub ply: bool,
    /// An animated GIF preview of the PNG frames.
    #[serde(default)]
    pub gif: bool,
    /// Frames between checkpoints (0: none; a checkpoint is also written on Ctrl-C).
    #[serde(default)]
    pub checkpoint_every: u32,
    /// Image width and height in pixels.
    #[serde(default = "default_image_size")]
    pub image_size: u32,
}

impl Default for Output {
    fn default() -> Self {
        Output {
            png: true,
            color: ColorBy::Material,
            color_range: None,
            ply: false,
            gif: false,
            checkpoint_every: 0,
            image_size: default_image_size(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_image_size() -> u32 {
    512
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ColorBy {
    #[default]
    Material,
    Speed,
    /// Needs `heat` on.
    Temperature,
    /// Brittle materials' damage (0 elsewhere).
    Damage,
}

/// 1-based line and column of a byte offset.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
    (line, column)
}

impl Scene {
    /// Reads and checks a scene file.
    pub fn load(path: &Path) -> Result<Scene, SceneError> {
        let file_error = |message: String| SceneError::File {
            file: path.display().to_string(),
            message,
        };
        let bytes = crate::files::read_bounded(path, crate::files::SCENE_LIMIT, "scene file")
            .map_err(|e| file_error(format!("cannot read it: {e}")))?;
        let source = String::from_utf8(bytes)
            .map_err(|e| file_error(format!("cannot read it: not UTF-8 text ({e})")))?;
        Scene::parse(&path.display().to_string(), &source)
    }

    /// Parses and checks scene text; `file` names it in messages.
    pub fn parse(file: &str, source: &str) -> Result<Scene, SceneError> {
        // Before serde, which would read 1e300 into an f32 as an infinity.
        let loc = Locator::new(source);
        if let Some((offset, key, text)) = loc.first_non_f32() {
            let (line, column) = line_column(source, offset);
            return Err(SceneError::At {
                file: file.into(),
                line,
                column,
                message: format!(
                    "{key} = {text}: expected a finite number an f32 holds (magnitude up to 3.4e38)"
                ),
            });
        }
        let raw: RawScene = toml::from_str(source).map_err(|e| {
            let (line, column) = line_column(source, e.span().map(|s| s.start).unwrap_or(0));
            SceneError::At {
                file: file.into(),
                line,
                column,
                message: e.message().trim().to_string(),
            }
        })?;
        let scene = Scene {
            file: file.into(),
            source: source.into(),
            simulation: raw.simulation.get_ref().clone(),
            materials: raw.materials,
            bodies: raw.bodies,
            colliders: raw.colliders,
            emitters: raw.emitters,
            output: raw.output,
        };
        scene.check(&loc, raw.simulation.span().start)?;
        Ok(scene)
    }

    /// An error at a byte offset of the source.
    fn at(&self, offset: usize, message: impl Into<String>) -> SceneError {
        let (line, column) = line_column(&self.source, offset);
        SceneError::At {
            file: self.file.clone(),
            line,
            column,
            message: message.into(),
        }
    }

    /// Checks what the types cannot: lengths of vectors, ranges, names, bodies in the domain.
    /// Each message points at the key it is about (`loc`), else at its table's header.
    fn check(&self, loc: &Locator<'_>, sim_at: usize) -> Result<(), SceneError> {
        let s = &self.simulation;
        let d = s.dimension as usize;
        let sim = Table {
            name: "simulation",
            index: None,
            start: sim_at,
        };
        let at = |t: Table, key: &str, message: String| self.at(loc.key(t, key), message);
        // For a message from elsewhere (the solver's checks) that names its key.
        let at_mentioned = |t: Table, message: String| self.at(loc.mentioned(t, &message), message);
        if d != 2 && d != 3 {
            return Err(at(
                sim,
                "dimension",
                format!("dimension = {d}: expected 2 or 3"),
            ));
        }
        let vec_len = |t: Table, what: &str, v: &[f32]| {
            if v.len() != d || v.iter().any(|x| !x.is_finite()) {
                Err(at(
                    t,
                    what,
                    format!("{what} = {v:?}: expected {d} finite numbers (dimension {d})"),
                ))
            } else {
                Ok(())
            }
        };
        if s.resolution.len() != d || s.resolution.iter().any(|&r| !(8..=4096).contains(&r)) {
            return Err(at(
                sim,
                "resolution",
                format!(
                    "resolution = {:?}: expected {d} cell counts from 8 to 4096",
                    s.resolution
                ),
            ));
        }
        if let Some(g) = &s.gravity {
            vec_len(sim, "gravity", g)?;
        }
        // The solver settings carry the remaining range checks; their messages name the key.
        self.settings_for_check()
            .map_err(|e| at_mentioned(sim, format!("[simulation]: {e}")))?;
        if !(s.frame_time.is_finite() && s.frame_time > 0.0) {
            return Err(at(
                sim,
                "frame_time",
                format!("frame_time = {}: expected seconds > 0", s.frame_time),
            ));
        }
        if let Some(dt) = s.dt {
            if s.cfl.is_some() || s.max_dt.is_some() {
                return Err(at(
                    sim,
                    "dt",
                    format!("dt = {dt} fixes the time step; cfl and max_dt are for adaptive stepping only (leave dt out)"),
                ));
            }
        }
        let entry = |name: &'static str, index: usize, start: usize| Table {
            name,
            index: Some(index),
            start,
        };
        let mut names = Vec::new();
        // Materials with a surface tension so far.
        let mut tensed = 0;
        for (i, m) in self.materials.iter().enumerate() {
            let t = entry("materials", i, m.span().start);
            let spec = m.get_ref();
            if names.contains(&spec.name) {
                return Err(at(
                    t,
                    "name",
                    format!("material `{}` is defined twice", spec.name),
                ));
            }
            names.push(spec.name.clone());
            let material = spec.to_material().map_err(|e| at_mentioned(t, e))?;
            material
                .validate()
                .map_err(|e| at_mentioned(t, format!("material `{}`: {e}", spec.name)))?;
            if s.heat.is_none() {
                if let Some(key) = [
                    ("conductivity", spec.conductivity),
                    ("specific_heat", spec.specific_heat),
                ]
                .iter()
                .find_map(|(key, value)| value.map(|_| *key))
                {
                    return Err(at(
                        t,
                        key,
                        format!(
                            "material `{}`: `{key}` needs heat conduction on ([simulation] \
                             heat = {{}})",
                            spec.name
                        ),
                    ));
                }
            }
            if let Some(thermal) = spec.thermal() {
                thermal
                    .validate(&material)
                    .map_err(|e| at_mentioned(t, format!("material `{}`: {e}", spec.name)))?;
            }
            if let Some(sigma) = spec.surface_tension {
                check_surface_tension(&material.name(), sigma, tensed).map_err(|e| {
                    at(
                        t,
                        "surface_tension",
                        format!("material `{}`: {e}", spec.name),
                    )
                })?;
                if sigma > 0.0 {
                    tensed += 1;
                }
            }
        }
        let known = |t: Table, name: &str| {
            if names.iter().any(|n| n == name) {
                Ok(())
            } else {
                Err(at(
                    t,
                    "material",
                    format!("unknown material `{name}`; the scene defines {names:?}"),
                ))
            }
        };
        let dx = self.dx();
        let lo = MARGIN * dx;
        let hi: Vec<f32> = s
            .resolution
            .iter()
            .map(|&r| (r as f32 - MARGIN) * dx)
            .collect();
        // A mesh (3D only) fitted into the box `min`..`max`, for a body or a collider.
        let mesh_ok = |t: Table, what: &str, file: &str, min: &[f32], max: &[f32]| {
            if d != 3 {
                return Err(at(t, "shape", format!("mesh {what} need dimension = 3")));
            }
            vec_len(t, "min", min)?;
            vec_len(t, "max", max)?;
            if min.iter().zip(max).any(|(a, b)| a >= b) {
                return Err(at(
                    t,
                    "max",
                    format!("box min {min:?} must lie below max {max:?}"),
                ));
            }
            self.load_mesh(file, min, max)
                .map_err(|e| at(t, "file", e.to_string()))
                .map(|_| ())
        };
        let region_ok = |t: Table, r: &RegionSpec, spacing: Option<f32>, v: &Option<Vec<f32>>| {
            let (min, max, keys) = match r {
                RegionSpec::Mesh { file, min, max } => {
                    mesh_ok(t, "bodies", file, min, max)?;
                    (min.clone(), max.clone(), ["min", "max"])
                }
                RegionSpec::Box { min, max } => {
                    vec_len(t, "min", min)?;
                    vec_len(t, "max", max)?;
                    if min.iter().zip(max).any(|(a, b)| a >= b) {
                        return Err(at(
                            t,
                            "max",
                            format!("box min {min:?} must lie below max {max:?}"),
                        ));
                    }
                    (min.clone(), max.clone(), ["min", "max"])
                }
                RegionSpec::Sphere { centre, radius } => {
                    vec_len(t, "centre", centre)?;
                    if !(radius.is_finite() && *radius > 0.0) {
                        return Err(at(t, "radius", format!("radius = {radius}: expected > 0")));
                    }
                    (
                        centre.iter().map(|c| c - radius).collect(),
                        centre.iter().map(|c| c + radius).collect(),
                        ["centre", "centre"],
                    )
                }
            };
            let below = min.iter().any(|&m| m < lo);
            if below || max.iter().zip(&hi).any(|(m, h)| m > h) {
                return Err(at(
                    t,
                    keys[!below as usize],
                    format!(
                        "the body spans {min:?}..{max:?}, outside the domain's interior {lo}..{hi:?} (two cells from each side)"
                    ),
                ));
            }
            if let Some(sp) = spacing {
                if !(sp.is_finite() && sp > 0.0) {
                    return Err(at(
                        t,
                        "spacing",
                        format!("spacing = {sp}: expected metres > 0"),
                    ));
                }
            }
            if let Some(v) = v {
                vec_len(t, "velocity", v)?;
            }
            Ok(())
        };
        for (i, b) in self.bodies.iter().enumerate() {
            let t = entry("bodies", i, b.span().start);
            let body = b.get_ref();
            known(t, &body.material)?;
            let region = body.region().map_err(|e| at_mentioned(t, e))?;
            region_ok(t, &region, body.spacing, &body.velocity)?;
        }
        for (i, e) in self.emitters.iter().enumerate() {
            let t = entry("emitters", i, e.span().start);
            let em = e.get_ref();
            known(t, &em.material)?;
            let region = em.region().map_err(|e| at(t, "shape", e))?;
            region_ok(t, &region, em.spacing, &em.velocity)?;
            if !(em.interval.is_finite() && em.interval > 0.0) {
                return Err(at(
                    t,
                    "interval",
                    format!("interval = {}: expected seconds > 0", em.interval),
                ));
            }
            if !(em.start >= 0.0 && em.stop > em.start) {
                return Err(at(
                    t,
                    if em.start < 0.0 { "start" } else { "stop" },
                    format!(
                        "start = {}, stop = {}: expected 0 <= start < stop",
                        em.start, em.stop
                    ),
                ));
            }
        }
        for (i, c) in self.colliders.iter().enumerate() {
            let t = entry("colliders", i, c.span().start);
            let spec = c.get_ref();
            match &spec.geometry().map_err(|e| at_mentioned(t, e))? {
                ColliderShape::Plane { point, normal } => {
                    vec_len(t, "point", point)?;
                    vec_len(t, "normal", normal)?;
                }
                ColliderShape::Box { centre, half } => {
                    vec_len(t, "centre", centre)?;
                    vec_len(t, "half", half)?;
                }
                ColliderShape::Sphere { centre, .. } => vec_len(t, "centre", centre)?,
                ColliderShape::Mesh { file, min, max } => mesh_ok(t, "colliders", file, min, max)?,
            }
            if let Some(v) = &spec.velocity {
                vec_len(t, "velocity", v)?;
            }
            if let Some(w) = &spec.angular_velocity {
                vec_len(t, "angular_velocity", w)?;
            }
            if spec.temperature.is_some() && s.heat.is_none() {
                return Err(at(
                    t,
                    "temperature",
                    "a collider's temperature needs heat conduction on ([simulation] heat = {})"
                        .to_string(),
                ));
            }
            spec.to_collider(d, SdfId(0))
                .validate()
                .map_err(|e| at_mentioned(t, format!("collider {}: {e}", i + 1)))?;
        }
        let output = Table {
            name: "output",
            index: None,
            start: 0,
        };
        if let Some([low, high]) = self.output.color_range {
            let good = match self.output.color {
                ColorBy::Material | ColorBy::Damage => false,
                ColorBy::Speed => low == 0.0 && high.is_finite() && high > 0.0,
                ColorBy::Temperature => low.is_finite() && high.is_finite() && high > low,
            };
            if !good {
                return Err(at(
                    output,
                    "color_range",
                    format!(
                        "[output] color_range = [{low}, {high}]: expected finite low < high \
                         (from 0 for speeds), with color = \"speed\" or \"temperature\""
                    ),
                ));
            }
        }
        if self.output.color == ColorBy::Temperature && s.heat.is_none() {
            return Err(at(
                output,
                "color",
                "[output] color = \"temperature\" needs heat conduction on ([simulation] heat = {})"
                    .to_string(),
            ));
        }
        if self.output.image_size < 16 || self.output.image_size > 8192 {
            return Err(at(
                output,
                "image_size",
                format!(
                    "[output] image_size = {}: expected 16 to 8192 pixels",
                    self.output.image_size
                ),
            ));
        }
        Ok(())
    }

    pub fn dimension(&self) -> usize {
        self.simulation.dimension as usize
    }

    /// A solver error in this scene's words: a divergence names the material as the scene
    /// does (`jelly`, neo-hookean) besides its model; [`Scene::build`] adds the materials in
    /// file order, so a material's id is its position.
    pub fn explain(&self, e: SolverError) -> SolverError {
        match e {
            SolverError::Diverged {
                step,
                particle,
                material,
                material_id,
                reason,
            } => {
                let named = usize::try_from(material_id.0)
                    .ok()
                    .and_then(|i| self.materials.get(i))
                    .map(|m| format!("material `{}`, {material}", m.get_ref().name));
                SolverError::Diverged {
                    step,
                    particle,
                    material: named.unwrap_or(material),
                    material_id,
                    reason,
                }
            }
            other => other,
        }
    }

    /// The cell size.
    pub fn dx(&self) -> f32 {
        self.simulation
            .dx
            .unwrap_or(1.0 / self.simulation.resolution[0] as f32)
    }

    fn settings_for_check(&self) -> mpm_core::solver::Result<()> {
        match self.dimension() {
            2 => self.settings::<2>().validate(),
            _ => self.settings::<3>().validate(),
        }
    }

    /// The solver settings in `D` dimensions.
    pub fn settings<const D: usize>(&self) -> Settings<D> {
        let s = &self.simulation;
        let res: [u32; D] = std::array::from_fn(|a| s.resolution.get(a).copied().unwrap_or(8));
        let mut settings = Settings::<D>::new(res[0], s.dt.unwrap_or(1e-4));
        settings.res = res;
        settings.dx = self.dx();
        if let Some(g) = &s.gravity {
            settings.gravity = std::array::from_fn(|a| g.get(a).copied().unwrap_or(0.0));
        }
        settings.spline = match s.spline {
            SplineName::Quadratic => Spline::Quadratic,
            SplineName::Cubic => Spline::Cubic,
        };
        settings.flip = s.flip;
        settings.damping = s.damping;
        settings.sort_every = s.sort_every;
        settings.f_bar = s.f_bar;
        settings.surface_tension = self
            .materials
            .iter()
            .any(|m| m.get_ref().surface_tension.is_some_and(|t| t > 0.0));
        settings.heat = s.heat.map(|h| Heat {
            walls: h
                .wall_temperature
                .map_or(HeatBoundary::Insulated, HeatBoundary::Fixed),
        });
        if let Some(v) = s.bulk_viscosity {
            settings.bulk_viscosity = BulkViscosity {
                linear: v.linear,
                quadratic: v.quadratic,
            };
        }
        settings.time_step = match s.dt {
            Some(dt) => TimeStep::Fixed(dt),
            None => TimeStep::Adaptive {
                cfl: s.cfl.unwrap_or(0.5),
                max: s.max_dt.unwrap_or(1e-3),
            },
        };
        settings.walls = Walls {
            thickness: s.walls.thickness,
            condition: s.walls.condition.with(s.walls.friction),
        };
        let blocks: u32 = res.iter().map(|r| r / s.grid.block.max(1)).product();
        let reserve = s.grid.reserve.unwrap_or(64.min(blocks));
        settings.grid = match s.grid.layout {
            LayoutName::Dense => GridLayout::Dense,
            LayoutName::Sparse | LayoutName::Bitmasked => GridLayout::Sparse {
                block: s.grid.block,
                bitmasked: s.grid.layout == LayoutName::Bitmasked,
                reserve,
            },
        };
        settings
    }

    /// Builds the solver with every material, body, collider and emitter of the scene.
    pub fn build<S: Space<D>, const D: usize>(
        &self,
        backend: &BackendRef,
    ) -> Result<Solver<S, D>, SceneError> {
        self.build_seeded(backend, self.simulation.seed)
    }

    /// `build` with another seed for the random particle placement.
    pub fn build_seeded<S: Space<D>, const D: usize>(
        &self,
        backend: &BackendRef,
        seed: u32,
    ) -> Result<Solver<S, D>, SceneError> {
        let fail = |source| SceneError::Build {
            file: self.file.clone(),
            source,
        };
        let mut solver = Solver::<S, D>::new(backend, self.settings::<D>()).map_err(fail)?;
        solver.set_seed(seed);
        let mut ids = Vec::new();
        for m in &self.materials {
            let material = m
                .get_ref()
                .to_material()
                .map_err(|e| self.at(m.span().start, e))?;
            let id = solver.add_material(material).map_err(fail)?;
            if let Some(thermal) = m.get_ref().thermal() {
                solver
                    .set_thermal(id, thermal)
                    .map_err(|e| self.at(m.span().start, e.to_string()))?;
            }
            if let Some(sigma) = m.get_ref().surface_tension {
                solver
                    .set_surface_tension(id, sigma)
                    .map_err(|e| self.at(m.span().start, e.to_string()))?;
            }
            ids.push((m.get_ref().name.clone(), id));
        }
        let id = |name: &str| -> MaterialId {
            ids.iter()
                .find(|(n, _)| n == name)
                .map(|(_, id)| *id)
                .unwrap_or(MaterialId(0))
        };
        let dx = self.dx();
        for b in &self.bodies {
            let body = b.get_ref();
            let at = b.span().start;
            let spacing = body.spacing.unwrap_or(dx / 2.0);
            let region = body.region().map_err(|e| self.at(at, e))?;
            let n = match &region {
                RegionSpec::Mesh { file, min, max } => {
                    let mesh = self
                        .load_mesh(file, min, max)
                        .map_err(|e| self.at(at, e.to_string()))?;
                    let points = mesh
                        .fill(spacing, body.sampling.into(), seed)
                        .map_err(|e| self.at(at, e.to_string()))?;
                    let positions: Vec<[f32; D]> = points
                        .iter()
                        .map(|p| std::array::from_fn(|a| p[a]))
                        .collect();
                    let volume = match body.sampling {
                        SamplingName::PoissonDisk => {
                            mesh.volume() as f32 / positions.len().max(1) as f32
                        }
                        _ => spacing.powi(3),
                    };
                    if !positions.is_empty() {
                        solver
                            .add_positions(
                                &positions,
                                volume,
                                id(&body.material),
                                vector(&body.velocity),
                            )
                            .map_err(|e| self.at(at, e.to_string()))?;
                    }
                    positions.len()
                }
                other => solver
                    .add_particles(
                        &other.region::<D>(),
                        body.sampling.into(),
                        spacing,
                        id(&body.material),
                        vector(&body.velocity),
                    )
                    .map_err(|e| self.at(at, e.to_string()))?,
            };
            if n == 0 {
                return Err(self.at(
                    b.span().start,
                    "the body holds no particle at its spacing; make it larger or the spacing smaller",
                ));
            }
        }
        for c in &self.colliders {
            let spec = c.get_ref();
            let fail = |e: String| self.at(c.span().start, e);
            let mut sdf = SdfId(0);
            if let Ok(ColliderShape::Mesh { file, min, max }) = spec.geometry() {
                // A lattice of half cells reaching two cells past the mesh, in a frame
                // centred on its box.
                let dx = f64::from(self.dx());
                let mesh = self
                    .load_mesh(&file, &min, &max)
                    .map_err(|e| fail(e.to_string()))?;
                let mut field = mesh
                    .signed_distance(dx / 2.0, 2.0 * dx)
                    .map_err(|e| fail(e.to_string()))?;
                for (o, c) in field.origin.iter_mut().zip(centre(&min, &max)) {
                    *o -= c;
                }
                sdf = solver.add_sdf(field).map_err(|e| fail(e.to_string()))?;
            }
            solver
                .add_collider(spec.to_collider(D, sdf))
                .map_err(|e| fail(e.to_string()))?;
        }
        for e in &self.emitters {
            let em = e.get_ref();
            solver
                .add_emitter(Emitter {
                    region: em
                        .region()
                        .map_err(|err| self.at(e.span().start, err))?
                        .region::<D>(),
                    sampling: em.sampling.into(),
                    spacing: em.spacing.unwrap_or(dx / 2.0),
                    material: id(&em.material),
                    velocity: vector(&em.velocity),
                    interval: em.interval,
                    start: em.start,
                    stop: em.stop,
                })
                .map_err(|err| self.at(e.span().start, err.to_string()))?;
        }
        Ok(solver)
    }

    /// Substeps per frame with a fixed time step (adaptive runs step until the frame time).
    pub fn frames(&self) -> u32 {
        self.simulation.frames
    }
}

fn vector<const D: usize>(v: &Option<Vec<f32>>) -> [f32; D] {
    std::array::from_fn(|a| v.as_ref().and_then(|v| v.get(a).copied()).unwrap_or(0.0))
}

fn vector3(v: &[f32]) -> [f32; 3] {
    std::array::from_fn(|a| v.get(a).copied().unwrap_or(0.0))
}

/// The centre of the box `min`..`max`: where a mesh collider's frame lies.
fn centre(min: &[f32], max: &[f32]) -> [f32; 3] {
    let (lo, hi) = (vector3(min), vector3(max));
    std::array::from_fn(|a| 0.5 * (lo[a] + hi[a]))
}

impl Scene {
    /// Loads a mesh body's file (relative to the scene file) and fits it into `min`..`max`.
    fn load_mesh(&self, file: &str, min: &[f32], max: &[f32]) -> Result<TriMesh, MeshError> {
        let base = Path::new(&self.file)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut mesh = TriMesh::load(base.join(file))?;
        mesh.fit_into(
            std::array::from_fn(|a| min[a] as f64),
            std::array::from_fn(|a| max[a] as f64),
        )?;
        Ok(mesh)
    }
}

impl RegionSpec {
    /// A box or sphere region (meshes are filled by `mpm::mesh`).
    fn region<const D: usize>(&self) -> Region<D> {
        match self {
            RegionSpec::Box { min, max } => Region::Box {
                min: vector(&Some(min.clone())),
                max: vector(&Some(max.clone())),
            },
            RegionSpec::Sphere { centre, radius } => Region::Sphere {
                centre: vector(&Some(centre.clone())),
                radius: *radius,
            },
            RegionSpec::Mesh { min, max, .. } => Region::Box {
                min: vector(&Some(min.clone())),
                max: vector(&Some(max.clone())),
            },
        }
    }
}

impl From<SamplingName> for Sampling {
    fn from(s: SamplingName) -> Self {
        match s {
            SamplingName::Regular => Sampling::Regular,
            SamplingName::Jittered => Sampling::Jittered,
            SamplingName::PoissonDisk => Sampling::PoissonDisk,
        }
    }
}

impl ColliderSpec {
    /// Picks the fields the shape takes, refusing missing and extra ones.
    pub fn geometry(&self) -> Result<ColliderShape, String> {
        let c = self;
        let analytic = c.point.is_some()
            || c.normal.is_some()
            || c.centre.is_some()
            || c.half.is_some()
            || c.radius.is_some();
        if c.shape == ShapeName::Mesh {
            return match (&c.file, &c.min, &c.max) {
                (Some(file), Some(min), Some(max)) if !analytic => Ok(ColliderShape::Mesh {
                    file: file.clone(),
                    min: min.clone(),
                    max: max.clone(),
                }),
                _ => Err(
                    "a mesh collider takes `file`, `min` and `max` (the box it is fitted \
                          into) only"
                        .into(),
                ),
            };
        }
        if c.file.is_some() || c.min.is_some() || c.max.is_some() || c.angular_velocity.is_some() {
            return Err(
                "only a mesh collider takes `file`, `min`, `max` and `angular_velocity`".into(),
            );
        }
        match (c.shape, &c.point, &c.normal, &c.centre, &c.half, c.radius) {
            (ShapeName::Plane, Some(p), Some(n), None, None, None) => Ok(ColliderShape::Plane {
                point: p.clone(),
                normal: n.clone(),
            }),
            (ShapeName::Box, None, None, Some(centre), Some(half), None) => {
                Ok(ColliderShape::Box {
                    centre: centre.clone(),
                    half: half.clone(),
                })
            }
            (ShapeName::Sphere, None, None, Some(centre), None, Some(radius)) => {
                Ok(ColliderShape::Sphere {
                    centre: centre.clone(),
                    radius,
                })
            }
            (ShapeName::Plane, ..) => {
                Err("a plane collider takes `point` and `normal` only".into())
            }
            (ShapeName::Box, ..) => Err("a box collider takes `centre` and `half` only".into()),
            (ShapeName::Mesh, ..) => unreachable!("meshes are taken above"),
            (ShapeName::Sphere, ..) => {
                Err("a sphere collider takes `centre` and `radius` only".into())
            }
        }
    }

    /// The collider, a mesh's as the distance field `sdf` placed at the centre of its box.
    fn to_collider(&self, d: usize, sdf: SdfId) -> Collider {
        // In 2D a box reaches through the unused third axis.
        let third = if d == 2 { 1.0 } else { 0.0 };
        let geometry = self.geometry().unwrap_or(ColliderShape::Sphere {
            centre: vec![0.0; 3],
            radius: 0.0,
        });
        let shape = match &geometry {
            ColliderShape::Plane { point, normal } => Shape::Plane {
                point: vector3(point),
                normal: vector3(normal),
            },
            ColliderShape::Box { centre, half } => {
                let mut h = vector3(half);
                if d == 2 {
                    h[2] = third;
                }
                Shape::Box {
                    centre: vector3(centre),
                    half: h,
                }
            }
            ColliderShape::Sphere { centre, radius } => Shape::Sphere {
                centre: vector3(centre),
                radius: *radius,
            },
            ColliderShape::Mesh { min, max, .. } => Shape::Sdf {
                sdf,
                position: centre(min, max),
                rotation: [0.0, 0.0, 0.0, 1.0],
                angular_velocity: self
                    .angular_velocity
                    .as_deref()
                    .map(vector3)
                    .unwrap_or([0.0; 3]),
            },
        };
        Collider {
            shape,
            condition: self.condition.with(self.friction),
            velocity: self.velocity.as_deref().map(vector3).unwrap_or([0.0; 3]),
            heat: self
                .temperature
                .map_or(HeatBoundary::Insulated, HeatBoundary::Fixed),
        }
    }
}

impl MaterialSpec {
    /// The thermal properties, where the file gives any (the rest take `Thermal`'s
    /// defaults).
    pub fn thermal(&self) -> Option<Thermal> {
        let given = self.conductivity.is_some()
            || self.specific_heat.is_some()
            || self.temperature.is_some()
            || self.softening.is_some();
        let default = Thermal::default();
        given.then(|| Thermal {
            conductivity: self.conductivity.unwrap_or(default.conductivity),
            specific_heat: self.specific_heat.unwrap_or(default.specific_heat),
            temperature: self.temperature.unwrap_or(default.temperature),
            softening: self
                .softening
                .as_ref()
                .map(|points| points.iter().map(|p| (p[0], p[1])).collect())
                .unwrap_or_default(),
        })
    }

    /// The material, with the model's defaults for what the file leaves out.
    pub fn to_material(&self) -> Result<Material, String> {
        let fail = |message: String| format!("material `{}`: {message}", self.name);
        let mut given = Vec::new();
        for (key, value) in &self.parameters {
            let value = match value {
                toml::Value::Float(x) => ParamValue::Number(*x),
                toml::Value::Integer(i) => ParamValue::Number(*i as f64),
                toml::Value::Boolean(b) => ParamValue::Bool(*b),
                other => {
                    return Err(fail(format!(
                        "`{key}` = {other} is neither a number nor true or false"
                    )))
                }
            };
            given.push((key.as_str(), value));
        }
        Material::from_parameters(&self.model, &given).map_err(|e| match e {
            SolverError::InvalidParameter(message) => fail(message),
            other => fail(other.to_string()),
        })
    }
}

/// The scene file of a path, or the built-in default when there is none.
pub fn load_or_default(path: Option<&PathBuf>) -> Result<Scene, SceneError> {
    match path {
        Some(p) => Scene::load(p),
        None => Scene::parse("<built-in dam_break.toml>", DEFAULT_SCENE),
    }
}

/// The built-in default: the 2D fluid-solid dam break.
pub const DEFAULT_SCENE: &str = include_str!("../scenes/dam_break.toml");
