//! The binning kernels of one dimension (compiled as `binning::dim2` and `binning::dim3`).

use glam::IVec3;

use super::{Vec, DIM};
use crate::{func, kernel, Field};

/// The bin of a particle at `x`: the block of `block`^D cells holding its cell (clamped into
/// a grid of `shape` cells, unused axes ignored), numbered row-major over the grid's blocks, the last axis fastest.
#[func]
pub fn bin_of(x: Vec, inv_dx: f32, shape: IVec3, block: i32) -> u32 {
    let mut bin = 0;
    for a in 0..DIM {
        let cell = clamp(floor(x[a] * inv_dx) as i32, 0, shape[a] - 1);
        let blocks = (shape[a] + block - 1) / block;
        bin = bin * blocks + cell / block;
    }
    bin as u32
}

/// Counts the particles `0..count` of each of the `bins` bins into `counts` (which holds
/// `bins + 1` entries, the last one zero), and gives each particle its slot in its bin.
#[kernel]
pub fn count_bins(
    x: &Field<Vec>,
    slot: &mut Field<u32>,
    counts: &mut Field<u32>,
    count: u32,
    bins: u32,
    inv_dx: f32,
    shape: IVec3,
    block: i32,
) {
    for b in 0..bins + 1 {
        counts[b] = 0;
    }
    for p in 0..count {
        let old = atomic_add(counts, bin_of(x[p], inv_dx, shape, block), 1u32);
        slot[p] = old;
    }
}

/// Writes each particle's index at its bin's start plus its slot: `order` lists the
/// particles bin by bin.
#[kernel]
pub fn order_bins(
    x: &Field<Vec>,
    slot: &Field<u32>,
    starts: &Field<u32>,
    order: &mut Field<u32>,
    count: u32,
    inv_dx: f32,
    shape: IVec3,
    block: i32,
) {
    for p in 0..count {
        order[starts[bin_of(x[p], inv_dx, shape, block)] + slot[p]] = p;
    }
}
