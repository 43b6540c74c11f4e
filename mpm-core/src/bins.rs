//! Binned loops on the CPU: `for p in grid.bins(order, starts, block)` without
//! read-modify-write atomics.
//!
//! The bins are the blocks of `block`^D cells of the grid, numbered row-major (the last axis
//! fastest); bin `b` holds the particles `order[starts[b]..starts[b + 1]]`. The blocks run in
//! 2^D colour phases, the colour of block `B` being the parity of each of its coordinates;
//! one worker takes one block at a time, and runs its particles in increasing order.
//!
//! A worker owns the nodes within `block / 2` cells of its block (its window, `2 * block`
//! cells wide at most). Inside a window, `field[i] += v` on a field of the grid's shape is a
//! plain load, add and store of the words. The soundness argument:
//! * two blocks of one colour are `2 * block` cells apart along some axis, so their windows
//!   are disjoint: in a phase no two workers add into the same node; a sparse grid maps
//!   distinct nodes to distinct words, so they add into distinct words too;
//! * phases are separated by the join of the parallel loop, so each phase sees the sums of
//!   the one before;
//! * the words are `AtomicU32`, accessed with relaxed loads and stores as everywhere in the
//!   CPU backend, so even a kernel that reads a node while another worker adds into it (a
//!   race on every backend) is not undefined behaviour in Rust.
//!
//! An add outside the worker's window is not lost: it is queued and applied, atomically, after
//! the phase, in block order. Adds into fields of other shapes (counters, say) stay atomic;
//! no worker adds into them without atomics, so they cannot race with a plain add.
//!
//! Every node therefore receives its sums in a fixed order (colour by colour, block by block,
//! particle by particle), whatever the thread count and however the binning pass ordered the
//! particles within a bin: float results are bitwise reproducible.

use std::cell::RefCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use rayon::prelude::*;

use crate::host::{add_word, increment, sum_word, Access, AtomicAdd, FieldIndex, Placed, View};
use crate::scatter::AddView;
use crate::types::{Elem, Scalar};

/// One word's share of an add outside the window: its increment.
struct Queued<'a> {
    word: &'a AtomicU32,
    inc: u32,
    float: bool,
}

impl Queued<'_> {
    fn apply(&self) {
        add_word(self.word, self.inc, self.float);
    }
}

/// The block a worker is running: its window and the adds it queued.
pub struct BinBlock<'a> {
    shape: [u32; 3],
    dims: usize,
    lo: [i64; 3],
    /// The window's extent per axis, from `lo`.
    width: [u64; 3],
    queued: RefCell<Vec<Queued<'a>>>,
}

/// A field as the body of a binned loop sees it: its invocation's [`Access`], with `+=`
/// plain inside the block's window on fields of the grid's shape.
pub struct BinView<'l, 'v, 'a, T, const D: usize> {
    local: &'l Access<'v, 'a, T, D>,
    block: &'l BinBlock<'a>,
    windowed: bool,
    /// The window, copied out of the block: made per invocation, the copy stays in
    /// registers, where the block's would be loaded again after every store.
    lo: [i64; 3],
    width: [u64; 3],
}

impl<'l, 'v, 'a, T: Elem, const D: usize> BinView<'l, 'v, 'a, T, D> {
    #[inline(always)]
    pub fn new(local: &'l Access<'v, 'a, T, D>, block: &'l BinBlock<'a>) -> Self {
        let shape = local.view().shape();
        let windowed = D == block.dims && (0..D).all(|a| shape[a] == block.shape[a]);
        BinView {
            local,
            block,
            windowed,
            lo: block.lo,
            width: block.width,
        }
    }

    /// `index` unplaced: a `+=` outside the window is queued by its coordinates, and one
    /// inside skips the bounds check, so each add finds its own element.
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        Placed::unplaced(index)
    }

    /// Whether this worker owns the node at `c`: inside the window, which lies inside the
    /// grid.
    #[inline(always)]
    fn owns(&self, c: [i64; 3]) -> bool {
        // Unsigned: one compare per axis.
        (0..D).all(|a| ((c[a] - self.lo[a]) as u64) < self.width[a])
    }
}

impl<T: Elem, const D: usize> AddView<T, D> for BinView<'_, '_, '_, T, D> {
    #[inline(always)]
    fn add(&self, index: impl FieldIndex<D>, value: T, subtract: bool)
    where
        T: AtomicAdd,
    {
        if !self.windowed {
            return match subtract {
                false => self.local.atomic_add(index, value),
                true => self.local.atomic_sub(index, value),
            };
        }
        // Inside the window the node is inside the grid: no bounds check.
        let raw = index.signed();
        let owned = self.owns(raw);
        let c = match owned {
            true => raw.map(|x| x as u32),
            false => match self.local.view().coords(index) {
                Some(c) => c,
                None => return,
            },
        };
        let Some(base) = self.local.locate_coords(c) else {
            return;
        };
        let cells = self.local.view().cells(base);
        let mut w = [0u32; 16];
        value.write_words(&mut w[..T::WORDS]);
        let float = T::SCALAR == Scalar::F32;
        if owned {
            for (word, cell) in w.iter().zip(cells) {
                let inc = increment(*word, float, subtract);
                cell.store(sum_word(cell.load(Relaxed), inc, float), Relaxed);
            }
        } else {
            let mut queued = self.block.queued.borrow_mut();
            for (word, cell) in w.iter().zip(cells) {
                queued.push(Queued {
                    word: cell,
                    inc: increment(*word, float, subtract),
                    float,
                });
            }
        }
    }
}

impl<'v, 'a, T, const D: usize> Deref for BinView<'_, 'v, 'a, T, D> {
    type Target = Access<'v, 'a, T, D>;
    fn deref(&self) -> &Self::Target {
        self.local
    }
}

/// Runs `body(state, block, particles)` for the particles of every bin of `grid`'s blocks of
/// `block`^D cells, bin `b` holding `order[starts[b]..starts[b + 1]]`, in 2^D colour phases
/// (see the module documentation). `init()` makes the state one worker's calls share.
/// A block size below 2 runs as 2; a bin whose end is before its start is empty; reading
/// `starts` or `order` out of bounds raises the out-of-bounds error of that field.
pub fn par_bins<'a, G: Elem, const D: usize, S>(
    grid: &View<'_, G, D>,
    order: &View<'_, u32, 1>,
    starts: &View<'_, u32, 1>,
    block: i32,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &BinBlock<'a>, &[u32]) + Sync + Send,
) {
    let block = block.max(2) as i64;
    let shape = grid.shape();
    let mut grid_shape = [1u32; 3];
    grid_shape[..D].copy_from_slice(&shape);
    let blocks: [i64; 3] = std::array::from_fn(|a| (grid_shape[a] as i64 + block - 1) / block);
    let half = block / 2;
    for colour in 0..1usize << D {
        // The blocks of this colour, in bin order.
        let mine: Vec<u64> = (0..blocks.iter().product::<i64>() as u64)
            .filter(|&b| {
                let coords = unlinear(b as i64, &blocks);
                (0..D).all(|a| (coords[a] & 1) as usize == (colour >> a) & 1)
            })
            .collect();
        let queued: Vec<Vec<Queued<'a>>> = mine
            .par_iter()
            .with_max_len(1)
            .map_init(&init, |state, &b| {
                let coords = unlinear(b as i64, &blocks);
                let lo: [i64; 3] = std::array::from_fn(|a| (coords[a] * block - half).max(0));
                let here = BinBlock {
                    shape: grid_shape,
                    dims: D,
                    lo,
                    width: std::array::from_fn(|a| {
                        let hi = ((coords[a] + 1) * block + half).min(grid_shape[a] as i64);
                        (hi - lo[a]) as u64
                    }),
                    queued: RefCell::new(Vec::new()),
                };
                let (starts, order) = (starts.local(), order.local());
                let (starts, order) = (starts.access(), order.access());
                let (s, e) = (starts.load(b as u32), starts.load(b as u32 + 1));
                let mut particles: Vec<u32> = (s..e.max(s)).map(|k| order.load(k)).collect();
                particles.sort_unstable();
                body(state, &here, &particles);
                here.queued.into_inner()
            })
            .collect();
        for q in queued.iter().flatten() {
            q.apply();
        }
    }
}

/// The block coordinates of bin `b` of a grid of `blocks` blocks (unused axes 1).
fn unlinear(b: i64, blocks: &[i64; 3]) -> [i64; 3] {
    [
        b / (blocks[1] * blocks[2]),
        (b / blocks[2]) % blocks[1],
        b % blocks[2],
    ]
}
