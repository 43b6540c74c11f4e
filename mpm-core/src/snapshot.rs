//! Dense snapshots of sparse fields, for the CPU loops that read one through a stencil.
//!
//! A G2P reads each particle's 3^D grid nodes; on a sparse grid every read finds its leaf
//! block (through the worker's block cache, `crate::sparse::BlockCache`), where a dense read
//! is a multiply and an add. A loop that only reads a sparse field, and reads it in a loop
//! of its own (a stencil), reads a dense copy of it instead (the CPU lowering decides which
//! fields, `cpu_loop` in mpm-macros): made when the loop starts, block by block from the
//! active cells (the others read zero, as they would), and cleared when it ends. The copy
//! is exact: the loop writes nothing into the field, and a cell that another field of the
//! tree activates during the loop reads zero either way. It costs a pass over the active
//! cells and the clearing of the pages they wrote, not the grid's size, so it pays on
//! emptier grids than the scatter's grid-shaped copies (`crate::scatter`) do: it is made
//! where the grid is at most [`SNAPSHOT_LIMIT`] times the pool, up to the copies' size
//! (64 MiB: a large sparse grid keeps its small footprint).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::Mutex;

use rayon::prelude::*;

use crate::host::View;
use crate::scatter::{dense_addressing_pays, spare, take_spare};
use crate::types::Elem;

/// Words of a snapshot that one mark covers: the pages its fill wrote are cleared after.
const PAGE_WORDS: usize = 1 << 10;

/// A snapshot is made while the grid is at most this many times its pool: `layout_ratios`'
/// G2P lost at no fill measured, down to 1% (27x; 2%, 18x: 0.53-0.59 -> 0.42-0.50 ms).
const SNAPSHOT_LIMIT: usize = 32;

/// Zeroed snapshot words kept between loops, oldest first (see `crate::scatter::spare`).
static SPARE: Mutex<Vec<Vec<AtomicU32>>> = Mutex::new(Vec::new());

/// A sparse field's dense copy for one loop (see the module documentation), or nothing
/// where the field is dense or the copy does not pay.
pub struct Snapshot {
    copy: Option<Copy>,
}

struct Copy {
    words: Vec<AtomicU32>,
    /// Per page of `words`, whether the fill wrote into it.
    written: Vec<AtomicBool>,
}

impl Snapshot {
    /// The snapshot of `view` as the loop starts.
    pub fn of<T: Elem, const D: usize>(view: &View<'_, T, D>) -> Snapshot {
        let Some(tree) = view.tree() else {
            return Snapshot { copy: None };
        };
        let cells: usize = view.shape().iter().map(|&n| n as usize).product();
        let words = cells * T::WORDS;
        if !dense_addressing_pays(words, view.storage().len(), words, SNAPSHOT_LIMIT) {
            return Snapshot { copy: None };
        }
        let copy = Copy {
            words: zeroed(words),
            written: (0..words.div_ceil(PAGE_WORDS))
                .map(|_| AtomicBool::new(false))
                .collect(),
        };
        let leaf = &tree.plan.levels[tree.plan.levels.len() - 1];
        let per_block = leaf.level.cells();
        let storage = view.storage();
        (0..leaf.capacity).into_par_iter().for_each(|block| {
            tree.for_each_active_in_block(block, 0..per_block, |c, element| {
                let to = view.dense_element(c) * T::WORDS;
                let from = element as usize * T::WORDS;
                for (dst, src) in copy.words[to..to + T::WORDS]
                    .iter()
                    .zip(&storage[from..from + T::WORDS])
                {
                    dst.store(src.load(Relaxed), Relaxed);
                }
                copy.written[to / PAGE_WORDS].store(true, Relaxed);
                copy.written[(to + T::WORDS - 1) / PAGE_WORDS].store(true, Relaxed);
            });
        });
        Snapshot { copy: Some(copy) }
    }

    /// `view` as the loop reads it: a dense view of the copy, or `view` itself.
    pub fn view<'s, T: Elem, const D: usize>(&'s self, view: &View<'s, T, D>) -> View<'s, T, D> {
        match &self.copy {
            Some(copy) => view.dense_over(&copy.words),
            None => *view,
        }
    }
}

impl Drop for Snapshot {
    /// Clears the pages the fill wrote and keeps the words for a later loop.
    fn drop(&mut self) {
        let Some(copy) = self.copy.take() else {
            return;
        };
        copy.words
            .par_chunks(PAGE_WORDS)
            .zip(&copy.written)
            .filter(|(_, written)| written.load(Relaxed))
            .for_each(|(page, _)| page.iter().for_each(|w| w.store(0, Relaxed)));
        spare(&SPARE, vec![copy.words]);
    }
}

/// `len` zeroed words: spare ones of that length, else new ones.
fn zeroed(len: usize) -> Vec<AtomicU32> {
    take_spare(&SPARE, len).unwrap_or_else(|| (0..len).map(|_| AtomicU32::new(0)).collect())
}
