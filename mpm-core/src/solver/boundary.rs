//! Domain walls and colliders as the host describes them, and their table on the device.

use glam::Vec4;

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
        }
    }
}

/// A rigid collider moving at a prescribed velocity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Collider {
    pub shape: Shape,
    pub condition: Condition,
    pub velocity: [f32; 3],
}

impl Collider {
    pub fn fixed(shape: Shape, condition: Condition) -> Self {
        Collider {
            shape,
            condition,
            velocity: [0.0; 3],
        }
    }

    /// Moves the collider by its velocity over `dt`.
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
        }
    }

    pub(crate) fn is_moving(&self) -> bool {
        self.velocity != [0.0; 3]
    }

    /// Checks the shape: finite numbers, a non-zero normal, positive sizes.
    pub fn validate(&self) -> Result<()> {
        self.condition.code()?;
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
        }
        Ok(())
    }

    /// The collider's four table rows.
    pub(crate) fn rows(&self) -> [Vec4; 4] {
        let (code, friction) = self.condition.code().unwrap_or((kernels::STICKY, 0.0));
        let v3 = |a: [f32; 3], w: f32| Vec4::new(a[0], a[1], a[2], w);
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
        };
        [
            Vec4::new(shape as f32, code as f32, friction, 0.0),
            at,
            extra,
            v3(self.velocity, 0.0),
        ]
    }
}
