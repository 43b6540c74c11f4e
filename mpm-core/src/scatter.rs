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

use std::cell::Cell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use rayon::prelude::*;

use crate::host::{
    in_batches, increment, loop_range, par_range, sum_word, Access, AtomicAdd, FieldIndex, LoopInt,
    Placed, View, BATCH,
};
use crate::types::{Elem, Scalar};

/// At most this many words of private copies per field (256 MiB).
const BUDGET_WORDS: usize = 1 << 26;

/// Zeroed copies kept between launches, oldest first, at most [`BUDGET_WORDS`] words in all.
static SPARE: Mutex<Vec<Vec<u32>>> = Mutex::new(Vec::new());

/// A zeroed buffer of `words` words: a spare one of that size, else a new one.
fn zeroed(words: usize) -> Vec<u32> {
    let spare = SPARE.lock().ok().and_then(|mut spare| {
        let i = spare.iter().position(|v| v.len() == words)?;
        Some(spare.remove(i))
    });
    spare.unwrap_or_else(|| vec![0u32; words])
}

/// Words of a copy that one mark covers. An add marks its page with a store; keeping a
/// span instead (the lowest and highest word added into) was a load, compare and store of
/// each end per add, a chain through memory from each add to the next: P2G with the span
/// against the marks, alternating runs, 2 threads: mpm99 0.58-0.60 -> 0.50 ms, mpm3d
/// 6.7-6.9 -> 5.8, the dense blob at 50% fill (`layout_ratios`) 12.8-13.2 -> 11.5-11.8.
const PAGE_WORDS: usize = 1 << 10;

/// Zeroes the marked pages of each copy (`marks[copy][page]`; the others are zero already)
/// and keeps the copies for later launches; past the budget the oldest spares go (those of
/// a sparse pool's earlier size, say).
fn keep(copies: Vec<Vec<u32>>, marks: &[Vec<bool>]) {
    let mut copies = copies;
    copies.par_iter_mut().zip(marks).for_each(|(c, marks)| {
        c.par_chunks_mut(PAGE_WORDS)
            .zip(marks)
            .with_min_len(64)
            .filter(|(_, &marked)| marked)
            .for_each(|(page, _)| page.fill(0))
    });
    if let Ok(mut spare) = SPARE.lock() {
        spare.extend(copies);
        let mut held: usize = spare.iter().map(Vec::len).sum();
        while held > BUDGET_WORDS && !spare.is_empty() {
            held -= spare.remove(0).len();
        }
    }
}

/// A field as a scatter loop sees it: its size, and how to add private copies back.
pub trait ScatterField: Sync {
    /// Words of one private copy, or `None` when the field keeps shared atomics.
    fn private_words(&self, chunks: usize) -> Option<usize>;
    /// Adds the words of the `marked` pages of the copies into the field, word by word in
    /// chunk order.
    fn reduce(&self, copies: &[Vec<u32>], marked: &[bool]);
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
}

/// The words of a private copy and a mark per page of them (see [`PAGE_WORDS`]).
#[derive(Clone, Copy)]
pub struct Cells<'c> {
    words: &'c [Cell<u32>],
    marks: &'c [Cell<bool>],
}

impl<T: Elem, const D: usize> ScatterField for View<'_, T, D> {
    /// The whole storage, dense or a sparse pool: a pool does not grow during a launch, so a
    /// block keeps its place in it and in the copies.
    fn private_words(&self, chunks: usize) -> Option<usize> {
        let words = self.storage().len();
        (words * chunks <= BUDGET_WORDS).then_some(words)
    }

    fn reduce(&self, copies: &[Vec<u32>], marked: &[bool]) {
        let float = T::SCALAR == Scalar::F32;
        self.storage()
            .par_chunks(PAGE_WORDS)
            .zip(marked)
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

    /// [`Access::place`]: the copy has the field's elements.
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        self.local.place(index)
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

    /// [`Access::place`]: the copy has the field's elements.
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        self.local.place(index)
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
        let Cells { words: copy, marks } = self.cells;
        let Some(base) = self.local.base_for_add(index) else {
            return;
        };
        // Both ends: an element of 3 or 9 words may straddle two pages.
        marks[base / PAGE_WORDS].set(true);
        marks[(base + T::WORDS - 1) / PAGE_WORDS].set(true);
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
/// parallel loop whose `copies` are all empty (shared atomics).
pub fn par_scatter<I: LoopInt, S>(
    reproducible: bool,
    start: I,
    end: I,
    inclusive: bool,
    fields: &[&dyn ScatterField],
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
    let sizes: Vec<Option<usize>> = fields.iter().map(|f| f.private_words(chunks)).collect();
    // copies[chunk][field].
    let mut copies: Vec<Vec<Vec<u32>>> = (0..chunks)
        .map(|_| sizes.iter().map(|s| zeroed(s.unwrap_or(0))).collect())
        .collect();
    let n = range.count;
    // marks[chunk][field][page]: whether the chunk's adds reached the page.
    let mut marks: Vec<Vec<Vec<bool>>> = copies
        .par_iter_mut()
        .enumerate()
        .map(|(c, mine)| {
            let mut marks: Vec<Vec<bool>> = mine
                .iter()
                .map(|v| vec![false; v.len().div_ceil(PAGE_WORDS)])
                .collect();
            let cells: Vec<PrivateCopy<'_>> = mine
                .iter_mut()
                .zip(&mut marks)
                .zip(&sizes)
                .map(|((v, marks), size)| {
                    // No size: the field keeps shared atomics. A field without cells has
                    // an empty copy (every access to it is out of bounds).
                    let words = Cell::from_mut(v.as_mut_slice()).as_slice_of_cells();
                    let marks = Cell::from_mut(marks.as_mut_slice()).as_slice_of_cells();
                    PrivateCopy(size.map(|_| Cells { words, marks }))
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
        if sizes[f].is_some() {
            let per_field: Vec<Vec<u32>> = copies
                .iter_mut()
                .map(|c| std::mem::take(&mut c[f]))
                .collect();
            let mine: Vec<Vec<bool>> = marks
                .iter_mut()
                .map(|m| std::mem::take(&mut m[f]))
                .collect();
            // Pages no chunk marked were not added into: zero in every copy.
            let any: Vec<bool> = (0..mine[0].len())
                .map(|p| mine.iter().any(|m| m[p]))
                .collect();
            field.reduce(&per_field, &any);
            keep(per_field, &mine);
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
        keep(used, &[all.clone(), all]);
        for _ in 0..2 {
            let c = zeroed(words);
            assert_eq!(c.len(), words);
            assert!(c.iter().all(|&w| w == 0));
        }
    }
}
