//! Layout trees (Taichi's SNodes): how the cells of a field are stored.
//!
//! A layout is a chain of levels from the root; each level splits a block into a grid of
//! cells, and every cell of a level holds one block of the next level. The cells of the last
//! level are the field's elements.
//!
//! * `dense`: children always exist;
//! * `bitmasked`: children exist, with one activity bit per cell;
//! * `pointer`: a slot per cell, empty until a write allocates the child block from a pool.
//!
//! [`Structure`] computes, once for both backends, where everything lives in the tree's
//! structure buffer of 32-bit words, so the CPU backend and the generated GLSL walk exactly
//! the same data.

use crate::error::{Error, Result};

/// The kind of one level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LevelKind {
    Dense,
    Pointer,
    Bitmasked,
}

/// One level of a layout: its kind and the cells per block along each axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Level {
    pub kind: LevelKind,
    /// Cells per block along each axis (unused axes are 1).
    pub shape: [u32; 3],
}

impl Level {
    /// Cells per block.
    #[inline(always)]
    pub fn cells(&self) -> u32 {
        self.shape.iter().product()
    }
}

/// A layout of `D` dimensions, built from the root down.
///
/// ```
/// use mpm_core::layout::Layout;
/// let grid = Layout::<3>::root().pointer([64, 64, 64]).bitmasked([4, 4, 4]);
/// assert_eq!(grid.shape(), [256, 256, 256]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout<const D: usize> {
    levels: Vec<Level>,
    /// Blocks reserved below each pointer level, when given.
    reserve: Option<u32>,
}

impl<const D: usize> Layout<D> {
    /// An empty layout; add levels with [`dense`](Self::dense), [`pointer`](Self::pointer)
    /// and [`bitmasked`](Self::bitmasked).
    pub fn root() -> Self {
        const { assert!(D >= 1 && D <= 3, "sparse layouts have 1 to 3 dimensions") };
        Layout {
            levels: Vec::new(),
            reserve: None,
        }
    }

    fn level(mut self, kind: LevelKind, shape: [u32; D]) -> Self {
        let mut s = [1u32; 3];
        s[..D].copy_from_slice(&shape);
        self.levels.push(Level { kind, shape: s });
        self
    }

    pub fn dense(self, shape: [u32; D]) -> Self {
        self.level(LevelKind::Dense, shape)
    }

    pub fn pointer(self, shape: [u32; D]) -> Self {
        self.level(LevelKind::Pointer, shape)
    }

    pub fn bitmasked(self, shape: [u32; D]) -> Self {
        self.level(LevelKind::Bitmasked, shape)
    }

    /// Reserves room for `blocks` child blocks below every pointer level to start with (the
    /// default is an eighth of the blocks the level could address, at least 64); a tree's
    /// pools grow beyond it as launches fill them (see [`crate::Tree`]).
    pub fn reserve(mut self, blocks: u32) -> Self {
        self.reserve = Some(blocks);
        self
    }

    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// The index space: per axis, the product of the levels' shapes.
    pub fn shape(&self) -> [u32; D] {
        let mut out = [1u32; D];
        for l in &self.levels {
            for (o, s) in out.iter_mut().zip(l.shape) {
                *o *= s;
            }
        }
        out
    }

    /// Computes the storage plan.
    pub fn structure(&self) -> Result<Structure> {
        Structure::new(D as u32, &self.levels, |_, slots| {
            self.reserve.map_or((slots / 8).max(64), |r| r as u64)
        })
    }
}

/// Where the parts of one level live in the structure buffer (offsets in words).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LevelPlan {
    pub level: Level,
    /// Blocks this level can hold.
    pub capacity: u32,
    /// Per axis: how many elements one cell of this level spans.
    pub stride: [u32; 3],
    /// `Pointer`: the slot table (`capacity * cells` words, `EMPTY` when unallocated).
    /// `Bitmasked`: the activity bits (`ceil(capacity * cells / 32)` words).
    pub table: u32,
    /// `Pointer` only: the pool of the child level.
    pub pool: Option<PoolPlan>,
    /// When every stride and shape is a power of two: per axis, the shift of the stride
    /// and the bits of the shape, so that walking needs no division.
    pub pow2: Option<([u32; 3], [u32; 3])>,
}

impl LevelPlan {
    /// The cell index of element coordinates `c` inside `block`.
    #[inline(always)]
    pub fn cell(&self, block: u32, c: [u32; 3]) -> u32 {
        let s = self.level.shape;
        let local = match self.pow2 {
            Some((shift, bits)) => {
                let d = |a: usize| (c[a] >> shift[a]) & (s[a] - 1);
                (((d(0) << bits[1]) | d(1)) << bits[2]) | d(2)
            }
            None => {
                let d = |a: usize| (c[a] / self.stride[a]) % s[a];
                (d(0) * s[1] + d(1)) * s[2] + d(2)
            }
        };
        block * self.level.cells() + local
    }

    /// The inverse of [`cell`](Self::cell): the block, and the element coordinates of the
    /// cell's corner relative to the block.
    #[inline(always)]
    pub fn split(&self, cell: u32) -> (u32, [u32; 3]) {
        let s = self.level.shape;
        match self.pow2 {
            Some((shift, bits)) => {
                let block = cell >> (bits[0] + bits[1] + bits[2]);
                let d2 = cell & (s[2] - 1);
                let d1 = (cell >> bits[2]) & (s[1] - 1);
                let d0 = (cell >> (bits[1] + bits[2])) & (s[0] - 1);
                (block, [d0 << shift[0], d1 << shift[1], d2 << shift[2]])
            }
            None => {
                let cells = self.level.cells();
                let (block, local) = (cell / cells, cell % cells);
                let d2 = local % s[2];
                let d1 = (local / s[2]) % s[1];
                let d0 = local / (s[1] * s[2]);
                (
                    block,
                    [
                        d0 * self.stride[0],
                        d1 * self.stride[1],
                        d2 * self.stride[2],
                    ],
                )
            }
        }
    }
}

/// The allocator of the blocks below one pointer level.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolPlan {
    /// Child blocks available.
    pub capacity: u32,
    /// Word: blocks handed out from the never-used range so far.
    pub counter: u32,
    /// Word: entries of `free` usable in this launch.
    pub free_len: u32,
    /// Word: entries of `free` taken so far in this launch (may exceed `free_len`).
    pub free_taken: u32,
    /// Word: entries of `returned` so far.
    pub returned_len: u32,
    /// `capacity` words: recycled block indices.
    pub free: u32,
    /// `capacity` words: blocks freed by deactivation after a launch, on their way back to
    /// `free`.
    pub returned: u32,
    /// `capacity` words: for each child block, the slot that points at it (`EMPTY` if free).
    pub owner: u32,
}

/// Deactivation requests, applied when a launch ends.
///
/// `deactivate(f, i)` acts on the deepest sparse level above `i` (its bit, or its pointer
/// slot); the request is queued here and applied after the launch, when nothing else writes
/// the unit, so that the unit's data can be cleared for every field on the tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeactivationPlan {
    /// The deepest pointer or bitmasked level.
    pub level: u32,
    /// Cells of that level that can be queued (its table length, or for a pointer level the
    /// blocks of its pool).
    pub capacity: u32,
    /// Word: entries queued.
    pub len: u32,
    /// `capacity` words: the queued cells (index into the level's table).
    pub queue: u32,
    /// Bits marking queued cells, one per cell of the level's table.
    pub queued: u32,
}

/// The storage plan of a layout, shared by both backends.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Structure {
    pub dims: u32,
    pub levels: Vec<LevelPlan>,
    /// Elements one field placed on the tree stores (leaf capacity times leaf cells).
    pub elements: u64,
    /// `None` for an all-dense layout.
    pub deactivation: Option<DeactivationPlan>,
    /// Words of the structure buffer.
    pub words: u32,
}

/// An unallocated pointer slot (and a free block's owner).
pub const EMPTY: u32 = u32::MAX;
/// A pointer slot whose block is being installed, during a launch only: the invocation that
/// locked it takes a block and stores it; others that want the slot wait for the store, and
/// those that only read it see an inactive cell. Block indices stay below it.
pub const LOCKED: u32 = u32::MAX - 1;
/// Word 0 of the structure buffer: set to 1 + the pointer level whose pool ran out.
pub const STATUS: u32 = 0;

impl Structure {
    /// `wanted(k, slots)` is the capacity wanted below pointer level `k` with `slots` slots
    /// (clamped to 1..=slots).
    fn new(dims: u32, levels: &[Level], wanted: impl Fn(usize, u64) -> u64) -> Result<Self> {
        let bad = |m: String| Err(Error::Layout(m));
        if levels.is_empty() {
            return bad("a layout needs at least one level".into());
        }
        if levels.iter().any(|l| l.shape.contains(&0)) {
            return bad("every level needs at least one cell per axis".into());
        }
        if levels.last().is_some_and(|l| l.kind == LevelKind::Pointer) {
            return bad("the last level holds the elements: make it dense or bitmasked".into());
        }
        // Elements spanned by one cell of each level, per axis.
        let mut strides = vec![[1u32; 3]; levels.len()];
        for k in (0..levels.len() - 1).rev() {
            let below = strides[k + 1];
            for (a, s) in strides[k].iter_mut().enumerate() {
                *s = below[a]
                    .checked_mul(levels[k + 1].shape[a])
                    .ok_or_else(too_big)?;
            }
        }
        let mut words: u64 = 1; // STATUS
        let mut plans = Vec::new();
        let mut capacity: u64 = 1;
        for (k, l) in levels.iter().enumerate() {
            let cells = capacity * l.cells() as u64;
            let table = words;
            let mut pool = None;
            let child_capacity = match l.kind {
                LevelKind::Dense => cells,
                LevelKind::Bitmasked => {
                    words += cells.div_ceil(32);
                    cells
                }
                LevelKind::Pointer => {
                    words += cells;
                    let cap = wanted(k, cells).clamp(1, cells);
                    if k + 1 < levels.len() {
                        let c = u32::try_from(cap).map_err(|_| too_big())?;
                        let base = words;
                        pool = Some(PoolPlan {
                            capacity: c,
                            counter: base as u32,
                            free_len: base as u32 + 1,
                            free_taken: base as u32 + 2,
                            returned_len: base as u32 + 3,
                            free: base as u32 + 4,
                            returned: (base + 4 + cap) as u32,
                            owner: (base + 4 + 2 * cap) as u32,
                        });
                        words += 4 + 3 * cap;
                    }
                    cap
                }
            };
            plans.push(LevelPlan {
                level: *l,
                capacity: u32::try_from(capacity).map_err(|_| too_big())?,
                stride: strides[k],
                table: table as u32,
                pool,
                pow2: (strides[k]
                    .iter()
                    .chain(&l.shape)
                    .all(|v| v.is_power_of_two()))
                .then(|| {
                    (
                        strides[k].map(u32::trailing_zeros),
                        l.shape.map(u32::trailing_zeros),
                    )
                }),
            });
            if words > u32::MAX as u64 / 2 {
                return Err(too_big());
            }
            capacity = child_capacity;
        }
        let leaf = plans
            .last()
            .map(|p| p.capacity as u64 * p.level.cells() as u64)
            .unwrap_or(0);
        let deactivation = plans
            .iter()
            .rposition(|p| p.level.kind != LevelKind::Dense)
            .map(|k| {
                let p = &plans[k];
                let cells = p.capacity as u64 * p.level.cells() as u64;
                let capacity = match &p.pool {
                    Some(pool) => pool.capacity as u64,
                    None => cells,
                };
                let plan = DeactivationPlan {
                    level: k as u32,
                    capacity: capacity as u32,
                    len: words as u32,
                    queue: words as u32 + 1,
                    queued: (words + 1 + capacity) as u32,
                };
                words += 1 + capacity + cells.div_ceil(32);
                plan
            });
        if words > u32::MAX as u64 / 2 {
            return Err(too_big());
        }
        Ok(Structure {
            dims,
            levels: plans,
            elements: leaf,
            deactivation,
            words: words as u32,
        })
    }

    /// The initial contents of the structure buffer: everything empty.
    pub fn initial_words(&self) -> Vec<u32> {
        let mut w = vec![0u32; self.words as usize];
        for p in &self.levels {
            if p.level.kind == LevelKind::Pointer {
                let n = p.capacity as usize * p.level.cells() as usize;
                w[p.table as usize..p.table as usize + n].fill(EMPTY);
            }
            if let Some(pool) = &p.pool {
                let o = pool.owner as usize;
                w[o..o + pool.capacity as usize].fill(EMPTY);
            }
        }
        w
    }

    /// The plan of the same levels with the pool below pointer level `k` holding `pools[k]`
    /// blocks (entries for other levels are ignored).
    pub fn with_pools(&self, pools: &[u32]) -> Result<Structure> {
        let levels: Vec<Level> = self.levels.iter().map(|p| p.level).collect();
        Structure::new(self.dims, &levels, |k, _| {
            pools.get(k).copied().unwrap_or(1) as u64
        })
    }

    /// Each pointer level's pool capacity (0 for other levels).
    pub fn pool_capacities(&self) -> Vec<u32> {
        self.levels
            .iter()
            .map(|p| p.pool.as_ref().map_or(0, |pool| pool.capacity))
            .collect()
    }

    /// The leaf elements that the first `handed_out[k]` blocks of each pool `k` hold: the
    /// deepest pool's blocks, all levels below it being dense or bitmasked, hold a contiguous
    /// range of elements from 0. `None` for a tree without pools (every element is used).
    pub fn elements_in_blocks(&self, handed_out: &[u32]) -> Option<u64> {
        let k = self.levels.iter().rposition(|p| p.pool.is_some())?;
        let per_block: u64 = self.levels[k + 1..]
            .iter()
            .map(|p| p.level.cells() as u64)
            .product();
        Some(*handed_out.get(k)? as u64 * per_block)
    }

    /// The words of `self` holding what `old_words` (laid out by `old`, a plan of the same
    /// levels with pools no larger) holds, between launches: blocks keep their indices, so
    /// tables and bits copy as prefixes and field data stays where it is.
    pub fn migrate_from(&self, old: &Structure, old_words: &[u32]) -> Vec<u32> {
        let mut w = self.initial_words();
        let copy = |w: &mut [u32], from: u32, to: u32, len: u64| {
            let (from, to, len) = (from as usize, to as usize, len as usize);
            w[to..to + len].copy_from_slice(&old_words[from..from + len]);
        };
        for (o, n) in old.levels.iter().zip(&self.levels) {
            let cells = o.capacity as u64 * o.level.cells() as u64;
            match o.level.kind {
                LevelKind::Dense => {}
                LevelKind::Pointer => copy(&mut w, o.table, n.table, cells),
                LevelKind::Bitmasked => copy(&mut w, o.table, n.table, cells.div_ceil(32)),
            }
            if let (Some(op), Some(np)) = (&o.pool, &n.pool) {
                copy(&mut w, op.counter, np.counter, 4);
                copy(&mut w, op.free, np.free, op.capacity as u64);
                copy(&mut w, op.returned, np.returned, op.capacity as u64);
                // Owners name slots by word, and the slot table may have moved.
                for b in 0..op.capacity {
                    let slot = old_words[(op.owner + b) as usize];
                    if slot != EMPTY {
                        w[(np.owner + b) as usize] = slot - o.table + n.table;
                    }
                }
            }
        }
        // Deactivation queues are empty between launches; STATUS is 0.
        w
    }

    /// Bytes of the structure buffer.
    pub fn bytes(&self) -> u64 {
        self.words as u64 * 4
    }
}

fn too_big() -> Error {
    Error::Layout(
        "the layout addresses more than 2^31 words of structure; use more pointer levels".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_and_divisions_agree() {
        let plans = [
            Layout::<1>::root()
                .pointer([8])
                .bitmasked([4])
                .dense([2])
                .structure()
                .unwrap(),
            Layout::<2>::root()
                .pointer([4, 8])
                .dense([2, 4])
                .structure()
                .unwrap(),
            Layout::<3>::root()
                .dense([2, 2, 4])
                .pointer([4, 2, 2])
                .bitmasked([2, 4, 2])
                .structure()
                .unwrap(),
        ];
        for s in &plans {
            for p in &s.levels {
                assert!(p.pow2.is_some());
                let slow = LevelPlan {
                    pow2: None,
                    ..p.clone()
                };
                for k in 0..4096u32 {
                    let c = [k % 16, (k / 16) % 16, k / 256];
                    assert_eq!(p.cell(3, c), slow.cell(3, c), "{p:?} at {c:?}");
                    assert_eq!(p.split(k), slow.split(k), "{p:?} splitting {k}");
                }
            }
        }
    }

    #[test]
    fn elements_in_handed_out_blocks() {
        let plan = |l: Layout<2>| l.reserve(16).structure().unwrap();
        // The deepest pool's blocks hold the leaf's elements: 2x2 bitmasked cells of 4x4.
        let deep = plan(
            Layout::root()
                .pointer([4, 4])
                .pointer([2, 2])
                .bitmasked([2, 2])
                .dense([4, 4]),
        );
        assert_eq!(deep.elements_in_blocks(&[7, 3, 0, 0]), Some(3 * 4 * 16));
        // A dense level above the pointer changes nothing.
        let under_dense = plan(Layout::root().dense([2, 2]).pointer([2, 2]).dense([8, 8]));
        assert_eq!(under_dense.elements_in_blocks(&[0, 5, 0]), Some(5 * 64));
        // Without pools, every element is used.
        assert_eq!(
            plan(Layout::root().dense([4, 4]).bitmasked([4, 4])).elements_in_blocks(&[0, 0]),
            None
        );
    }
}
