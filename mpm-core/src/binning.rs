//! Particles grouped by grid block, for binned loops (`for p in grid.bins(order, starts,
//! block)`, see [`crate::bins`]): a counting sort every substep, written in the kernel
//! language so that it runs where the particles are. Each particle takes a slot in its bin
//! with an atomic add that returns the old count, an exclusive scan of the counts gives each
//! bin's start, and each particle is written at its bin's start plus its slot. The order
//! within a bin depends on the scheduler; binned loops on the CPU do not depend on it.

use glam::{IVec2, IVec3, Vec2, Vec3};

use crate::{kernel, BackendRef, Elem, Field, Result};

/// Entries of the scanned array one invocation sums serially.
pub const SCAN_CHUNK: u32 = 1024;

/// `out[i] = values[0] + .. + values[i - 1]` for `i` in `0..n` (`out[0] = 0`), in three
/// passes: each chunk of [`SCAN_CHUNK`] entries is summed into `partial`, one invocation
/// scans the chunk sums, and each chunk scans its entries from its sum's prefix. Wrapping
/// u32 arithmetic; `partial` holds `chunks = ceil(n / SCAN_CHUNK)` entries.
#[kernel]
pub fn exclusive_scan(
    values: &Field<u32>,
    partial: &mut Field<u32>,
    out: &mut Field<u32>,
    n: u32,
    chunks: u32,
) {
    for c in 0..chunks {
        let start = c * SCAN_CHUNK;
        let end = min(start + SCAN_CHUNK, n);
        let mut sum = 0u32;
        for i in start..end {
            sum += values[i];
        }
        partial[c] = sum;
    }
    for _once in 0..1 {
        let mut sum = 0u32;
        for c in 0..chunks {
            let here = partial[c];
            partial[c] = sum;
            sum += here;
        }
    }
    for c in 0..chunks {
        let start = c * SCAN_CHUNK;
        let end = min(start + SCAN_CHUNK, n);
        let mut sum = partial[c];
        for i in start..end {
            out[i] = sum;
            sum += values[i];
        }
    }
}

pub mod dim2;
pub mod dim3;

/// Particle positions binning can read: `Vec2` in 2D, `Vec3` in 3D.
pub trait Position: Elem {
    /// The grid's dimensions.
    const DIM: usize;
    /// Runs the dimension's [`dim2::count_bins`] / [`dim3::count_bins`] (`shape` padded
    /// with ones).
    #[allow(clippy::too_many_arguments)]
    fn count_bins(
        x: &Field<Self>,
        slot: &mut Field<u32>,
        counts: &mut Field<u32>,
        count: u32,
        bins: u32,
        inv_dx: f32,
        shape: [u32; 3],
        block: i32,
    ) -> Result<()>;
    /// Runs the dimension's `order_bins`.
    #[allow(clippy::too_many_arguments)]
    fn order_bins(
        x: &Field<Self>,
        slot: &Field<u32>,
        starts: &Field<u32>,
        order: &mut Field<u32>,
        count: u32,
        inv_dx: f32,
        shape: [u32; 3],
        block: i32,
    ) -> Result<()>;
}

macro_rules! position {
    ($v:ty, $dim:ident, $ivec:ident, $d:literal, [$($a:literal),*]) => {
        impl Position for $v {
            const DIM: usize = $d;
            fn count_bins(
                x: &Field<Self>,
                slot: &mut Field<u32>,
                counts: &mut Field<u32>,
                count: u32,
                bins: u32,
                inv_dx: f32,
                shape: [u32; 3],
                block: i32,
            ) -> Result<()> {
                let shape = $ivec::new($(shape[$a] as i32),*);
                $dim::count_bins(x, slot, counts, count, bins, inv_dx, shape, block)
            }
            fn order_bins(
                x: &Field<Self>,
                slot: &Field<u32>,
                starts: &Field<u32>,
                order: &mut Field<u32>,
                count: u32,
                inv_dx: f32,
                shape: [u32; 3],
                block: i32,
            ) -> Result<()> {
                let shape = $ivec::new($(shape[$a] as i32),*);
                $dim::order_bins(x, slot, starts, order, count, inv_dx, shape, block)
            }
        }
    };
}
position!(Vec2, dim2, IVec2, 2, [0, 1]);
position!(Vec3, dim3, IVec3, 3, [0, 1, 2]);

/// The bins of a grid's blocks and the particles in them, rebuilt by [`Bins::update`].
pub struct Bins {
    /// The particles, bin by bin (`order[starts[b]..starts[b + 1]]` are in bin `b`).
    pub order: Field<u32>,
    /// Where each bin's particles start in `order`; one more entry than there are bins.
    pub starts: Field<u32>,
    counts: Field<u32>,
    slot: Field<u32>,
    partial: Field<u32>,
    shape: [u32; 3],
    block: i32,
    bins: u32,
    /// The particle count of the last update, and the calls of [`Bins::refresh`] since.
    binned: Option<u32>,
    since: u32,
}

impl Bins {
    /// Bins for the blocks of `block`^D cells of a grid of `shape` cells (one entry per axis)
    /// and up to `capacity` particles. A block size below 2 is taken as 2.
    pub fn new(backend: &BackendRef, shape: &[u32], block: i32, capacity: u32) -> Result<Self> {
        let block = block.max(2);
        let mut padded = [1u32; 3];
        padded[..shape.len()].copy_from_slice(shape);
        let bins: u32 = shape
            .iter()
            .map(|&s| s.div_ceil(block as u32).max(1))
            .product();
        let chunks = (bins + 1).div_ceil(SCAN_CHUNK);
        let capacity = capacity.max(1);
        Ok(Bins {
            order: Field::new(backend, [capacity])?,
            starts: Field::new(backend, [bins + 1])?,
            counts: Field::new(backend, [bins + 1])?,
            slot: Field::new(backend, [capacity])?,
            partial: Field::new(backend, [chunks])?,
            shape: padded,
            block,
            bins,
            binned: None,
            since: 0,
        })
    }

    /// The block size, for `grid.bins(order, starts, block)`.
    pub fn block(&self) -> i32 {
        self.block
    }

    /// Rebins when the particle count changed since the last update or `every` calls have
    /// passed. Between updates the bins stay a valid grouping of the same particles (each in
    /// exactly one bin), however far they moved: a binned loop still runs each particle
    /// once, and on the CPU only the adds of particles that left their block's window take
    /// the slower queued path. Particles move a fraction of a cell per substep, so a few
    /// substeps keep nearly all of them in their windows.
    pub fn refresh<V: Position>(
        &mut self,
        x: &Field<V>,
        count: u32,
        inv_dx: f32,
        every: u32,
    ) -> Result<()> {
        self.since += 1;
        if self.binned != Some(count) || self.since >= every {
            self.update(x, count, inv_dx)?;
        }
        Ok(())
    }

    /// Bytes the bins hold.
    pub fn bytes(&self) -> usize {
        [
            &self.order,
            &self.starts,
            &self.counts,
            &self.slot,
            &self.partial,
        ]
        .iter()
        .map(|f| f.bytes())
        .sum()
    }

    /// Bins particles `0..count` at `x` (positions in units where a cell is `1 / inv_dx`
    /// wide); particles outside the grid go to the nearest bin. When `count` exceeds the
    /// particle arrays they grow to it and a quarter more (particles are added in batches).
    pub fn update<V: Position>(&mut self, x: &Field<V>, count: u32, inv_dx: f32) -> Result<()> {
        if count as usize > self.order.len() {
            let backend = self.order.backend().clone();
            let capacity = count.saturating_add(count / 4);
            self.order = Field::new(&backend, [capacity])?;
            self.slot = Field::new(&backend, [capacity])?;
        }
        V::count_bins(
            x,
            &mut self.slot,
            &mut self.counts,
            count,
            self.bins,
            inv_dx,
            self.shape,
            self.block,
        )?;
        let n = self.bins + 1;
        exclusive_scan(
            &self.counts,
            &mut self.partial,
            &mut self.starts,
            n,
            n.div_ceil(SCAN_CHUNK),
        )?;
        V::order_bins(
            x,
            &self.slot,
            &self.starts,
            &mut self.order,
            count,
            inv_dx,
            self.shape,
            self.block,
        )?;
        (self.binned, self.since) = (Some(count), 0);
        Ok(())
    }
}
