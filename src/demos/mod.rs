//! Runnable simulations for the examples and `mpm bench`: Taichi's benchmark scenes as
//! dedicated kernels (mpm99, mpm88, mpm3d), a scene file's solver, the layout benchmark's
//! blob and the custom-kernel demo. (Scene files themselves live in `scenes/` and are read by
//! `scene_file`.)

pub mod blob;
pub mod custom_kernel;
pub mod jfluid;
pub mod mpm99;

use crate::Result;
use mpm_core::glam::Vec2;
use mpm_core::solver::{Solver, Space};
use mpm_core::BackendRef;

/// What the example runner and `mpm bench` need of a simulation.
pub trait Demo {
    fn particles(&self) -> usize;
    fn backend(&self) -> &BackendRef;
    fn substep(&mut self) -> Result<()>;
    /// `n` substeps as one batch of the backend's work (see [`mpm_core::batched`]).
    fn substeps(&mut self, n: usize) -> Result<()> {
        let backend = self.backend().clone();
        mpm_core::batched(backend.as_ref(), || {
            for _ in 0..n {
                self.substep()?;
            }
            Ok(())
        })
    }
    /// Substeps between two rendered frames.
    fn substeps_per_frame(&self) -> usize;
    /// Particle positions in the unit square (3D scenes: seen along z) and material ids.
    fn frame(&mut self) -> Result<(Vec<Vec2>, Vec<i32>)>;
    /// Bytes of the grid fields and of the particle fields.
    fn memory(&self) -> (usize, usize);
}

impl Demo for mpm99::Mpm99 {
    fn particles(&self) -> usize {
        self.x.len()
    }
    fn backend(&self) -> &BackendRef {
        self.x.backend()
    }
    fn substep(&mut self) -> Result<()> {
        Ok(mpm99::Mpm99::substep(self)?)
    }
    fn substeps_per_frame(&self) -> usize {
        mpm99::Mpm99::substeps_per_frame(self)
    }
    fn frame(&mut self) -> Result<(Vec<Vec2>, Vec<i32>)> {
        Ok((self.x.download()?, self.material.download()?))
    }
    fn memory(&self) -> (usize, usize) {
        let grid = self.grid.bytes() + self.next.bytes();
        let particles = self.x.bytes()
            + self.v.bytes()
            + self.c.bytes()
            + self.f.bytes()
            + self.jp.bytes()
            + self.material.bytes();
        (grid, particles)
    }
}

impl Demo for jfluid::Mpm88 {
    fn particles(&self) -> usize {
        self.x.len()
    }
    fn backend(&self) -> &BackendRef {
        self.x.backend()
    }
    fn substep(&mut self) -> Result<()> {
        Ok(jfluid::Mpm88::substep(self)?)
    }
    fn substeps_per_frame(&self) -> usize {
        50
    }
    fn frame(&mut self) -> Result<(Vec<Vec2>, Vec<i32>)> {
        Ok((self.x.download()?, vec![0; self.x.len()]))
    }
    fn memory(&self) -> (usize, usize) {
        (
            self.grid_v.bytes() + self.grid_m.bytes(),
            self.x.bytes() + self.v.bytes() + self.c.bytes() + self.j.bytes() + self.blocks.bytes(),
        )
    }
}

impl Demo for jfluid::Mpm3d {
    fn particles(&self) -> usize {
        self.x.len()
    }
    fn backend(&self) -> &BackendRef {
        self.x.backend()
    }
    fn substep(&mut self) -> Result<()> {
        Ok(jfluid::Mpm3d::substep(self)?)
    }
    fn substeps_per_frame(&self) -> usize {
        25
    }
    fn frame(&mut self) -> Result<(Vec<Vec2>, Vec<i32>)> {
        let x = self.x.download()?;
        Ok((x.iter().map(|p| p.truncate()).collect(), vec![0; x.len()]))
    }
    fn memory(&self) -> (usize, usize) {
        (
            self.grid_v.bytes() + self.grid_m.bytes(),
            self.x.bytes() + self.v.bytes() + self.c.bytes() + self.j.bytes() + self.blocks.bytes(),
        )
    }
}

/// A solver scene: its substeps per frame ride along.
pub struct SolverDemo<S> {
    pub solver: S,
    pub substeps_per_frame: usize,
}

impl<S: Space<D>, const D: usize> SolverDemo<Solver<S, D>> {
    /// Frames of `frame_time` seconds, at the solver's first time step (at least one substep).
    pub fn with_frame_time(solver: Solver<S, D>, frame_time: f32) -> Self {
        let substeps_per_frame = ((frame_time / solver.next_dt()).round() as usize).max(1);
        SolverDemo {
            solver,
            substeps_per_frame,
        }
    }
}

impl<S: Space<D>, const D: usize> Demo for SolverDemo<Solver<S, D>> {
    fn particles(&self) -> usize {
        self.solver.particles.count() as usize
    }
    fn backend(&self) -> &BackendRef {
        self.solver.backend()
    }
    fn substep(&mut self) -> Result<()> {
        self.solver.substep()?;
        Ok(())
    }
    fn substeps_per_frame(&self) -> usize {
        self.substeps_per_frame
    }
    /// The domain's x and y scaled into the unit square (3D scenes seen along z).
    fn frame(&mut self) -> Result<(Vec<Vec2>, Vec<i32>)> {
        let s = self.solver.settings();
        let size = (s.res[0].max(s.res[1])) as f32 * s.dx;
        let (x, m) = self.solver.positions()?;
        Ok((x.iter().map(|p| Vec2::new(p[0], p[1]) / size).collect(), m))
    }
    fn memory(&self) -> (usize, usize) {
        (self.solver.grid.bytes(), self.solver.particles.bytes())
    }
}
