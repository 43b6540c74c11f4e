//! Fields: typed, shaped arrays that live on a backend.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::backend::{BackendRef, Buffer, TreeArg};
use crate::error::{Error, Result};
use crate::kernel::CallField;
use crate::layout::{Layout, Structure};
use crate::sparse::{PoolUse, Sparse};
use crate::types::{from_words, to_words, Elem};

/// A field of `D` dimensions (0 to 3) holding elements of type `T`: dense, or placed on a
/// sparse [`Tree`].
pub struct Field<T: Elem, const D: usize = 1> {
    backend: BackendRef,
    slot: Arc<Slot>,
    shape: [u32; D],
    tree: Option<Arc<Tree<D>>>,
    _t: PhantomData<T>,
}

/// A field's buffer, replaced by a larger one when its tree grows.
struct Slot {
    buffer: RwLock<Arc<dyn Buffer>>,
    /// Words per element.
    per_element: usize,
}

impl Slot {
    fn new(buffer: Arc<dyn Buffer>, per_element: usize) -> Arc<Self> {
        Arc::new(Slot {
            buffer: RwLock::new(buffer),
            per_element,
        })
    }

    fn buffer(&self) -> Arc<dyn Buffer> {
        self.buffer
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A layout tree allocated on a backend; fields placed on it share its activity.
///
/// The pools below pointer levels grow, keeping every field's contents: after any launch that
/// leaves a pool more than half full, and after one that ran out (which is still reported as
/// [`Error::PoolExhausted`], since the writes past the pool were not made).
pub struct Tree<const D: usize> {
    layout: Layout<D>,
    shared: Arc<Shared>,
}

/// What a tree's storage generations have in common.
struct Shared {
    backend: BackendRef,
    storage: RwLock<Arc<Storage>>,
    fields: Mutex<Vec<Weak<Slot>>>,
    /// See [`Tree::freeze`].
    frozen: AtomicBool,
}

/// A tree's structure at one size of its pools; what a launch sees of the tree.
struct Storage {
    plan: Structure,
    /// The structure words with everything inactive (what `deactivate_all` writes).
    empty: Vec<u32>,
    structure: Arc<dyn Buffer>,
    shared: Weak<Shared>,
    /// Per level, the blocks its pool has handed out since the tree was emptied (so that
    /// emptying it again clears only those); `None` when not known.
    handed_out: Mutex<Option<Vec<u32>>>,
}

/// Locks `m`, carrying on past a panic in another holder (the data are plain numbers).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pool more than this full after a launch doubles.
const GROW_AT: f64 = 0.5;

/// Memory of a field or tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Bytes allocated.
    pub reserved: u64,
    /// Bytes of blocks in use (equal to `reserved` for dense storage).
    pub in_use: u64,
}

impl<const D: usize> Tree<D> {
    /// Allocates the structure of `layout` (everything inactive).
    pub fn new(backend: &BackendRef, layout: Layout<D>) -> Result<Arc<Self>> {
        let plan = layout.structure()?;
        let empty = plan.initial_words();
        let structure = backend.alloc(plan.words as usize)?;
        backend.write(&*structure, 0, &empty)?;
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| Shared {
            backend: backend.clone(),
            storage: RwLock::new(Arc::new(Storage {
                plan,
                empty,
                structure,
                shared: weak.clone(),
                handed_out: Mutex::new(Some(vec![0; layout.levels().len()])),
            })),
            fields: Mutex::new(Vec::new()),
            frozen: AtomicBool::new(false),
        });
        Ok(Arc::new(Tree { layout, shared }))
    }

    pub fn layout(&self) -> &Layout<D> {
        &self.layout
    }

    pub fn shape(&self) -> [u32; D] {
        self.layout.shape()
    }

    /// Deactivates every cell and clears the data of every field on the tree: the blocks
    /// handed out since it was last emptied, not the whole pools.
    pub fn deactivate_all(&self) -> Result<()> {
        let storage = self.storage();
        let backend = &self.shared.backend;
        // Unknown until every write has succeeded.
        let elements = lock(&storage.handed_out)
            .take()
            .and_then(|pools| storage.plan.elements_in_blocks(&pools));
        backend.write(&*storage.structure, 0, &storage.empty)?;
        for (buffer, per_element) in storage.fields() {
            let words = elements.map_or(buffer.words(), |e| {
                (e as usize * per_element).min(buffer.words())
            });
            backend.fill_zero(&*buffer, words)?;
        }
        *lock(&storage.handed_out) = Some(vec![0; storage.plan.levels.len()]);
        Ok(())
    }

    /// Freezes the tree's activity: kernels launched until [`Tree::thaw`] activate nothing,
    /// and their writes go to active cells only. A write (`=`, `+=`, `atomic_add`) or an
    /// `activate` that finds its cell inactive is not done and fails the launch with
    /// [`Error::InactiveWrite`], naming the field. Deactivation is unaffected.
    ///
    /// Why: a P2G's `+=` otherwise carries the activation path on every access, which a GPU
    /// runs even when no cell needs it (lavapipe: a sparse P2G at 3x the dense one). A pass
    /// that activates each touched block once, then the frozen P2G, runs at the dense speed
    /// (`demos::blob`).
    pub fn freeze(&self) {
        self.shared.frozen.store(true, Ordering::Relaxed);
    }

    /// Ends [`Tree::freeze`]: writes activate their cells again.
    pub fn thaw(&self) {
        self.shared.frozen.store(false, Ordering::Relaxed);
    }

    /// Runs `launches` with the tree frozen, and thaws it afterwards whatever they return.
    pub fn while_frozen<R>(&self, launches: impl FnOnce() -> R) -> R {
        self.freeze();
        let result = launches();
        self.thaw();
        result
    }

    pub fn is_frozen(&self) -> bool {
        self.shared.frozen.load(Ordering::Relaxed)
    }

    /// Grows every pool to at least `blocks` blocks (as far as its level has slots), keeping
    /// the contents of every field on the tree.
    pub fn reserve(&self, blocks: u32) -> Result<()> {
        self.shared.grow(&vec![blocks; self.layout.levels().len()])
    }

    /// The blocks each pointer level's pool holds (0 for the other levels).
    pub fn pool_capacities(&self) -> Vec<u32> {
        self.storage().plan.pool_capacities()
    }

    /// The structure's memory and, for every field placed on the tree, the elements' memory.
    pub fn memory(&self) -> Result<Memory> {
        let storage = self.storage();
        let words = storage.host_words(&self.shared.backend)?;
        let sparse = Sparse::new(&storage.plan, &words);
        let in_use_elements = sparse.elements_in_use();
        let mut m = Memory {
            reserved: storage.plan.bytes(),
            in_use: sparse.table_words_in_use() * 4,
        };
        for (buffer, per_element) in storage.fields() {
            m.reserved += buffer.words() as u64 * 4;
            m.in_use += in_use_elements * per_element as u64 * 4;
        }
        Ok(m)
    }

    fn storage(&self) -> Arc<Storage> {
        self.shared.storage()
    }

    /// Elements one field on the tree holds now.
    pub(crate) fn elements(&self) -> u64 {
        self.storage().plan.elements
    }

    /// A field's buffer for the tree's current plan, registered for growth.
    fn place(&self, per_element: usize) -> Result<Arc<Slot>> {
        // Hold the storage lock so that no growth runs between sizing and registering.
        let storage = self
            .shared
            .storage
            .read()
            .unwrap_or_else(|e| e.into_inner());
        let buffer = self
            .shared
            .backend
            .alloc(storage.plan.elements as usize * per_element)?;
        let slot = Slot::new(buffer, per_element);
        self.shared.lock_fields().push(Arc::downgrade(&slot));
        Ok(slot)
    }
}

impl Shared {
    fn storage(&self) -> Arc<Storage> {
        self.storage
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn lock_fields(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Slot>>> {
        let mut fields = lock(&self.fields);
        fields.retain(|w| w.strong_count() > 0);
        fields
    }

    /// Reallocates the structure and every field for pools of at least `pools` blocks (per
    /// level; pools never shrink), copying their contents (blocks keep their indices). Runs
    /// between launches.
    fn grow(&self, pools: &[u32]) -> Result<()> {
        let mut current = self.storage.write().unwrap_or_else(|e| e.into_inner());
        let old = &current.plan;
        let wanted: Vec<u32> = old
            .pool_capacities()
            .iter()
            .zip(pools)
            .map(|(&now, &want)| now.max(want))
            .collect();
        let plan = old.with_pools(&wanted)?;
        if plan.pool_capacities() == old.pool_capacities() {
            return Ok(());
        }
        let words = plan.migrate_from(old, &self.backend.read(&*current.structure)?);
        let structure = self.backend.alloc(plan.words as usize)?;
        self.backend.write(&*structure, 0, &words)?;
        let fields = self.lock_fields();
        let mut moved = Vec::with_capacity(fields.len());
        for slot in fields.iter().filter_map(Weak::upgrade) {
            let old_buffer = slot.buffer();
            let buffer = self
                .backend
                .alloc(plan.elements as usize * slot.per_element)?;
            let mut words = self.backend.read(&*old_buffer)?;
            words.resize(buffer.words(), 0);
            self.backend.write(&*buffer, 0, &words)?;
            moved.push((slot, buffer));
        }
        // Nothing is replaced until every allocation has succeeded.
        for (slot, buffer) in moved {
            *slot.buffer.write().unwrap_or_else(|e| e.into_inner()) = buffer;
        }
        // Blocks keep their indices, so the blocks handed out are the same.
        let handed_out = lock(&current.handed_out).clone();
        *current = Arc::new(Storage {
            empty: plan.initial_words(),
            plan,
            structure,
            shared: current.shared.clone(),
            handed_out: Mutex::new(handed_out),
        });
        Ok(())
    }
}

impl Storage {
    /// A host copy of the structure words, for the host-side algorithms of
    /// [`crate::sparse`] (memory accounting, dense downloads).
    fn host_words(&self, backend: &BackendRef) -> Result<Vec<AtomicU32>> {
        Ok(backend
            .read(&*self.structure)?
            .into_iter()
            .map(AtomicU32::new)
            .collect())
    }

    /// The pools the last launch left more than [`GROW_AT`] full, at twice their size (and
    /// the others as they are); `None` when none is (or can grow), or nothing was reported.
    fn pools_to_grow(&self, pools: &[PoolUse]) -> Option<Vec<u32>> {
        let mut grow = false;
        let wanted = self
            .plan
            .levels
            .iter()
            .zip(pools)
            .map(|(p, used)| {
                let Some(pool) = &p.pool else { return 0 };
                // A pool with a block for every slot cannot grow: no replanning after each launch.
                let slots = p.capacity as u64 * p.level.cells() as u64;
                let full = used.in_use as f64 > GROW_AT * pool.capacity as f64;
                if full && (pool.capacity as u64) < slots {
                    grow = true;
                    pool.capacity.saturating_mul(2)
                } else {
                    pool.capacity
                }
            })
            .collect();
        grow.then_some(wanted)
    }
}

impl TreeArg for Storage {
    fn plan(&self) -> &Structure {
        &self.plan
    }
    fn structure(&self) -> &dyn Buffer {
        &*self.structure
    }
    fn fields(&self) -> Vec<(Arc<dyn Buffer>, usize)> {
        match self.shared.upgrade() {
            Some(shared) => shared
                .lock_fields()
                .iter()
                .filter_map(Weak::upgrade)
                .map(|slot| (slot.buffer(), slot.per_element))
                .collect(),
            None => Vec::new(),
        }
    }
    fn frozen(&self) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|s| s.frozen.load(Ordering::Relaxed))
    }
    fn after_launch(&self, pools: Option<&[PoolUse]>) -> Result<()> {
        // A launch that measured nothing may still have handed out blocks.
        *lock(&self.handed_out) = pools.map(|pools| pools.iter().map(|p| p.handed_out).collect());
        match (
            self.shared.upgrade(),
            pools.and_then(|p| self.pools_to_grow(p)),
        ) {
            (Some(shared), Some(pools)) => shared.grow(&pools),
            _ => Ok(()),
        }
    }
}

impl<T: Elem, const D: usize> Field<T, D> {
    /// A zero-filled field of the given shape.
    pub fn new(backend: &BackendRef, shape: [u32; D]) -> Result<Self> {
        const { assert!(D <= 3, "fields have 0 to 3 dimensions") };
        let len: usize = shape.iter().map(|&s| s as usize).product();
        let buffer = backend.alloc(len * T::WORDS)?;
        Ok(Field {
            backend: backend.clone(),
            slot: Slot::new(buffer, T::WORDS),
            shape,
            tree: None,
            _t: PhantomData,
        })
    }

    /// A field placed on a layout tree: it exists where the tree's cells are active.
    pub fn place(tree: &Arc<Tree<D>>) -> Result<Self> {
        Ok(Field {
            backend: tree.shared.backend.clone(),
            slot: tree.place(T::WORDS)?,
            shape: tree.shape(),
            tree: Some(tree.clone()),
            _t: PhantomData,
        })
    }

    /// The tree this field is placed on, if any.
    pub fn tree(&self) -> Option<&Arc<Tree<D>>> {
        self.tree.as_ref()
    }

    /// Memory this field holds (the structure of its tree is counted by the tree).
    pub fn memory(&self) -> Result<Memory> {
        let reserved = self.slot.buffer().words() as u64 * 4;
        let in_use = match &self.tree {
            None => reserved,
            Some(t) => {
                let storage = t.storage();
                let words = storage.host_words(&self.backend)?;
                Sparse::new(&storage.plan, &words).elements_in_use() * T::WORDS as u64 * 4
            }
        };
        Ok(Memory { reserved, in_use })
    }

    /// A field of the given shape filled with `data` (last axis fastest).
    pub fn from_slice(backend: &BackendRef, shape: [u32; D], data: &[T]) -> Result<Self> {
        let mut f = Self::new(backend, shape)?;
        f.upload(data)?;
        Ok(f)
    }

    pub fn shape(&self) -> [u32; D] {
        self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().map(|&s| s as usize).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn backend(&self) -> &BackendRef {
        &self.backend
    }

    /// Bytes of device (or host) memory this field's elements take.
    pub fn bytes(&self) -> usize {
        self.slot.buffer().words() * 4
    }

    /// Replaces the whole contents (dense fields only: sparse ones are written by kernels).
    pub fn upload(&mut self, data: &[T]) -> Result<()> {
        if self.tree.is_none() && data.len() != self.len() {
            return Err(Error::SizeMismatch {
                expected: self.len(),
                got: data.len(),
                shape: self.shape.to_vec(),
            });
        }
        self.upload_at(0, data)
    }

    /// Writes `data` into elements `start..start + data.len()`, leaving the others as they
    /// are (dense fields only).
    pub fn upload_at(&mut self, start: usize, data: &[T]) -> Result<()> {
        if self.tree.is_some() {
            return Err(Error::Unsupported {
                backend: "any",
                what: "uploading into a sparse field; write it with a kernel".into(),
            });
        }
        if start + data.len() > self.len() {
            return Err(Error::SizeMismatch {
                expected: self.len(),
                got: start + data.len(),
                shape: self.shape.to_vec(),
            });
        }
        self.backend
            .write(&*self.slot.buffer(), start * T::WORDS, &to_words(data))
    }

    /// Copies the whole contents back, as a dense array (inactive cells of a sparse field
    /// read as zero).
    pub fn download(&self) -> Result<Vec<T>> {
        let data = self.backend.read(&*self.slot.buffer())?;
        let Some(tree) = &self.tree else {
            return Ok(from_words(&data));
        };
        if self.len() > 1 << 28 {
            return Err(Error::Unsupported {
                backend: "any",
                what: format!(
                    "downloading a sparse field of {} cells as a dense array",
                    self.len()
                ),
            });
        }
        let storage = tree.storage();
        let words = storage.host_words(&self.backend)?;
        let sparse = Sparse::new(&storage.plan, &words);
        let mut out = vec![T::zero(); self.len()];
        for e in 0..storage.plan.elements {
            if let Some(c) = sparse.element_coords(e) {
                let mut lin = 0usize;
                for (a, s) in self.shape.iter().enumerate() {
                    lin = lin * *s as usize + c[a] as usize;
                }
                let w = &data[e as usize * T::WORDS..(e as usize + 1) * T::WORDS];
                out[lin] = T::read_words(w);
            }
        }
        Ok(out)
    }

    /// Sets every element to `value`.
    pub fn fill(&mut self, value: T) -> Result<()> {
        let data = vec![value; self.len()];
        self.upload(&data)
    }

    /// The launch argument for this field (used by generated kernel code).
    #[doc(hidden)]
    pub fn arg(&self) -> CallField<'_> {
        CallField {
            buffer: self.slot.buffer(),
            shape: &self.shape,
            tree: self.tree.as_ref().map(|t| t.storage() as Arc<dyn TreeArg>),
        }
    }
}
