//! The sparse-layout algorithms on host memory: walking, activation, deactivation and the
//! bookkeeping after each launch. The Vulkan backend's GLSL implements the same steps over
//! the same words (see [`crate::layout::Structure`]).
//!
//! Activation locks the pointer slot first: the writer whose compare-and-swap turns an empty
//! slot into [`LOCKED`] takes a block from the pool and stores it there; other writers that
//! want the slot wait for that store (a few atomic operations), readers see an inactive cell.
//! Taking the block only after winning the slot is what keeps a pool with a block for every
//! slot from running out: when every contender took a block first and the losers gave theirs
//! back after the launch, a fully activated tree could find its pool empty (it did, with two
//! threads). Freed blocks return to the free list after the launch, in [`Sparse::maintain`].

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use crate::layout::{LevelKind, Structure, EMPTY, LOCKED, STATUS};

/// A tree's structure words with their plan.
#[derive(Clone, Copy)]
pub struct Sparse<'a> {
    pub plan: &'a Structure,
    pub words: &'a [AtomicU32],
    /// The walk of a power-of-two layout, when it is one.
    quick: Option<Quick>,
}

/// What the walk of a layout whose shapes are all powers of two reads, copied out of the
/// plan. Kept in the `Sparse` value itself (which kernels hold by value), it costs a few loads
/// per access rather than a chase through the plan, which every atomic `+=` in a kernel would
/// make the compiler repeat.
#[derive(Clone, Copy)]
struct Quick {
    /// The levels above the leaf, from the root.
    above: [Step; MAX_ABOVE],
    depth: usize,
    /// Whether every level above the leaf is dense: the walk then reads no memory.
    dense_path: bool,
    leaf: Leaf,
}

/// The leaf's part of the quick walk: what it takes to find a cell in a leaf block the cache
/// holds (see [`Sparse::leaf`]). A CPU access holds its own copy, by value: read through the
/// tree, each value was loaded again after every store to a field (any store might have
/// changed it, as far as the compiler knows), at every access.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Leaf {
    /// The leaf's activity bits, when it is bitmasked.
    table: Option<u32>,
    /// Per axis: the coordinate bits that pick the cell inside a leaf block, those that pick
    /// the block, the one bit that tells neighbouring blocks apart, and where the first go in
    /// the cell's index.
    in_block: [u32; 3],
    corner_mask: [u32; 3],
    parity: [u32; 3],
    cell_shift: [u32; 3],
    /// log2 of a leaf block's cells.
    block_shift: u32,
}

/// The leaf blocks a run of loop-body invocations reached, so that accesses to a block seen
/// before skip the walk (see [`Sparse::locate_cached`]). Direct-mapped by the parity of the
/// block's coordinates: the 2^D blocks a small stencil straddles never evict each other.
/// Every access takes the same path, the slot of its parity: an entry for the block of the
/// last access, checked first, missed each time a stencil crossed into its next block, a
/// branch the processor could not predict (`layout_ratios --fill 0.5`: without it the
/// 4x4-block layout's substep 38.3 -> 34.8 ms, G2P 13.8 -> 11.8; the 8x8 one's G2P 12.0 ->
/// 11.7).
#[derive(Debug)]
pub struct BlockCache {
    entries: [Cell<CachedBlock>; 8],
}

#[derive(Clone, Copy, Debug)]
struct CachedBlock {
    /// The coordinates of the block's first cell.
    corner: [u32; 3],
    /// The block's first cell.
    first: u32,
}

impl Default for BlockCache {
    fn default() -> Self {
        // No block has this corner: a coordinate is below its axis's extent.
        let empty = CachedBlock {
            corner: [u32::MAX; 3],
            first: 0,
        };
        BlockCache {
            entries: std::array::from_fn(|_| Cell::new(empty)),
        }
    }
}

/// Levels above the leaf that the quick walk takes (deeper trees take the general one).
const MAX_ABOVE: usize = 3;

/// One level of the quick walk.
#[derive(Clone, Copy)]
struct Step {
    kind: LevelKind,
    table: u32,
    /// Per axis: log2 of the elements one cell spans, and of the level's shape.
    shift: [u32; 3],
    bits: [u32; 3],
}

impl Quick {
    fn new(plan: &Structure) -> Option<Self> {
        let (leaf, above) = plan.levels.split_last()?;
        let (_, leaf_bits) = leaf.pow2?;
        if above.len() > MAX_ABOVE {
            return None;
        }
        let mut steps = [Step {
            kind: LevelKind::Dense,
            table: 0,
            shift: [0; 3],
            bits: [0; 3],
        }; MAX_ABOVE];
        for (step, p) in steps.iter_mut().zip(above) {
            let (shift, bits) = p.pow2?;
            *step = Step {
                kind: p.level.kind,
                table: p.table,
                shift,
                bits,
            };
        }
        Some(Quick {
            above: steps,
            depth: above.len(),
            dense_path: above.iter().all(|p| p.level.kind == LevelKind::Dense),
            leaf: Leaf {
                table: (leaf.level.kind == LevelKind::Bitmasked).then_some(leaf.table),
                in_block: leaf_bits.map(|b| (1 << b) - 1),
                corner_mask: leaf_bits.map(|b| !((1 << b) - 1)),
                parity: leaf_bits.map(|b| 1 << b),
                cell_shift: std::array::from_fn(|a| leaf_bits[a + 1..].iter().sum()),
                block_shift: leaf_bits.iter().sum(),
            },
        })
    }
}

/// Cell `local(0..D)` of `block` in a level of `bits` (log2 of the shape per axis): the
/// block's cells are numbered with the last axis fastest.
#[inline(always)]
fn linear<const D: usize>(block: u32, bits: [u32; 3], local: impl Fn(usize) -> u32) -> u32 {
    (0..D).fold(block, |acc, a| (acc << bits[a]) | local(a))
}

/// What a launch left in one level's block pool (zero for a level without one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolUse {
    /// Blocks in use.
    pub in_use: u32,
    /// Blocks ever handed out from the pool's never-used range since the tree was emptied:
    /// the blocks past them hold nothing.
    pub handed_out: u32,
}

impl PoolUse {
    /// The use of a pool of `capacity` whose never-used range has handed out `counter` and
    /// whose free list holds `free_len` (the words after [`Sparse::maintain`]).
    pub fn from_counters(capacity: u32, counter: u32, free_len: u32) -> Self {
        let handed_out = counter.min(capacity);
        PoolUse {
            in_use: handed_out.saturating_sub(free_len),
            handed_out,
        }
    }
}

/// The words of one field placed on a tree, for clearing deactivated units.
pub struct FieldWords<'a> {
    pub words: &'a [AtomicU32],
    pub per_element: usize,
}

impl<'a> Sparse<'a> {
    pub fn new(plan: &'a Structure, words: &'a [AtomicU32]) -> Self {
        Sparse {
            plan,
            words,
            quick: Quick::new(plan),
        }
    }

    #[inline(always)]
    fn w(&self, i: u32) -> &AtomicU32 {
        &self.words[i as usize]
    }

    /// The cell index of `c` inside `block` at level `k`.
    #[inline(always)]
    fn cell(&self, k: usize, block: u32, c: [u32; 3]) -> u32 {
        self.plan.levels[k].cell(block, c)
    }

    #[inline(always)]
    fn bit(&self, table: u32, cell: u32) -> bool {
        self.w(table + cell / 32).load(Relaxed) & (1 << (cell % 32)) != 0
    }

    /// The element index of in-range coordinates `c`, activating the path when `activate`;
    /// `None` when the element is inactive (or its pool is full, which sets the status).
    /// `D` is the layout's dimension count: axes past it are not computed.
    #[inline(always)]
    pub fn locate<const D: usize>(&self, c: [u32; 3], activate: bool) -> Option<u64> {
        let Some(q) = &self.quick else {
            return self.locate_general(c, activate);
        };
        let block = self.walk::<D>(q, c, activate)?;
        self.leaf_element::<D>(&q.leaf, block << q.leaf.block_shift, c, activate)
    }

    /// The leaf's part of the quick walk, for [`Sparse::locate_through_cache`]: `None` for a
    /// layout without one.
    #[inline(always)]
    pub(crate) fn leaf(&self) -> Option<Leaf> {
        self.quick.map(|q| q.leaf)
    }

    /// [`Sparse::locate`] through `cache`, the leaf blocks that earlier accesses of the same
    /// worker found active. Blocks keep their place until the launch ends, so a cache that
    /// lives no longer than one launch cannot go stale.
    #[inline(always)]
    pub fn locate_cached<const D: usize>(
        &self,
        c: [u32; 3],
        activate: bool,
        cache: &BlockCache,
    ) -> Option<u64> {
        match &self.quick {
            None => self.locate_general(c, activate),
            Some(q) if q.dense_path => self.locate::<D>(c, activate),
            Some(q) => self.locate_through_cache::<D>(&q.leaf, c, activate, cache),
        }
    }

    /// [`Sparse::locate_cached`] through the cache whatever the levels above the leaf: the
    /// one path a tree with the quick walk needs, and the only one that `Access`'s `CACHED`
    /// path carries. `leaf` is this tree's [`Sparse::leaf`].
    #[inline(always)]
    pub(crate) fn locate_through_cache<const D: usize>(
        &self,
        leaf: &Leaf,
        c: [u32; 3],
        activate: bool,
        cache: &BlockCache,
    ) -> Option<u64> {
        // The block's corner identifies it; the parity of its place picks the cache slot.
        let corner: [u32; 3] =
            std::array::from_fn(|a| if a < D { c[a] & leaf.corner_mask[a] } else { 0 });
        let slot = (0..D).fold(0, |s, a| (s << 1) | (c[a] & leaf.parity[a] != 0) as usize);
        let slot = &cache.entries[slot];
        let mut entry = slot.get();
        if (0..D).fold(0, |d, a| d | (entry.corner[a] ^ corner[a])) != 0 {
            let first = self.walk_out_of_line::<D>(c, activate)? << leaf.block_shift;
            entry = CachedBlock { corner, first };
            slot.set(entry);
        }
        let first = entry.first;
        self.leaf_element::<D>(leaf, first, c, activate)
    }

    /// The leaf block holding `c`: a loop of known length unrolls.
    #[inline(always)]
    fn walk<const D: usize>(&self, q: &Quick, c: [u32; 3], activate: bool) -> Option<u32> {
        match q.depth {
            0 => Some(0),
            1 => self.quick_walk::<D, 1>(q, c, activate),
            2 => self.quick_walk::<D, 2>(q, c, activate),
            _ => self.quick_walk::<D, MAX_ABOVE>(q, c, activate),
        }
    }

    /// [`Sparse::walk`] kept out of line, for the cached path that mostly skips it (only
    /// trees with the quick walk take that path: they alone have a [`Leaf`]).
    #[inline(never)]
    fn walk_out_of_line<const D: usize>(&self, c: [u32; 3], activate: bool) -> Option<u32> {
        let q = self
            .quick
            .as_ref()
            .expect("a tree with a Leaf has the quick walk");
        self.walk::<D>(q, c, activate)
    }

    /// The element of `c` in the leaf block whose first cell is `first`, marking it active
    /// in a bitmasked leaf.
    #[inline(always)]
    fn leaf_element<const D: usize>(
        &self,
        leaf: &Leaf,
        first: u32,
        c: [u32; 3],
        activate: bool,
    ) -> Option<u64> {
        // The last axis varies fastest: its bits need no shift.
        let cell = (0..D).fold(first, |cell, a| match a + 1 == D {
            true => cell | (c[a] & leaf.in_block[a]),
            false => cell | ((c[a] & leaf.in_block[a]) << leaf.cell_shift[a]),
        });
        match leaf.table {
            Some(table) if !self.mark(table, cell, activate) => None,
            _ => Some(cell as u64),
        }
    }

    /// [`Sparse::locate`] of a layout without a quick walk.
    #[inline(never)]
    fn locate_general(&self, c: [u32; 3], activate: bool) -> Option<u64> {
        let last = self.plan.levels.len() - 1;
        let block = self.leaf_block(c, activate)?;
        self.child(last, block, c, activate).map(u64::from)
    }

    /// The leaf block holding `c`, through the first `N` levels of `q`.
    #[inline(always)]
    fn quick_walk<const D: usize, const N: usize>(
        &self,
        q: &Quick,
        c: [u32; 3],
        activate: bool,
    ) -> Option<u32> {
        let mut block = 0;
        for (k, s) in q.above[..N].iter().enumerate() {
            let cell = linear::<D>(block, s.bits, |a| {
                (c[a] >> s.shift[a]) & ((1 << s.bits[a]) - 1)
            });
            block = self.descend(k, s.kind, s.table, cell, activate)?;
        }
        Some(block)
    }

    /// Whether bit `cell` of the bits at `table` is set; with `activate`, sets it.
    #[inline(always)]
    fn mark(&self, table: u32, cell: u32, activate: bool) -> bool {
        if self.bit(table, cell) {
            return true;
        }
        if activate {
            self.w(table + cell / 32)
                .fetch_or(1 << (cell % 32), Relaxed);
        }
        activate
    }

    /// What cell `cell` of level `k` (of `kind`, its table at `table`) leads to: the cell
    /// itself in a dense or (active) bitmasked level, the child block in a pointer level.
    #[inline(always)]
    fn descend(
        &self,
        k: usize,
        kind: LevelKind,
        table: u32,
        cell: u32,
        activate: bool,
    ) -> Option<u32> {
        match kind {
            LevelKind::Dense => Some(cell),
            LevelKind::Bitmasked => self.mark(table, cell, activate).then_some(cell),
            LevelKind::Pointer => match self.w(table + cell).load(Relaxed) {
                EMPTY | LOCKED if activate => self.allocate(k, cell),
                EMPTY | LOCKED => None,
                child => Some(child),
            },
        }
    }

    /// Walks the levels above the leaf: the leaf block holding `c`, when its path is active
    /// (or activated).
    #[inline(never)]
    fn leaf_block(&self, c: [u32; 3], activate: bool) -> Option<u32> {
        let last = self.plan.levels.len() - 1;
        (0..last).try_fold(0, |block, k| self.child(k, block, c, activate))
    }

    /// One level down: what the cell of `block` at level `k` holding `c` leads to.
    #[inline(always)]
    fn child(&self, k: usize, block: u32, c: [u32; 3], activate: bool) -> Option<u32> {
        let p = &self.plan.levels[k];
        self.descend(k, p.level.kind, p.table, p.cell(block, c), activate)
    }

    /// The child block of pointer slot `cell` of level `k`, installing a fresh one when the
    /// slot is empty (or waiting while another worker installs one).
    #[cold]
    #[inline(never)]
    fn allocate(&self, k: usize, cell: u32) -> Option<u32> {
        let p = &self.plan.levels[k];
        let pool = p.pool.as_ref()?;
        let slot = self.w(p.table + cell);
        let mut spins = 0u32;
        loop {
            match slot.compare_exchange(EMPTY, LOCKED, Relaxed, Relaxed) {
                Ok(_) => break,
                Err(LOCKED) => {
                    // The holder is between two atomic operations; if it was preempted
                    // there, let it run.
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                Err(child) => return Some(child),
            }
        }
        let taken = self.w(pool.free_taken).fetch_add(1, Relaxed);
        let block = if taken < self.w(pool.free_len).load(Relaxed) {
            self.w(pool.free + taken).load(Relaxed)
        } else {
            let fresh = self.w(pool.counter).fetch_add(1, Relaxed);
            if fresh >= pool.capacity {
                slot.store(EMPTY, Relaxed);
                let _ = self
                    .w(STATUS)
                    .compare_exchange(0, k as u32 + 1, Relaxed, Relaxed);
                return None;
            }
            fresh
        };
        // Relaxed suffices: the block's data was cleared before the launch began, and the
        // owner is read only after it ends.
        self.w(pool.owner + block).store(p.table + cell, Relaxed);
        slot.store(block, Relaxed);
        Some(block)
    }

    /// Queues the deepest sparse cell above `c` for deactivation at the end of the launch.
    pub fn deactivate(&self, c: [u32; 3]) {
        let Some(plan) = &self.plan.deactivation else {
            return;
        };
        let mut block = 0u32;
        for (k, p) in self.plan.levels.iter().enumerate() {
            let cell = self.cell(k, block, c);
            if k as u32 == plan.level {
                let active = match p.level.kind {
                    LevelKind::Bitmasked => self.bit(p.table, cell),
                    _ => self.w(p.table + cell).load(Relaxed) < LOCKED,
                };
                let mark = 1 << (cell % 32);
                if active && self.w(plan.queued + cell / 32).fetch_or(mark, Relaxed) & mark == 0 {
                    let r = self.w(plan.len).fetch_add(1, Relaxed);
                    if r < plan.capacity {
                        self.w(plan.queue + r).store(cell, Relaxed);
                    }
                }
                return;
            }
            match p.level.kind {
                LevelKind::Dense => block = cell,
                LevelKind::Bitmasked => {
                    if !self.bit(p.table, cell) {
                        return;
                    }
                    block = cell;
                }
                LevelKind::Pointer => {
                    block = self.w(p.table + cell).load(Relaxed);
                    if block >= LOCKED {
                        return;
                    }
                }
            }
        }
    }

    /// The coordinates of leaf element `e` when it is active.
    pub fn element_coords(&self, e: u64) -> Option<[u32; 3]> {
        self.cell_corner(self.plan.levels.len() - 1, u32::try_from(e).ok()?)
    }

    /// The coordinates of the first element of leaf block `block` when the path to it is
    /// active (the block's own cells may still be inactive in a bitmasked leaf).
    pub fn leaf_block_corner(&self, block: u32) -> Option<[u32; 3]> {
        let last = self.plan.levels.len() - 1;
        if last == 0 {
            return (block == 0).then_some([0; 3]);
        }
        let parent = &self.plan.levels[last - 1];
        let cell = self.parent_cell(parent, block)?;
        self.cell_corner(last - 1, cell)
    }

    /// The cell of level `parent` that holds its child block `block`.
    fn parent_cell(&self, parent: &crate::layout::LevelPlan, block: u32) -> Option<u32> {
        match &parent.pool {
            Some(pool) => match self.w(pool.owner + block).load(Relaxed) {
                EMPTY => None,
                slot => Some(slot - parent.table),
            },
            None => Some(block),
        }
    }

    /// The element coordinates of the corner of cell `cell` of level `k`, when it and every
    /// cell above it is active.
    fn cell_corner(&self, k: usize, mut cell: u32) -> Option<[u32; 3]> {
        let mut coords = [0u32; 3];
        for k in (0..=k).rev() {
            let p = &self.plan.levels[k];
            if p.level.kind == LevelKind::Bitmasked && !self.bit(p.table, cell) {
                return None;
            }
            let (block, local) = p.split(cell);
            for (c, d) in coords.iter_mut().zip(local) {
                *c += d;
            }
            if k == 0 {
                return (block == 0).then_some(coords);
            }
            cell = self.parent_cell(&self.plan.levels[k - 1], block)?;
        }
        None
    }

    /// Calls `body` with the coordinates and the element of every active element among
    /// cells `cells` (local indices, `0..` the leaf's cells per block) of leaf block `block`.
    pub fn for_each_active_in_block(
        &self,
        block: u32,
        cells: std::ops::Range<u32>,
        mut body: impl FnMut([u32; 3], u32),
    ) {
        let Some(corner) = self.leaf_block_corner(block) else {
            return;
        };
        let leaf = &self.plan.levels[self.plan.levels.len() - 1];
        let first = block * leaf.level.cells();
        for cell in first + cells.start..first + cells.end {
            if leaf.level.kind == LevelKind::Bitmasked && !self.bit(leaf.table, cell) {
                continue;
            }
            let (_, local) = leaf.split(cell);
            body(std::array::from_fn(|a| corner[a] + local[a]), cell);
        }
    }

    /// After a launch: applies queued deactivations (clearing the units' data in every field
    /// of the tree), recycles freed blocks, and reports a pool that ran out (its level).
    pub fn maintain(&self, fields: &[FieldWords<'_>]) -> Result<(), (u32, u32)> {
        if let Some(plan) = &self.plan.deactivation {
            let k = plan.level as usize;
            let p = &self.plan.levels[k];
            // Elements below one cell of level k (all levels below are dense or bitmasked).
            let below: Vec<u64> = self.plan.levels[k + 1..]
                .iter()
                .scan(1u64, |acc, l| {
                    *acc *= l.level.cells() as u64;
                    Some(*acc)
                })
                .collect();
            let unit = below.last().copied().unwrap_or(1);
            let n = self.w(plan.len).load(Relaxed).min(plan.capacity);
            for r in 0..n {
                let cell = self.w(plan.queue + r).load(Relaxed);
                self.w(plan.queued + cell / 32)
                    .fetch_and(!(1 << (cell % 32)), Relaxed);
                let first = match p.level.kind {
                    LevelKind::Bitmasked => {
                        self.w(p.table + cell / 32)
                            .fetch_and(!(1 << (cell % 32)), Relaxed);
                        cell as u64
                    }
                    _ => {
                        let block = self.w(p.table + cell).swap(EMPTY, Relaxed);
                        if block == EMPTY {
                            continue;
                        }
                        let pool = p
                            .pool
                            .as_ref()
                            .expect("a pointer level below another has a pool");
                        self.w(pool.owner + block).store(EMPTY, Relaxed);
                        let back = self.w(pool.returned_len).fetch_add(1, Relaxed);
                        self.w(pool.returned + back).store(block, Relaxed);
                        block as u64
                    }
                };
                // Clear the unit's bits in the levels below, then its elements.
                for (j, l) in self.plan.levels[k + 1..].iter().enumerate() {
                    if l.level.kind == LevelKind::Bitmasked {
                        let span = below[j];
                        for bit in first * span..(first + 1) * span {
                            self.w(l.table + (bit / 32) as u32)
                                .fetch_and(!(1 << (bit % 32)), Relaxed);
                        }
                    }
                }
                for f in fields {
                    let start = (first * unit) as usize * f.per_element;
                    let end = start + unit as usize * f.per_element;
                    f.words[start..end].iter().for_each(|w| w.store(0, Relaxed));
                }
            }
            self.w(plan.len).store(0, Relaxed);
        }
        for p in &self.plan.levels {
            let Some(pool) = &p.pool else { continue };
            let len = self.w(pool.free_len).load(Relaxed);
            let taken = self.w(pool.free_taken).load(Relaxed).min(len);
            let mut out = 0;
            for i in taken..len {
                let b = self.w(pool.free + i).load(Relaxed);
                self.w(pool.free + out).store(b, Relaxed);
                out += 1;
            }
            let returned = self.w(pool.returned_len).load(Relaxed);
            for i in 0..returned {
                let b = self.w(pool.returned + i).load(Relaxed);
                self.w(pool.free + out).store(b, Relaxed);
                out += 1;
            }
            self.w(pool.free_len).store(out, Relaxed);
            self.w(pool.free_taken).store(0, Relaxed);
            self.w(pool.returned_len).store(0, Relaxed);
            let counter = self.w(pool.counter).load(Relaxed).min(pool.capacity);
            self.w(pool.counter).store(counter, Relaxed);
        }
        match self.w(STATUS).swap(0, Relaxed) {
            0 => Ok(()),
            level => {
                let capacity = self.plan.levels[level as usize - 1]
                    .pool
                    .as_ref()
                    .map_or(0, |p| p.capacity);
                Err((level - 1, capacity))
            }
        }
    }

    /// Per level, the use of its pool (zero without one), from the pool's two counters.
    pub fn pool_use(&self) -> Vec<PoolUse> {
        self.plan
            .levels
            .iter()
            .map(|p| {
                p.pool.as_ref().map_or(PoolUse::default(), |pool| {
                    PoolUse::from_counters(
                        pool.capacity,
                        self.w(pool.counter).load(Relaxed),
                        self.w(pool.free_len).load(Relaxed),
                    )
                })
            })
            .collect()
    }

    /// Blocks of each level in use: 1 at the root, the allocated ones below a pointer level,
    /// all children of used blocks below a dense or bitmasked level.
    fn blocks_in_use(&self) -> Vec<u64> {
        let mut used = vec![1u64];
        for p in &self.plan.levels[..self.plan.levels.len() - 1] {
            let last = *used.last().unwrap_or(&1);
            used.push(match &p.pool {
                Some(pool) => {
                    let counter = self.w(pool.counter).load(Relaxed).min(pool.capacity);
                    counter.saturating_sub(self.w(pool.free_len).load(Relaxed)) as u64
                }
                None => last * p.level.cells() as u64,
            });
        }
        used
    }

    /// Words of pointer tables and activity bits that belong to blocks in use.
    pub fn table_words_in_use(&self) -> u64 {
        self.plan
            .levels
            .iter()
            .zip(self.blocks_in_use())
            .map(|(p, blocks)| match p.level.kind {
                LevelKind::Dense => 0,
                LevelKind::Pointer => blocks * p.level.cells() as u64,
                LevelKind::Bitmasked => (blocks * p.level.cells() as u64).div_ceil(32),
            })
            .sum()
    }

    /// Leaf elements in blocks currently allocated (all of them without pointer levels).
    pub fn elements_in_use(&self) -> u64 {
        let leaf = self
            .plan
            .levels
            .last()
            .map_or(1, |p| p.level.cells() as u64);
        self.blocks_in_use().last().copied().unwrap_or(1) * leaf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    /// Fresh structure words of `plan`.
    fn words(plan: &Structure) -> Vec<AtomicU32> {
        plan.initial_words()
            .into_iter()
            .map(AtomicU32::new)
            .collect()
    }

    /// Walks `coords` (reading, then writing, each one) through the cache on one copy of
    /// `plan` and without it on another: every answer, and so every block handed out, agrees.
    fn cached_agrees<const D: usize>(plan: &Structure, coords: &[[u32; 3]]) {
        let (a, b) = (words(plan), words(plan));
        let (plain, cached) = (Sparse::new(plan, &a), Sparse::new(plan, &b));
        let cache = BlockCache::default();
        for &c in coords {
            for activate in [false, true, false] {
                assert_eq!(
                    plain.locate::<D>(c, activate),
                    cached.locate_cached::<D>(c, activate, &cache),
                    "at {c:?}, activate {activate}"
                );
            }
        }
        let load = |w: &[AtomicU32]| w.iter().map(|w| w.load(Relaxed)).collect::<Vec<_>>();
        assert_eq!(load(&a), load(&b));
    }

    /// Coordinates of a 3x3(x3) stencil at pseudo-random places, as a particle loop makes.
    fn stencils<const D: usize>(extent: u32, count: u32) -> Vec<[u32; 3]> {
        let mut out = Vec::new();
        for k in 0..count {
            let base: [u32; 3] = std::array::from_fn(|a| {
                (k.wrapping_mul(2654435761).rotate_left(7 * a as u32 + 3)) % (extent - 2)
            });
            for o in 0..3u32.pow(D as u32) {
                out.push(std::array::from_fn(|a| {
                    if a < D {
                        base[a] + (o / 3u32.pow(a as u32)) % 3
                    } else {
                        0
                    }
                }));
            }
        }
        out
    }

    #[test]
    fn cached_and_plain_walks_agree() {
        let two = [
            Layout::<2>::root().pointer([16, 16]).dense([8, 8]),
            Layout::<2>::root()
                .pointer([16, 16])
                .bitmasked([2, 2])
                .dense([4, 4]),
            Layout::<2>::root()
                .pointer([8, 8])
                .pointer([2, 2])
                .dense([8, 8]),
            Layout::<2>::root().pointer([32, 32]).bitmasked([4, 4]),
            Layout::<2>::root().dense([16, 16]).dense([8, 8]),
            // Not powers of two: the general walk, without the cache.
            Layout::<2>::root().pointer([12, 12]).dense([10, 10]),
        ];
        for layout in two {
            let extent = layout.shape()[0];
            let plan = layout.reserve(1000).structure().expect("plans");
            cached_agrees::<2>(&plan, &stencils::<2>(extent, 300));
        }
        let layout = Layout::<3>::root().pointer([8, 8, 8]).dense([4, 4, 4]);
        let plan = layout.reserve(600).structure().expect("plans");
        cached_agrees::<3>(&plan, &stencils::<3>(32, 200));
    }

    #[test]
    fn a_full_pool_is_not_cached() {
        // Room for two blocks: the third block's cells stay inactive however often they are
        // asked for, and the cache keeps answering for the two it has.
        let plan = Layout::<1>::root()
            .pointer([8])
            .dense([4])
            .reserve(2)
            .structure()
            .expect("plans");
        cached_agrees::<1>(
            &plan,
            &[
                [0, 0, 0],
                [5, 0, 0],
                [9, 0, 0],
                [1, 0, 0],
                [10, 0, 0],
                [6, 0, 0],
            ],
        );
    }
}
