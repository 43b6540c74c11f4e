//! Particles grouped by grid block, for binned loops (`for p in grid.bins(order, starts,
//! block)`, see [`crate::bins`]): a counting sort every substep, written in the kernel
//! language so that it runs where the particles are. Each particle takes a slot in its bin
//! with an atomic add that returns the old count, an exclusive scan of the counts gives each
//! bin's start, and each particle is written at its bin's start plus its slot. The order
//! within a bin depends on the scheduler; binned loops on the CPU do not depend on it.

use glam::{IVec3, Vec2, Vec3};

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

/// Sorts each bin's entries of `order` by particle index, so that a bin lists its particles
/// in a fixed order whatever order the counting sort's atomics left (a Shell sort per bin,
/// gaps 1, 4, 13, 40, ..: no bin's size makes it quadratic).
#[kernel]
pub fn sort_within_bins(order: &mut Field<u32>, starts: &Field<u32>, bins: u32) {
    for b in 0..bins {
        let (first, end) = (starts[b], starts[b + 1]);
        let mut gap = 1u32;
        while gap * 3 + 1 < end - first {
            gap = gap * 3 + 1;
        }
        while gap > 0 {
            for i in first + gap..end {
                let key = order[i];
                let mut k = i;
                while k >= first + gap && order[k - gap] > key {
                    order[k] = order[k - gap];
                    k -= gap;
                }
                order[k] = key;
            }
            gap /= 3;
        }
    }
}

/// A dimension's `count_bins` kernel.
pub type CountBins<V> =
    fn(&Field<V>, &mut Field<u32>, &mut Field<u32>, u32, u32, f32, IVec3, i32) -> Result<()>;

/// A dimension's `order_bins` kernel.
pub type OrderBins<V> =
    fn(&Field<V>, &Field<u32>, &Field<u32>, &mut Field<u32>, u32, f32, IVec3, i32) -> Result<()>;

/// Particle positions binning can read, `Vec2` in 2D and `Vec3` in 3D, and the binning
/// kernels of their dimension.
pub trait Position: Elem {
    const COUNT_BINS: CountBins<Self>;
    const ORDER_BINS: OrderBins<Self>;
}

impl Position for Vec2 {
    const COUNT_BINS: CountBins<Self> = dim2::count_bins;
    const ORDER_BINS: OrderBins<Self> = dim2::order_bins;
}

impl Position for Vec3 {
    const COUNT_BINS: CountBins<Self> = dim3::count_bins;
    const ORDER_BINS: OrderBins<Self> = dim3::order_bins;
}

/// The bins of a grid's blocks and the particles in them, rebuilt by [`Bins::update`].
pub struct Bins {
    /// The particles, bin by bin (`order[starts[b]..starts[b + 1]]` are in bin `b`).
    pub order: Field<u32>,
    /// Where each bin's particles start in `order`; one more entry than there are bins.
    pub starts: Field<u32>,
    counts: Field<u32>,
    slot: Field<u32>,
    partial: Field<u32>,
    /// The grid's cells per axis, unused axes 1.
    shape: IVec3,
    block: i32,
    bins: u32,
    /// The particle count of the last update, and the calls of [`Bins::refresh`] since.
    binned: Option<u32>,
    since: u32,
    /// See [`Bins::stable`].
    stable: bool,
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
            shape: IVec3::from_array(padded.map(|s| s as i32)),
            block,
            bins,
            binned: None,
            since: 0,
            stable: false,
        })
    }

    /// Each bin lists its particles by increasing index after every update (an extra pass,
    /// [`sort_within_bins`]), instead of in the order the counting sort's atomics left,
    /// which depends on scheduling: for runs whose results must not (the CPU's).
    pub fn stable(mut self) -> Self {
        self.stable = true;
        self
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
        (V::COUNT_BINS)(
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
        (V::ORDER_BINS)(
            x,
            &self.slot,
            &self.starts,
            &mut self.order,
            count,
            inv_dx,
            self.shape,
            self.block,
        )?;
        if self.stable {
            sort_within_bins(&mut self.order, &self.starts, self.bins)?;
        }
        (self.binned, self.since) = (Some(count), 0);
        Ok(())
    }
}
