//! Particles rewritten in the order of their grid blocks every few substeps
//! (`Settings::sort_every`): a block's particles then sit together in memory, so P2G's adds
//! and G2P's reads stay in few cache lines (and, on a GPU, neighbouring invocations hit
//! neighbouring nodes). The bins come from the counting sort of `crate::binning`; each
//! particle field is gathered into one scratch field of its type and swapped in, so the
//! sort costs one field of each type, not a second set of particles.

use super::error::Result;
use super::space::Space;
use super::Particles;
use crate::binning::{Bins, Position};
use crate::{BackendKind, BackendRef, Elem, Field};

pub(super) struct Sorter<V: Elem, M: Elem> {
    bins: Bins,
    vec: Field<V>,
    mat: Field<M>,
    scalar: Field<f32>,
    int: Field<i32>,
}

impl<V: Position, M: Elem> Sorter<V, M> {
    /// Bins of `block`^D cells over a grid of `res` cells.
    pub fn new(backend: &BackendRef, res: &[u32], block: u32) -> Result<Self> {
        let bins = Bins::new(backend, res, block as i32, 1)?;
        // The CPU's runs are reproducible: each bin keeps its particles in index order.
        let bins = match backend.kind() {
            BackendKind::Cpu => bins.stable(),
            _ => bins,
        };
        Ok(Sorter {
            bins,
            vec: Field::new(backend, [1])?,
            mat: Field::new(backend, [1])?,
            scalar: Field::new(backend, [1])?,
            int: Field::new(backend, [1])?,
        })
    }

    /// Rewrites the particles in use in the order of their blocks.
    pub fn sort<S: Space<D, V = V, M = M>, const D: usize>(
        &mut self,
        p: &mut Particles<V, M>,
        inv_dx: f32,
    ) -> Result<()> {
        let n = p.count();
        if n == 0 {
            return Ok(());
        }
        // The scratch fields take the particles' capacity, so that every particle field
        // keeps one length after the swaps.
        let capacity = p.capacity();
        if self.vec.len() != capacity as usize {
            let backend = p.x.backend().clone();
            self.vec = Field::new(&backend, [capacity])?;
            self.mat = Field::new(&backend, [capacity])?;
            self.scalar = Field::new(&backend, [capacity])?;
            self.int = Field::new(&backend, [capacity])?;
        }
        self.bins.update(&p.x, n, inv_dx)?;
        let order = &self.bins.order;
        let (vec, mat, scalar, int) = (
            &mut self.vec,
            &mut self.mat,
            &mut self.scalar,
            &mut self.int,
        );
        // Four rounds, one field of each type at most in each: (x, c, jp, material),
        // (v, grad_u, mass), (tau, vol), (temperature).
        S::gather(
            order,
            (&p.x, vec),
            (&p.c, mat),
            (&p.jp, scalar),
            (&p.material, int),
            [n; 4],
        )?;
        std::mem::swap(&mut p.x, vec);
        std::mem::swap(&mut p.c, mat);
        std::mem::swap(&mut p.jp, scalar);
        std::mem::swap(&mut p.material, int);
        S::gather(
            order,
            (&p.v, vec),
            (&p.grad_u, mat),
            (&p.mass, scalar),
            (&p.material, int),
            [n, n, n, 0],
        )?;
        std::mem::swap(&mut p.v, vec);
        std::mem::swap(&mut p.grad_u, mat);
        std::mem::swap(&mut p.mass, scalar);
        S::gather(
            order,
            (&p.x, vec),
            (&p.tau, mat),
            (&p.vol, scalar),
            (&p.material, int),
            [0, n, n, 0],
        )?;
        std::mem::swap(&mut p.tau, mat);
        std::mem::swap(&mut p.vol, scalar);
        S::gather(
            order,
            (&p.x, vec),
            (&p.tau, mat),
            (&p.temperature, scalar),
            (&p.material, int),
            [0, 0, n, 0],
        )?;
        std::mem::swap(&mut p.temperature, scalar);
        Ok(())
    }
}
