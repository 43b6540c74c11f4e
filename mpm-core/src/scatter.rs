//! Reproducible scatter on the CPU. Float addition is not associative, so when threads add
//! into shared cells in whatever order they reach them, the last bits of a sum change from
//! run to run. On a reproducible CPU backend, a parallel loop whose only use of a dense field
//! is `field[i] += v` runs in one contiguous chunk of its range per thread, each chunk adding
//! into a private copy of the field; the copies are then added into the field in chunk
//! order: the same result on every run with the same thread count. It is also the faster way:
//! plain loads and stores instead of a compare-and-swap per float word (mpm3d 64^3's P2G on 2
//! cores: 14 ms against 33). A sparse field's copy is one of its tree's block pool, which
//! does not grow during a launch: a block keeps its place in the pool and in every copy.
//! Fields whose copies would take too much memory keep the shared atomics. Copies are
//! zeroed after the reduction and kept for the next launch (fresh zeroed pages cost a page
//! fault each). Each copy marks the pages of words its chunk added into: only those pages
//! are summed and zeroed afterwards (a copy no add reached costs nothing; a P2G's copies
//! cover the pages its particles reach, not the whole grid).
//!
//! A sparse field's copy is grid-shaped where the grid is not much larger than its pool
//! (see [`GRID_SHAPED_LIMIT`]): laid out as the dense field would be, with a mark per word
//! instead of per page, so that an add finds its element as on a dense grid (on the loop's
//! dense access path, the same code) instead of finding its leaf block, and the marks say
//! which elements were added into. The reduction then activates each of those (a `+=` of
//! zero activates as any other) and adds the copies there, in chunk order: the same bits as
//! the pool-shaped copy. Cells are activated after the loop rather than during it, which a
//! loop that uses no other field of the tree cannot observe (it only adds into this one);
//! a loop that does, say `is_active` right after a `+=`, keeps the pool-shaped copy.

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::host::{
    in_batches, increment, loop_range, par_range, sum_word, Access, AtomicAdd, FieldIndex, LoopInt,
    Placed, View, ANY, BATCH,
};
use crate::sparse::BlockCache;
use crate::types::{Elem, Scalar};

/// At most this many words of private copies per field (256 MiB).
const BUDGET_WORDS: usize = 1 << 26;

/// A sparse field's copy is grid-shaped while it takes at most this many times the words
/// of the pool-shaped one. Past it (a grid mostly empty) the pages that the adds touch and
/// the reduction scans outgrow what the pool-shaped copy's lookups cost: `layout_ratios`'
/// P2G gained at 4x, 7.5x and 9.7x (10%, 5% and 3.5% fill) and lost at 18x and 27x.
const GRID_SHAPED_LIMIT: usize = 12;

/// And while a field's grid-shaped copies take at most this many words in all (64 MiB):
/// a large sparse grid is sparse to keep its memory small, and its copies stay its pool's
/// size (measured up to 512^2 and 64^3 grids).
const GRID_SHAPED_WORDS: usize = 1 << 24;

/// Zeroed copies kept between launches, oldest first, at most [`BUDGET_WORDS`] words in all;
/// and their cleared marks (a grid-shaped copy's are a byte per word: fresh ones would cost
/// a page fault per page touched, every launch).
static SPARE: Mutex<Vec<Vec<u32>>> = Mutex::new(Vec::new());
static SPARE_MARKS: Mutex<Vec<Vec<bool>>> = Mutex::new(Vec::new());

/// Whether a sparse field of `grid` words on a dense grid, `pool` words in its pool, is
/// addressed densely: by grid-shaped copies taking `all` words, or by a snapshot
/// (`crate::snapshot`), while the grid is at most `limit` times the pool.
pub(crate) fn dense_addressing_pays(grid: usize, pool: usize, all: usize, limit: usize) -> bool {
    grid <= limit * pool && all <= GRID_SHAPED_WORDS
}

/// A zeroed buffer of `len` values: a spare one of that size, else a new one.
fn zeroed<V: Copy + Default>(spares: &Mutex<Vec<Vec<V>>>, len: usize) -> Vec<V> {
    take_spare(spares, len).unwrap_or_else(|| vec![V::default(); len])
}

/// A spare buffer of `len` values, if one is kept.
pub(crate) fn take_spare<V>(spares: &Mutex<Vec<Vec<V>>>, len: usize) -> Option<Vec<V>> {
    spares.lock().ok().and_then(|mut spare| {
        let i = spare.iter().position(|v| v.len() == len)?;
        Some(spare.remove(i))
    })
}

/// Keeps `kept` as spares, dropping the oldest past [`BUDGET_WORDS`] values.
pub(crate) fn spare<V>(spares: &Mutex<Vec<Vec<V>>>, kept: Vec<Vec<V>>) {
    if let Ok(mut spare) = spares.lock() {
        spare.extend(kept);
        let mut held: usize = spare.iter().map(Vec::len).sum();
        while held > BUDGET_WORDS && !spare.is_empty() {
            held -= spare.remove(0).len();
        }
    }
}

/// Words of a copy that one mark covers. An add marks its page with a store; keeping a
/// span instead (the lowest and highest word added into) was a load, compare and store of
/// each end per add, a chain through memory from each add to the next: P2G with the span
/// against the marks, alternating runs, 2 threads: mpm99 0.58-0.60 -> 0.50 ms, mpm3d
/// 6.7-6.9 -> 5.8, the dense blob at 50% fill (`layout_ratios`) 12.8-13.2 -> 11.5-11.8.
const PAGE_WORDS: usize = 1 << 10;

/// Zeroes the marked pages of each copy and their marks (`marks[copy]`, one per
/// `1 << shift` words; the other pages are zero already) and keeps both for later launches;
/// past the budget the oldest spares go (those of a sparse pool's earlier size, say).
fn keep(copies: Vec<Vec<u32>>, marks: Vec<Vec<bool>>, shift: u32) {
    let (mut copies, mut marks) = (copies, marks);
    let per_page = PAGE_WORDS >> shift;
    copies
        .par_iter_mut()
        .zip(&mut marks)
        .for_each(|(c, marks)| {
            c.par_chunks_mut(PAGE_WORDS)
                .zip(marks.par_chunks_mut(per_page))
                .with_min_len(64)
                .filter(|(_, marks)| marks.contains(&true))
                .for_each(|(page, marks)| {
                    page.fill(0);
                    marks.fill(false);
                })
        });
    spare(&SPARE, copies);
    spare(&SPARE_MARKS, marks);
}

/// A field as a scatter loop sees it: its size, and how to add private copies back.
pub trait ScatterField: Sync {
    /// The tree the field lives on (see [`View::tree_id`]), `None` for a dense field.
    fn tree(&self) -> Option<usize>;
    /// The shape of one private copy, or `None` when the field keeps shared atomics. A
    /// sparse one is grid-shaped only where `grid_allowed`.
    fn private_copy(&self, chunks: usize, grid_allowed: bool) -> Option<CopyShape>;
    /// Adds the words of the marked pages of the copies, shaped as `shape` says, into the
    /// field, word by word in chunk order (`marks[copy]`, see [`CopyShape::mark_shift`]).
    fn reduce(&self, copies: &[Vec<u32>], marks: &[Vec<bool>], shape: CopyShape);
}

/// How a field's private copies are laid out.
#[derive(Clone, Copy, Debug)]
pub struct CopyShape {
    words: usize,
    /// Grid-shaped: a sparse field's elements as on a dense grid (see the module
    /// documentation). Otherwise the field's own storage: its dense elements, or its tree's
    /// pool.
    grid: bool,
}

impl CopyShape {
    /// log2 of the words a mark covers: a page, or a word of a grid-shaped copy, whose
    /// marks say which elements were added into.
    fn mark_shift(self) -> u32 {
        match self.grid {
            true => 0,
            false => PAGE_WORDS.trailing_zeros(),
        }
    }
}

/// One chunk's private copy of a field, or none (the field keeps shared atomics).
#[derive(Clone, Copy)]
pub struct PrivateCopy<'c>(Option<Cells<'c>>);

impl<'c> PrivateCopy<'c> {
    /// The copy's words, or `None` where the field keeps shared atomics.
    #[inline(always)]
    pub fn cells(self) -> Option<Cells<'c>> {
        self.0
    }

    /// Whether the copy is grid-shaped: the field's adds then find dense elements, even on
    /// a sparse field (see [`crate::host::Local::dense_access_for_copy`]).
    #[inline(always)]
    pub fn grid_shaped(self) -> bool {
        self.0.is_some_and(|c| c.grid)
    }
}

/// The words of a private copy and their marks (see [`CopyShape`]).
#[derive(Clone, Copy)]
pub struct Cells<'c> {
    words: &'c [Cell<u32>],
    marks: &'c [Cell<bool>],
    /// [`CopyShape::mark_shift`]: a shift by a register costs what one by a constant does.
    shift: u32,
    /// See [`CopyShape::grid`].
    grid: bool,
}

impl<T: Elem, const D: usize> ScatterField for View<'_, T, D> {
    fn tree(&self) -> Option<usize> {
        self.tree_id()
    }

    /// Grid-shaped for a sparse field while that fits (see [`GRID_SHAPED_LIMIT`]), else the
    /// whole storage, dense or a sparse pool: a pool does not grow during a launch, so a
    /// block keeps its place in it and in the copies. A frozen tree's copy is its pool: its
    /// adds must find their cells active as they run.
    fn private_copy(&self, chunks: usize, grid_allowed: bool) -> Option<CopyShape> {
        let pool = self.storage().len();
        let cells: usize = self.shape().iter().map(|&n| n as usize).product();
        let grid = cells * T::WORDS;
        if grid_allowed
            && self.tree_id().is_some()
            && !self.frozen()
            && dense_addressing_pays(grid, pool, grid * chunks, GRID_SHAPED_LIMIT)
        {
            return Some(CopyShape {
                words: grid,
                grid: true,
            });
        }
        (pool * chunks <= BUDGET_WORDS).then_some(CopyShape {
            words: pool,
            grid: false,
        })
    }

    fn reduce(&self, copies: &[Vec<u32>], marks: &[Vec<bool>], shape: CopyShape) {
        if shape.grid {
            return self.reduce_grid_shaped(copies, marks);
        }
        // Pages no chunk marked were not added into: zero in every copy.
        let marked: Vec<bool> = (0..marks.first().map_or(0, Vec::len))
            .map(|p| marks.iter().any(|m| m[p]))
            .collect();
        let float = T::SCALAR == Scalar::F32;
        self.storage()
            .par_chunks(PAGE_WORDS)
            .zip(&marked)
            .enumerate()
            .with_min_len(4)
            .filter(|(_, (_, &marked))| marked)
            .for_each(|(page, (cells, _))| {
                let start = page * PAGE_WORDS;
                let mut sums = [0u32; PAGE_WORDS];
                let sums = &mut sums[..cells.len()];
                for (sum, cell) in sums.iter_mut().zip(cells) {
                    *sum = cell.load(Relaxed);
                }
                // A page at a time and a copy at a time, so that the adds run as vector
                // instructions: word by word across the copies, with a test of each word
                // for zero, it was a twentieth of mpm88's time. A word is added to in chunk
                // order, as before.
                for copy in copies {
                    add_page(sums, &copy[start..start + sums.len()], float);
                }
                for (cell, sum) in cells.iter().zip(sums) {
                    cell.store(*sum, Relaxed);
                }
            });
    }
}

impl<T: Elem, const D: usize> View<'_, T, D> {
    /// [`ScatterField::reduce`] of grid-shaped copies: each element whose first word a copy
    /// marked is activated (a full pool raises its status) and gets the copies' words, in
    /// chunk order.
    fn reduce_grid_shaped(&self, copies: &[Vec<u32>], marks: &[Vec<bool>]) {
        let shape = self.shape();
        let cells: usize = shape.iter().map(|&n| n as usize).product();
        let words = cells * T::WORDS;
        let float = T::SCALAR == Scalar::F32;
        (0..words.div_ceil(PAGE_WORDS))
            .into_par_iter()
            .with_min_len(4)
            .map(|page| page * PAGE_WORDS)
            .filter(|&start| {
                let end = (start + PAGE_WORDS).min(words);
                marks.iter().any(|m| m[start..end].contains(&true))
            })
            .for_each(|start| {
                let cache = BlockCache::default();
                // The elements whose first word lies in this page.
                let first = start.div_ceil(T::WORDS);
                let end = (start + PAGE_WORDS).div_ceil(T::WORDS).min(cells);
                // The coordinates step from element to element; divided out of each
                // element's index, they cost two integer divisions per element.
                let mut c = coords_of(first, &shape);
                for e in first..end {
                    let here = c;
                    c = next_coords(c, &shape);
                    let at = e * T::WORDS;
                    if !marks.iter().any(|m| m[at]) {
                        continue;
                    }
                    let Some(element) = self.element_at(here, true, &cache) else {
                        continue;
                    };
                    let mut sums = [0u32; 16];
                    let sums = &mut sums[..T::WORDS];
                    let cells = self.cells(element * T::WORDS);
                    for (sum, cell) in sums.iter_mut().zip(cells) {
                        *sum = cell.load(Relaxed);
                    }
                    for copy in copies {
                        add_page(sums, &copy[at..at + T::WORDS], float);
                    }
                    for (cell, sum) in cells.iter().zip(sums) {
                        cell.store(*sum, Relaxed);
                    }
                }
            });
    }
}

/// The coordinates of dense element `e` of a grid of `shape` (the last axis fastest).
fn coords_of<const D: usize>(e: usize, shape: &[u32; D]) -> [u32; 3] {
    let mut c = [0u32; 3];
    let mut rest = e;
    for a in (0..D).rev() {
        c[a] = (rest % shape[a] as usize) as u32;
        rest /= shape[a] as usize;
    }
    c
}

/// The coordinates after `c` in a grid of `shape`, in the order of [`coords_of`] (the last
/// axis fastest, with carries).
#[inline(always)]
fn next_coords<const D: usize>(mut c: [u32; 3], shape: &[u32; D]) -> [u32; 3] {
    for a in (0..D).rev() {
        c[a] += 1;
        if c[a] < shape[a] || a == 0 {
            break;
        }
        c[a] = 0;
    }
    c
}

/// `sums += words`, word by word, skipping the zero words of a copy (no add reached them:
/// `-0.0 + 0.0` would turn a word's sign).
#[inline(always)]
fn add_page(sums: &mut [u32], words: &[u32], float: bool) {
    // One loop per kind of word, each free of the other's test.
    if float {
        for (sum, &w) in sums.iter_mut().zip(words) {
            let added = sum_word(*sum, w, true);
            *sum = if w == 0 { *sum } else { added };
        }
    } else {
        for (sum, &w) in sums.iter_mut().zip(words) {
            *sum = sum_word(*sum, w, false);
        }
    }
}

/// The `+=` and `-=` of the views a loop adds through instead of its field's [`Access`]
/// ([`ScatterView`], [`PrivateView`], `bins::BinView`): each says how it adds, and the
/// operators are that add. The CPU lowering brings the trait into scope in every loop.
pub trait AddView<T: Elem, const D: usize> {
    /// `field[index] += value`, or `-=` with `subtract`.
    fn add(&self, index: impl FieldIndex<D>, value: T, subtract: bool)
    where
        T: AtomicAdd;

    #[inline(always)]
    fn atomic_add(&self, index: impl FieldIndex<D>, value: T)
    where
        T: AtomicAdd,
    {
        self.add(index, value, false);
    }

    #[inline(always)]
    fn atomic_sub(&self, index: impl FieldIndex<D>, value: T)
    where
        T: AtomicAdd,
    {
        self.add(index, value, true);
    }
}

/// The view a scatter loop's body uses for a privatised field: `+=` goes to this chunk's
/// copy, or through the invocation's [`Access`] to the shared field when it was not
/// privatised.
pub struct ScatterView<'l, 'v, 'a, T, const D: usize> {
    local: &'l Access<'v, 'a, T, D>,
    copy: PrivateCopy<'l>,
}

impl<'l, 'v, 'a, T: Elem, const D: usize> ScatterView<'l, 'v, 'a, T, D> {
    pub fn new(local: &'l Access<'v, 'a, T, D>, copy: PrivateCopy<'l>) -> Self {
        ScatterView { local, copy }
    }

    /// [`Access::place`] where the copy has the field's elements (see [`PrivateView::place`]).
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        match self.copy.grid_shaped() {
            true => Placed::unplaced(index),
            false => self.local.place(index),
        }
    }
}

impl<T: Elem, const D: usize> AddView<T, D> for ScatterView<'_, '_, '_, T, D> {
    // Inlined always: a P2G calls this per stencil node and field, and as a call it cost
    // mpm99 a tenth of its CPU time.
    #[inline(always)]
    fn add(&self, index: impl FieldIndex<D>, value: T, subtract: bool)
    where
        T: AtomicAdd,
    {
        match self.copy.0 {
            Some(cells) => PrivateView::new(self.local, cells).add(index, value, subtract),
            None if subtract => self.local.atomic_sub(index, value),
            None => self.local.atomic_add(index, value),
        }
    }
}

/// A [`ScatterView`] whose field has a private copy: what the CPU lowering runs a batch
/// through on the `DENSE` and `CACHED` paths, where every scattered field of the loop is
/// privatised (see [`crate::host::ANY`]).
pub struct PrivateView<'l, 'v, 'a, T, const D: usize, const PATH: u8> {
    local: &'l Access<'v, 'a, T, D, PATH>,
    cells: Cells<'l>,
}

impl<'l, 'v, 'a, T: Elem, const D: usize, const PATH: u8> PrivateView<'l, 'v, 'a, T, D, PATH> {
    #[inline(always)]
    pub fn new(local: &'l Access<'v, 'a, T, D, PATH>, cells: Cells<'l>) -> Self {
        PrivateView { local, cells }
    }

    /// [`Access::place`] where the copy has the field's elements; a grid-shaped copy of a
    /// sparse field has others, and each add finds its own (on the dense path nothing is
    /// placed, and the cached path takes no grid-shaped copy).
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        match PATH == ANY && self.cells.grid {
            true => Placed::unplaced(index),
            false => self.local.place(index),
        }
    }
}

impl<T: Elem, const D: usize, const PATH: u8> AddView<T, D>
    for PrivateView<'_, '_, '_, T, D, PATH>
{
    #[inline(always)]
    fn add(&self, index: impl FieldIndex<D>, value: T, subtract: bool)
    where
        T: AtomicAdd,
    {
        let Cells {
            words: copy,
            marks,
            shift,
            grid,
        } = self.cells;
        // On the dense path a grid-shaped copy's element is the one the access finds; on
        // the path of every storage the access would find its tree's (the cached path takes
        // no grid-shaped copy: see `Local::cached_access_for_copy`).
        let base = match PATH == ANY && grid {
            true => self
                .local
                .dense_element_for_add(index)
                .map(|e| e * T::WORDS),
            false => self.local.base_for_add(index),
        };
        let Some(base) = base else {
            return;
        };
        // Both ends: an element of 3 or 9 words may straddle two pages (and the first word's
        // mark is the element's, in a grid-shaped copy).
        marks[base >> shift].set(true);
        marks[(base + T::WORDS - 1) >> shift].set(true);
        let mut w = [0u32; 16];
        value.write_words(&mut w[..T::WORDS]);
        let float = T::SCALAR == Scalar::F32;
        for (word, cell) in w[..T::WORDS].iter().zip(&copy[base..base + T::WORDS]) {
            cell.set(sum_word(
                cell.get(),
                increment(*word, float, subtract),
                float,
            ));
        }
    }
}

/// Runs `body(state, copies, batch)` for the indices of `start..end` (or `start..=end`) in
/// ascending slices `batch` of at most [`BATCH`], where `init()` makes the state one worker's
/// calls share and `copies` are its private copies of `fields` (an empty slice for a field
/// that keeps shared atomics). Reproducible: one contiguous chunk per thread, in
/// parallel, then the copies are added into the fields in chunk order. Otherwise a plain
/// parallel loop whose `copies` are all empty (shared atomics). `others` are the loop's
/// other fields: a sparse field on the tree of one of them keeps the pool-shaped copy.
#[allow(clippy::too_many_arguments)] // the lowering's one call
pub fn par_scatter<I: LoopInt, S>(
    reproducible: bool,
    start: I,
    end: I,
    inclusive: bool,
    fields: &[&dyn ScatterField],
    others: &[&dyn ScatterField],
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[PrivateCopy<'_>], &[I]) + Sync + Send,
) {
    let range = loop_range(start, end, inclusive);
    // Nothing to add: no copies to fill and sum (a grid's worth of words).
    if range.count == 0 {
        return;
    }
    if !reproducible {
        let n = fields.len();
        return par_range(
            range,
            BATCH,
            || (init(), vec![PrivateCopy(None); n]),
            |(state, none), is| body(state, none, is),
        );
    }
    let chunks = rayon::current_num_threads().max(1);
    let mut shapes: Vec<Option<CopyShape>> = fields
        .iter()
        .map(|f| {
            let shared = others
                .iter()
                .any(|o| o.tree().is_some() && o.tree() == f.tree());
            f.private_copy(chunks, !shared)
        })
        .collect();
    // The fields of one tree take one shape: a grid-shaped copy beside another kind would
    // send the loop to the path of every storage (the cached one takes no grid-shaped copy,
    // the dense one no pool-shaped copy).
    let grid = |s: &Option<CopyShape>| s.is_some_and(|s| s.grid);
    let mixed: Vec<bool> = fields
        .iter()
        .map(|f| {
            let tree = f.tree();
            tree.is_some()
                && fields
                    .iter()
                    .zip(&shapes)
                    .any(|(g, s)| g.tree() == tree && !grid(s))
        })
        .collect();
    for ((shape, field), mixed) in shapes.iter_mut().zip(fields).zip(mixed) {
        if mixed && grid(shape) {
            *shape = field.private_copy(chunks, false);
        }
    }
    // copies[chunk][field].
    let mut copies: Vec<Vec<Vec<u32>>> = (0..chunks)
        .map(|_| {
            shapes
                .iter()
                .map(|s| zeroed(&SPARE, s.map_or(0, |s| s.words)))
                .collect()
        })
        .collect();
    let n = range.count;
    // marks[chunk][field][page]: whether the chunk's adds reached the page (the word, in a
    // grid-shaped copy).
    let mut marks: Vec<Vec<Vec<bool>>> = copies
        .par_iter_mut()
        .enumerate()
        .map(|(c, mine)| {
            let mut marks: Vec<Vec<bool>> = mine
                .iter()
                .zip(&shapes)
                .map(|(v, s)| {
                    let shift = s.map_or(0, |s| s.mark_shift());
                    zeroed(&SPARE_MARKS, v.len().div_ceil(1 << shift))
                })
                .collect();
            let cells: Vec<PrivateCopy<'_>> = mine
                .iter_mut()
                .zip(&mut marks)
                .zip(&shapes)
                .map(|((v, marks), shape)| {
                    // No shape: the field keeps shared atomics. A field without cells has
                    // an empty copy (every access to it is out of bounds).
                    let words = Cell::from_mut(v.as_mut_slice()).as_slice_of_cells();
                    let marks = Cell::from_mut(marks.as_mut_slice()).as_slice_of_cells();
                    PrivateCopy(shape.map(|s| Cells {
                        words,
                        marks,
                        shift: s.mark_shift(),
                        grid: s.grid,
                    }))
                })
                .collect();
            let state = init();
            let (lo, hi) = (
                n * c as u64 / chunks as u64,
                n * (c as u64 + 1) / chunks as u64,
            );
            in_batches(
                (lo..hi).map(|k| I::from_i64(range.start + k as i64)),
                |is| body(&state, &cells, is),
            );
            drop(cells);
            marks
        })
        .collect();
    for (f, field) in fields.iter().enumerate() {
        if let Some(shape) = shapes[f] {
            let per_field: Vec<Vec<u32>> = copies
                .iter_mut()
                .map(|c| std::mem::take(&mut c[f]))
                .collect();
            let mine: Vec<Vec<bool>> = marks
                .iter_mut()
                .map(|m| std::mem::take(&mut m[f]))
                .collect();
            field.reduce(&per_field, &mine, shape);
            keep(per_field, mine, shape.mark_shift());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_copies_come_back_zeroed() {
        // An odd size no other test's field has, so that only this test takes it back.
        let words = 12_347;
        let used = vec![vec![7u32; words], vec![u32::MAX; words]];
        let all = vec![true; words.div_ceil(PAGE_WORDS)];
        keep(used, vec![all.clone(), all], PAGE_WORDS.trailing_zeros());
        for _ in 0..2 {
            let c = zeroed(&SPARE, words);
            assert_eq!(c.len(), words);
            assert!(c.iter().all(|&w| w == 0));
        }
    }

    #[test]
    fn stepped_coordinates_are_the_divided_ones() {
        fn check<const D: usize>(shape: [u32; D]) {
            let cells: usize = shape.iter().map(|&n| n as usize).product();
            let mut c = coords_of(0, &shape);
            for e in 0..cells {
                assert_eq!(c, coords_of(e, &shape), "element {e} of {shape:?}");
                c = next_coords(c, &shape);
            }
        }
        check([7]);
        check([5, 3]);
        check([4, 1, 6]);
        check([3, 5, 2]);
    }
}
