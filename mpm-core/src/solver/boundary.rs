//! Domain walls and colliders as the host describes them, and their table on the device.

use glam::{Mat3, Quat, Vec3, Vec4};

use super::error::{Result, SolverError};
use super::kernels;

/// What a wall or collider does to the grid velocity at nodes inside it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Condition {
    /// Velocity relative to the surface becomes zero.
    Sticky,
    /// The normal part goes; the tangential part keeps sliding (less friction).
    Slip { friction: f32 },
    /// Like slip, but only while moving into the surface: material may leave it.
    Separate { friction: f32 },
}

impl Condition {
    /// `(condition code, friction)` as the kernels see them.
    pub(crate) fn code(&self) -> Result<(i32, f32)> {
        let (code, friction) = match *self {
            Condition::Sticky => (kernels::STICKY, 0.0),
            Condition::Slip { friction } => (kernels::SLIP, friction),
            Condition::Separate { friction } => (kernels::SEPARATE, friction),
        };
        if !(friction.is_finite() && friction >= 0.0) {
            return Err(SolverError::InvalidParameter(format!(
                "friction coefficient {friction} must be finite and >= 0"
            )));
        }
        Ok((code, friction))
    }
}

/// How a wall or collider exchanges heat with the material touching it (with
/// `Settings::heat` on).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum HeatBoundary {
    /// No heat flows through it.
    #[default]
    Insulated,
    /// Held at this temperature: the grid nodes inside it and up to half a cell outside take
    /// it every substep, so the material in contact exchanges heat with it as with an
    /// infinite reservoir (see `Heat`).
    Fixed(f32),
}

impl HeatBoundary {
    /// `(1 if fixed else 0, temperature)` as the kernels see them.
    pub(crate) fn code(&self) -> Result<(f32, f32)> {
        match *self {
            HeatBoundary::Insulated => Ok((0.0, 0.0)),
            HeatBoundary::Fixed(t) if t.is_finite() => Ok((1.0, t)),
            HeatBoundary::Fixed(t) => Err(SolverError::InvalidParameter(format!(
                "fixed temperature {t} is not finite"
            ))),
        }
    }
}

/// Walls `thickness` cells thick on every side of the domain (0: none; otherwise at least
/// 3, so that the surfaces lie inside the two cells of border particles need).
///
/// Along each axis the grid nodes `cell <= thickness` and `cell >= res - thickness` take
/// the condition, and the surfaces where particles stop lie half a cell behind those nodes,
/// at `(thickness - 1/2) dx` and `(res - thickness + 1/2) dx`: mirror images about the
/// domain's centre. Particles that cross a surface are put back on it. Half a cell, because
/// then the first free node has material over its whole stencil and a body resting on a
/// wall is in discrete equilibrium; with the surface on the held nodes, the first free node
/// misses half a cell of material, which showed as a standing pressure error of 10% of
/// rho g H in the bottom layer of water at rest and as flows along slip walls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Walls {
    pub thickness: u32,
    pub condition: Condition,
}

impl Walls {
    /// Where the surfaces lie along an axis of `res` cells of size `dx`: `(low, high)`;
    /// the whole axis for walls of thickness 0.
    pub fn surfaces(&self, res: u32, dx: f32) -> (f32, f32) {
        if self.thickness == 0 {
            return (0.0, res as f32 * dx);
        }
        let t = self.thickness as f32 - 0.5;
        (t * dx, (res as f32 - t) * dx)
    }
}

impl Default for Walls {
    /// Taichi's walls: three cells, separating, no friction.
    fn default() -> Self {
        Walls {
            thickness: 3,
            condition: Condition::Separate { friction: 0.0 },
        }
    }
}

/// A signed distance field sampled on a regular lattice in a collider's own frame: the
/// distance to the body's surface, negative inside (for example a closed mesh's,
/// `mpm::mesh::TriMesh::signed_distance`). Between samples it is interpolated
/// multilinearly; outside the lattice is outside the body, so the lattice should reach a few
/// cells beyond the surface. Added to a solver once (`Solver::add_sdf`), used by any number
/// of `Shape::Sdf` colliders.
#[derive(Clone, Debug, PartialEq)]
pub struct Sdf {
    /// Where the first sample lies, in the collider's frame.
    pub origin: [f32; 3],
    /// Distance between samples along every axis.
    pub spacing: f32,
    /// Samples per axis (the third is 1 in 2D).
    pub dims: [u32; 3],
    /// The samples, x fastest, then y, then z.
    pub values: Vec<f32>,
}

impl Sdf {
    /// Samples `distance` at the lattice's points.
    pub fn from_fn(
        origin: [f32; 3],
        spacing: f32,
        dims: [u32; 3],
        distance: impl Fn([f32; 3]) -> f32,
    ) -> Self {
        let mut values = Vec::with_capacity(dims.iter().map(|&n| n as usize).product());
        for k in 0..dims[2] {
            for j in 0..dims[1] {
                for i in 0..dims[0] {
                    let at = [i, j, k];
                    values.push(distance(std::array::from_fn(|a| {
                        origin[a] + at[a] as f32 * spacing
                    })));
                }
            }
        }
        Sdf {
            origin,
            spacing,
            dims,
            values,
        }
    }

    /// Checks the lattice for a `dimension`-D solver: finite, at least two samples along each
    /// axis (one along z in 2D), as many values as samples.
    pub fn validate(&self, dimension: usize) -> Result<()> {
        let bad = |m: String| {
            Err(SolverError::InvalidParameter(format!(
                "distance field: {m}"
            )))
        };
        if !(self.spacing.is_finite() && self.spacing > 0.0) {
            return bad(format!("spacing {} must be finite and > 0", self.spacing));
        }
        if !self.origin.iter().all(|c| c.is_finite()) {
            return bad(format!("origin {:?} is not finite", self.origin));
        }
        let flat = dimension == 2;
        if (0..3).any(|a| match (a, flat) {
            (2, true) => self.dims[a] != 1,
            _ => self.dims[a] < 2,
        }) {
            return bad(format!(
                "{:?} samples: at least 2 along each axis{}",
                self.dims,
                if flat { " and 1 along z in 2D" } else { "" }
            ));
        }
        let count = self.dims.iter().map(|&n| n as u64).product::<u64>();
        if count != self.values.len() as u64 {
            return bad(format!(
                "{} values for {:?} samples",
                self.values.len(),
                self.dims
            ));
        }
        if let Some(v) = self.values.iter().find(|v| !v.is_finite()) {
            return bad(format!("a sample is {v}"));
        }
        Ok(())
    }
}

/// A distance field added to a solver (`Solver::add_sdf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdfId(pub u32);

/// Where a solver keeps an added distance field: its samples from `first` on in the device's
/// storage of all of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SdfLattice {
    pub first: u32,
    pub origin: [f32; 3],
    pub spacing: f32,
    pub dims: [u32; 3],
}

impl SdfLattice {
    /// The farthest point of the lattice from the collider's position (its frame's origin),
    /// so that `|omega| reach` bounds the speed of its spin.
    fn reach(&self) -> f32 {
        let far = |a: usize| {
            let lo = self.origin[a];
            let hi = lo + (self.dims[a] - 1) as f32 * self.spacing;
            lo.abs().max(hi.abs())
        };
        (0..3).map(|a| far(a) * far(a)).sum::<f32>().sqrt()
    }
}

/// A collider's shape; in 2D the third coordinate is ignored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// The half space behind a plane through `point` with outward `normal`.
    Plane {
        point: [f32; 3],
        normal: [f32; 3],
    },
    /// An axis-aligned box.
    Box {
        centre: [f32; 3],
        half: [f32; 3],
    },
    Sphere {
        centre: [f32; 3],
        radius: f32,
    },
    /// A rigid body given by a distance field (`Solver::add_sdf`) in its own frame, placed
    /// at `position` and turned by the unit quaternion `rotation` (x, y, z, w), spinning at
    /// `angular_velocity` (rad/s, about `position`; in 2D about z only) as it moves.
    Sdf {
        sdf: SdfId,
        position: [f32; 3],
        rotation: [f32; 4],
        angular_velocity: [f32; 3],
    },
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Plane { point, normal } => {
                write!(f, "plane through {point:?} with normal {normal:?}")
            }
            Shape::Box { centre, half } => {
                write!(f, "box at {centre:?} with half extents {half:?}")
            }
            Shape::Sphere { centre, radius } => {
                write!(f, "sphere at {centre:?} of radius {radius}")
            }
            Shape::Sdf {
                sdf,
                position,
                rotation,
                angular_velocity,
            } => write!(
                f,
                "distance field {} at {position:?} turned by {rotation:?}, spinning at \
                 {angular_velocity:?}",
                sdf.0
            ),
        }
    }
}

/// A rigid collider moving at a prescribed velocity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collider {
    pub shape: Shape,
    pub condition: Condition,
    pub velocity: [f32; 3],
    pub heat: HeatBoundary,
}

impl Collider {
    /// A collider at rest, insulated.
    pub fn fixed(shape: Shape, condition: Condition) -> Self {
        Collider {
            shape,
            condition,
            velocity: [0.0; 3],
            heat: HeatBoundary::Insulated,
        }
    }

    /// Moves the collider by its velocity (and turns it by its spin) over `dt`.
    pub(crate) fn advance(&mut self, dt: f32) {
        let v = self.velocity;
        let shift = |p: &mut [f32; 3]| {
            for a in 0..3 {
                p[a] += v[a] * dt;
            }
        };
        match &mut self.shape {
            Shape::Plane { point, .. } => shift(point),
            Shape::Box { centre, .. } | Shape::Sphere { centre, .. } => shift(centre),
            Shape::Sdf {
                position,
                rotation,
                angular_velocity,
                ..
            } => {
                shift(position);
                let turn = Quat::from_scaled_axis(Vec3::from_array(*angular_velocity) * dt);
                *rotation = (turn * Quat::from_array(*rotation)).normalize().to_array();
            }
        }
    }

    pub(crate) fn is_moving(&self) -> bool {
        self.velocity != [0.0; 3]
            || matches!(self.shape, Shape::Sdf { angular_velocity, .. } if angular_velocity != [0.0; 3])
    }

    /// The fastest speed of any of its points: the translation plus the spin times the
    /// reach of its distance field (`lattices` as in `rows`).
    pub(crate) fn top_speed(&self, lattices: &[SdfLattice]) -> f32 {
        let speed = Vec3::from_array(self.velocity).length();
        match self.shape {
            Shape::Sdf {
                sdf,
                angular_velocity,
                ..
            } => {
                let reach = lattices.get(sdf.0 as usize).map_or(0.0, SdfLattice::reach);
                speed + Vec3::from_array(angular_velocity).length() * reach
            }
            _ => speed,
        }
    }

    /// Checks the shape: finite numbers, a non-zero normal, positive sizes.
    pub fn validate(&self) -> Result<()> {
        self.condition.code()?;
        self.heat.code()?;
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        let bad = |what: &str| {
            Err(SolverError::InvalidParameter(format!(
                "collider {what} ({}, velocity {:?})",
                self.shape, self.velocity
            )))
        };
        if !finite(&self.velocity) {
            return bad("velocity is not finite");
        }
        match self.shape {
            Shape::Plane { point, normal } => {
                if !finite(&point) || !finite(&normal) {
                    return bad("plane is not finite");
                }
                if normal.iter().map(|x| x * x).sum::<f32>() < 1e-12 {
                    return bad("plane normal is zero");
                }
            }
            Shape::Box { centre, half } => {
                if !finite(&centre) || !half.iter().all(|h| h.is_finite() && *h > 0.0) {
                    return bad("box needs a finite centre and half extents > 0");
                }
            }
            Shape::Sphere { centre, radius } => {
                if !finite(&centre) || !radius.is_finite() || radius <= 0.0 {
                    return bad("sphere needs a finite centre and radius > 0");
                }
            }
            Shape::Sdf {
                position,
                rotation,
                angular_velocity,
                ..
            } => {
                if !finite(&position) || !finite(&angular_velocity) {
                    return bad("needs a finite position and angular velocity");
                }
                let norm = rotation.iter().map(|x| x * x).sum::<f32>();
                if !(norm.is_finite() && (norm - 1.0).abs() < 1e-3) {
                    return bad("rotation must be a unit quaternion (x, y, z, w)");
                }
            }
        }
        Ok(())
    }

    /// The collider's table rows (`kernels::COLLIDER_ROWS`), its distance field (if any)
    /// found in `lattices`, indexed by `SdfId`.
    pub(crate) fn rows(&self, lattices: &[SdfLattice]) -> [Vec4; kernels::COLLIDER_ROWS as usize] {
        let (code, friction) = self.condition.code().unwrap_or((kernels::STICKY, 0.0));
        let (held, temperature) = self.heat.code().unwrap_or((0.0, 0.0));
        let v3 = |a: [f32; 3], w: f32| Vec4::new(a[0], a[1], a[2], w);
        let mut rotation = Mat3::IDENTITY;
        let (mut omega, mut dims, mut first) = ([0.0; 3], [0.0; 3], 0.0);
        let (shape, at, extra) = match self.shape {
            Shape::Plane { point, normal } => {
                let len = normal.iter().map(|x| x * x).sum::<f32>().sqrt();
                (
                    kernels::PLANE,
                    v3(point, 0.0),
                    v3(normal.map(|x| x / len), 0.0),
                )
            }
            Shape::Box { centre, half } => (kernels::BOX, v3(centre, 0.0), v3(half, 0.0)),
            Shape::Sphere { centre, radius } => (kernels::SPHERE, v3(centre, radius), Vec4::ZERO),
            Shape::Sdf {
                sdf,
                position,
                rotation: q,
                angular_velocity,
            } => {
                // The solver checks the id when the collider is added.
                let l = lattices[sdf.0 as usize];
                rotation = Mat3::from_quat(Quat::from_array(q).normalize());
                omega = angular_velocity;
                dims = l.dims.map(|n| n as f32);
                // Exact: the solver keeps all samples below 2^24.
                first = l.first as f32;
                (kernels::SDF, v3(position, 0.0), v3(l.origin, l.spacing))
            }
        };
        [
            Vec4::new(shape as f32, code as f32, friction, first),
            at,
            extra,
            v3(self.velocity, temperature),
            v3(omega, held),
            rotation.x_axis.extend(0.0),
            rotation.y_axis.extend(0.0),
            rotation.z_axis.extend(0.0),
            v3(dims, 0.0),
        ]
    }
}
