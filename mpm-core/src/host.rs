//! Host memory views used by the CPU lowering of kernels.
//!
//! Fields live in `[AtomicU32]` words. Every access is a relaxed atomic, so concurrent
//! invocations of a parallel loop never race in the Rust memory model (Taichi-style kernels
//! may write the same cell from several invocations); on x86 and ARM a relaxed load or store
//! compiles to a plain move. `+=` on a field is a compare-and-swap loop on f32 words and a
//! `fetch_add` on integer words.
//!
//! A loop body reaches its fields through [`Local`] views that each worker makes once per
//! launch: they remember the sparse leaf blocks the worker found, so that most accesses skip
//! the walk down the tree. In a particle loop the cells of one particle's stencil, and of the
//! next particle's, mostly lie in blocks already seen.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use glam::{IVec2, IVec3, UVec2, UVec3};
use rayon::prelude::*;

use crate::abi::ScalarReader;
use crate::backend::LoopRange;
use crate::sparse::{BlockCache, Leaf, Sparse};
use crate::types::{Elem, Scalar};

/// A field's storage as seen by a CPU launch.
pub struct HostField<'a> {
    pub words: &'a [AtomicU32],
    pub shape: &'a [u32],
    /// The layout tree of a sparse field.
    pub tree: Option<Sparse<'a>>,
    /// The tree is frozen (`Tree::freeze`): accesses activate nothing.
    pub frozen: bool,
}

/// Arguments of one CPU launch.
pub struct HostArgs<'a> {
    pub fields: Vec<HostField<'a>>,
    pub scalars: &'a [u32],
    pub ranges: &'a [LoopRange],
    /// The top-level loops to run (see [`crate::backend::LaunchArgs::loops`]).
    pub loops: std::ops::Range<usize>,
    /// The launch's status word (see [`crate::abi::status_error`]): the first field accessed
    /// out of bounds or written where its frozen tree is inactive.
    pub out_of_bounds: AtomicUsize,
    /// Run scatter loops into private copies, so that float sums come out the same on every
    /// run (`mpm_core::scatter`).
    pub reproducible: bool,
    /// The time each top-level loop took, in loop order (see [`HostArgs::lap`]).
    pub laps: Mutex<Laps>,
}

/// A stopwatch for the loops of one launch: each lap ends one loop (and the top-level
/// `let`s before it).
#[derive(Debug)]
pub struct Laps {
    last: Instant,
    pub times: Vec<Duration>,
}

impl Laps {
    pub fn start() -> Laps {
        Laps {
            last: Instant::now(),
            times: Vec::new(),
        }
    }
}

impl<'a> HostArgs<'a> {
    /// Ends the time of loop `index` (generated code calls it after each top-level loop).
    pub fn lap(&self, index: usize) {
        if let Ok(mut laps) = self.laps.lock() {
            let now = Instant::now();
            let took = now - laps.last;
            laps.last = now;
            if laps.times.len() <= index {
                laps.times.resize(index + 1, Duration::ZERO);
            }
            laps.times[index] += took;
        }
    }

    /// Whether top-level loop `index` runs in this launch (generated code asks before each).
    pub fn runs(&self, index: usize) -> bool {
        self.loops.contains(&index)
    }

    /// A typed view of field parameter `n`.
    pub fn view<T: Elem, const D: usize>(&self, n: usize) -> View<'_, T, D> {
        let f = &self.fields[n];
        let mut shape = [0u32; D];
        shape.copy_from_slice(f.shape);
        View {
            words: f.words,
            shape,
            tree: f.tree.as_ref(),
            frozen: f.frozen,
            field: n,
            oob: &self.out_of_bounds,
            _t: PhantomData,
        }
    }

    /// The scalar parameters, read in parameter order.
    pub fn scalars(&self) -> ScalarReader<'_> {
        ScalarReader::new(self.scalars)
    }
}

/// A typed view of one field during a CPU launch.
pub struct View<'a, T, const D: usize> {
    words: &'a [AtomicU32],
    shape: [u32; D],
    /// The layout tree of a sparse field, by reference: the view stays small enough to copy
    /// into registers per invocation (see [`Access`]).
    tree: Option<&'a Sparse<'a>>,
    frozen: bool,
    field: usize,
    oob: &'a AtomicUsize,
    _t: PhantomData<T>,
}

/// An index into a field of `D` dimensions: the last axis varies fastest.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not index a {D}-D field",
    label = "a 1-D field takes a u32 or i32, a 2-D one an IVec2 or UVec2, a 3-D one an IVec3 or UVec3, a 0-D one `()`"
)]
pub trait FieldIndex<const D: usize>: Copy {
    /// The coordinates, in range or not (unused axes 0).
    fn signed(self) -> [i64; 3];

    /// The element an earlier access found at this index (see [`Access::place`]).
    #[inline(always)]
    fn placed(self) -> Option<Place<D>> {
        None
    }

    /// The coordinates (unused axes 0), or None outside the shape.
    #[inline(always)]
    fn coords(self, shape: &[u32; D]) -> Option<[u32; 3]> {
        let c = self.signed();
        let mut out = [0u32; 3];
        // A negative coordinate wraps to a huge unsigned one: one compare per axis, and one
        // branch for them all (a branch per axis cost mpm3d.toml's substep a tenth of its
        // instructions).
        let mut inside = true;
        for k in 0..D {
            inside &= (c[k] as u64) < shape[k] as u64;
            out[k] = c[k] as u32;
        }
        inside.then_some(out)
    }
}

/// Which fields share element numbers: those on one tree (its structure words' address),
/// or dense ones (`tree` 0) of one shape.
#[derive(Clone, Copy)]
struct Elements<const D: usize> {
    tree: usize,
    shape: [u32; D],
}

impl<const D: usize> Elements<D> {
    /// The tree first: fields on one tree have its shape.
    #[inline(always)]
    fn same(&self, other: &Self) -> bool {
        self.tree == other.tree && (self.tree != 0 || self.shape == other.shape)
    }
}

/// The element a store found at an index, and the fields it holds for.
#[derive(Clone, Copy)]
pub struct Place<const D: usize> {
    elements: Elements<D>,
    /// `None`: out of bounds, or a sparse cell that could not be activated.
    element: Option<usize>,
}

/// An index with the element an earlier store found there ([`Access::place`]), or with
/// none ([`Placed::unplaced`]) where a view locates elements its own way.
#[derive(Clone, Copy)]
pub struct Placed<I, const D: usize> {
    index: I,
    place: Option<Place<D>>,
}

impl<I, const D: usize> Placed<I, D> {
    /// `index` without an element: every access finds its own.
    #[inline(always)]
    pub fn unplaced(index: I) -> Self {
        Placed { index, place: None }
    }
}

impl<I: FieldIndex<D>, const D: usize> FieldIndex<D> for Placed<I, D> {
    #[inline(always)]
    fn signed(self) -> [i64; 3] {
        self.index.signed()
    }

    #[inline(always)]
    fn coords(self, shape: &[u32; D]) -> Option<[u32; 3]> {
        self.index.coords(shape)
    }

    #[inline(always)]
    fn placed(self) -> Option<Place<D>> {
        self.place
    }
}

macro_rules! field_index {
    ($d:literal, $t:ty, |$v:ident| [$($c:expr),*]) => {
        impl FieldIndex<$d> for $t {
            #[inline(always)]
            fn signed(self) -> [i64; 3] {
                let $v = self;
                let c: [i64; $d] = [$($c),*];
                let mut out = [0i64; 3];
                out[..$d].copy_from_slice(&c);
                out
            }
        }
    };
}
field_index!(0, (), |_v| []);
field_index!(1, u32, |v| [v as i64]);
field_index!(1, i32, |v| [v as i64]);
field_index!(2, IVec2, |v| [v.x as i64, v.y as i64]);
field_index!(2, UVec2, |v| [v.x as i64, v.y as i64]);
field_index!(3, IVec3, |v| [v.x as i64, v.y as i64, v.z as i64]);
field_index!(3, UVec3, |v| [v.x as i64, v.y as i64, v.z as i64]);

/// Element types that `field[i] += v` accepts.
pub trait AtomicAdd: Elem {}
macro_rules! atomic_add_elem {
    ($($t:ty),*) => { $(impl AtomicAdd for $t {})* };
}
atomic_add_elem!(
    f32,
    i32,
    u32,
    glam::Vec2,
    glam::Vec3,
    glam::Vec4,
    IVec2,
    IVec3,
    UVec2,
    UVec3,
    glam::Mat2,
    glam::Mat3
);

/// Element types whose `atomic_add` returns the old value: the one-word scalars.
#[diagnostic::on_unimplemented(
    message = "`let old = atomic_add(f, i, v);` needs a field of f32, i32 or u32, not `{Self}`",
    label = "a field of `{Self}`"
)]
pub trait FetchAdd: AtomicAdd {}
impl FetchAdd for f32 {}
impl FetchAdd for i32 {}
impl FetchAdd for u32 {}

impl<T, const D: usize> Clone for View<'_, T, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const D: usize> Copy for View<'_, T, D> {}

impl<'a, T: Elem, const D: usize> View<'a, T, D> {
    /// The in-range coordinates of `index`, raising the out-of-bounds flag otherwise.
    #[inline(always)]
    pub(crate) fn coords(&self, index: impl FieldIndex<D>) -> Option<[u32; 3]> {
        let c = index.coords(&self.shape);
        if c.is_none() {
            self.raise_out_of_bounds();
        }
        c
    }

    /// Keeps the first offending field in the flag; later ones do not overwrite it.
    #[cold]
    #[inline(never)]
    fn raise_out_of_bounds(&self) {
        let _ = self
            .oob
            .compare_exchange(0, self.field + 1, Relaxed, Relaxed);
    }

    /// The element at `index`; with `activate`, a sparse path is activated. A sparse
    /// field's leaf block is looked up in `cache` before the tree is walked.
    #[inline(always)]
    fn locate(
        &self,
        index: impl FieldIndex<D>,
        activate: bool,
        cache: &BlockCache,
    ) -> Option<usize> {
        self.element_at(self.coords(index)?, activate, cache)
    }

    /// The element at in-range coordinates `c` (see [`View::locate`]).
    #[inline(always)]
    pub(crate) fn element_at(
        &self,
        c: [u32; 3],
        activate: bool,
        cache: &BlockCache,
    ) -> Option<usize> {
        let element = match &self.tree {
            None => self.dense_element(c),
            Some(tree) if self.frozen => {
                let found = tree.locate_cached::<D>(c, false, cache);
                if found.is_none() && activate {
                    let status = (self.field + 1) | crate::abi::INACTIVE_WRITE as usize;
                    let _ = self.oob.compare_exchange(0, status, Relaxed, Relaxed);
                }
                found? as usize
            }
            Some(tree) => tree.locate_cached::<D>(c, activate, cache)? as usize,
        };
        Some(element)
    }

    /// The element at in-range coordinates `c` of a dense field: the last axis varies fastest.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // the indexed loop is the point (see below)
    pub(crate) fn dense_element(&self, c: [u32; 3]) -> usize {
        // An indexed loop of constant length unrolls; as `zip(..).fold(..)` it was sometimes
        // left a call per access.
        let mut lin = 0usize;
        for a in 0..D {
            lin = lin * self.shape[a] as usize + c[a] as usize;
        }
        lin
    }

    /// The view one worker of a parallel loop accesses the field through.
    pub fn local(&self) -> Local<'_, 'a, T, D> {
        Local {
            view: self,
            cache: BlockCache::default(),
        }
    }

    /// The words of the element starting at word `base` (one bounds check for them all).
    #[inline(always)]
    pub(crate) fn cells(&self, base: usize) -> &'a [AtomicU32] {
        &self.words[base..base + T::WORDS]
    }

    /// The field's storage: its elements (dense), or its tree's pool of leaf blocks (sparse).
    pub(crate) fn storage(&self) -> &[AtomicU32] {
        self.words
    }

    pub fn shape(&self) -> [u32; D] {
        self.shape
    }

    /// The tree the field lives on, named by its structure words' address.
    pub(crate) fn tree_id(&self) -> Option<usize> {
        self.tree.map(|t| t.words.as_ptr() as usize)
    }

    /// Whether the field's tree is frozen (see [`crate::Tree::freeze`]).
    pub(crate) fn frozen(&self) -> bool {
        self.frozen
    }

    /// The layout tree of a sparse field.
    pub(crate) fn tree(&self) -> Option<&'a Sparse<'a>> {
        self.tree
    }

    /// The field as a dense one over `words` (a [`crate::snapshot::Snapshot`]'s), with its
    /// shape and its flags.
    pub(crate) fn dense_over<'s>(&self, words: &'s [AtomicU32]) -> View<'s, T, D>
    where
        'a: 's,
    {
        View {
            words,
            shape: self.shape,
            tree: None,
            frozen: false,
            field: self.field,
            oob: self.oob,
            _t: PhantomData,
        }
    }
}

/// A field as one worker of a parallel loop sees it: the launch's view, and the sparse leaf
/// blocks this worker reached so far, which its next accesses mostly hit (the cells one
/// invocation touches, and those of the next index, tend to share blocks).
pub struct Local<'v, 'a, T, const D: usize> {
    view: &'v View<'a, T, D>,
    cache: BlockCache,
}

impl<'a, T: Elem, const D: usize> Local<'_, 'a, T, D> {
    /// The view one batch of invocations accesses the field through.
    #[inline(always)]
    pub fn access(&self) -> Access<'_, 'a, T, D> {
        Access {
            view: *self.view,
            cache: &self.cache,
            leaf: Leaf::default(),
        }
    }

    /// [`Local::access`] on the [`DENSE`] path: `None` for a sparse field.
    #[inline(always)]
    pub fn dense_access(&self) -> Option<Access<'_, 'a, T, D, DENSE>> {
        self.view.tree.is_none().then_some(Access {
            view: *self.view,
            cache: &self.cache,
            leaf: Leaf::default(),
        })
    }

    /// [`Local::access`] on the [`DENSE`] path for a field a loop only adds into: `None` for
    /// a sparse field, unless its private copy is grid-shaped (see
    /// [`crate::scatter::PrivateCopy::grid_shaped`]): its adds then find dense elements.
    #[inline(always)]
    pub fn dense_access_for_copy(&self, grid_shaped: bool) -> Option<Access<'_, 'a, T, D, DENSE>> {
        (self.view.tree.is_none() || grid_shaped).then_some(Access {
            view: *self.view,
            cache: &self.cache,
            leaf: Leaf::default(),
        })
    }

    /// [`Local::cached_access`] for a field a loop only adds into: `None` also where its
    /// private copy is grid-shaped, which the dense path and the path of every storage
    /// take (with it, each add on this path carried the test: `layout_ratios --fill 0.1`,
    /// whose copies are pool-shaped, P2G 3.6 -> 4.1 ms).
    #[inline(always)]
    pub fn cached_access_for_copy(
        &self,
        grid_shaped: bool,
    ) -> Option<Access<'_, 'a, T, D, CACHED>> {
        self.cached_access().filter(|_| !grid_shaped)
    }

    /// [`Local::access`] on the [`CACHED`] path: `None` for a frozen tree or one without
    /// the quick walk.
    #[inline(always)]
    pub fn cached_access(&self) -> Option<Access<'_, 'a, T, D, CACHED>> {
        let leaf = match &self.view.tree {
            None => Some(Leaf::default()),
            Some(tree) => tree.leaf().filter(|_| !self.view.frozen),
        };
        leaf.map(|leaf| Access {
            view: *self.view,
            cache: &self.cache,
            leaf,
        })
    }
}

/// A field as a batch of loop-body invocations sees it: a copy of the launch's view (its words,
/// shape and tree), and the worker's block cache. Made afresh by each batch so that the
/// copy lives in registers: every field word is an atomic, and after an atomic store the
/// compiler must assume that any memory it could reach changed, so a view reached through a
/// reference would be loaded again after every `+=` (measured: a third of the P2G's
/// instructions).
///
/// `PATH` is the code an access carries (see [`ANY`]): each access is inlined, and with
/// every path a stencil's accesses made a P2G's code 140 KB long.
pub struct Access<'l, 'a, T, const D: usize, const PATH: u8 = ANY> {
    view: View<'a, T, D>,
    cache: &'l BlockCache,
    /// On the [`CACHED`] path, a sparse field's [`Leaf`] (unused on the others).
    leaf: Leaf,
}

/// [`Access`] paths. The CPU lowering runs a batch of invocations on the narrowest path
/// that all the fields of its loop allow, each access then free of the code of the others:
/// [`DENSE`] where every field is dense, else [`CACHED`] where every sparse one can take it,
/// else [`ANY`] (see `cpu_loop` in mpm-macros). mpm99's substep took 0.65 ms on `ANY`
/// against 0.57 on `DENSE`.
///
/// Every path: dense storage, a sparse tree's walk (cached, direct or general) and a
/// frozen tree's checks.
pub const ANY: u8 = 0;
/// Dense storage only.
pub const DENSE: u8 = 1;
/// Dense storage, or a sparse tree through the worker's block cache (a tree with the
/// quick walk, not frozen).
pub const CACHED: u8 = 2;

impl<'a, T: Elem, const D: usize, const PATH: u8> Access<'_, 'a, T, D, PATH> {
    /// The first word of the element at `index` (see [`View::locate`]).
    #[inline(always)]
    fn locate(&self, index: impl FieldIndex<D>, activate: bool) -> Option<usize> {
        Some(self.element(index, activate)? * T::WORDS)
    }

    /// The element at `index`: the one a [`Placed`] index carries when it was found for
    /// this field's elements, else the one this access finds.
    #[inline(always)]
    fn element(&self, index: impl FieldIndex<D>, activate: bool) -> Option<usize> {
        if let Some(place) = index.placed() {
            if place.elements.same(&self.elements()) {
                return place.element;
            }
        }
        match PATH {
            ANY => self.view.locate(index, activate, self.cache),
            _ => self.locate_coords_on_path(self.view.coords(index)?, activate),
        }
    }

    /// The element at in-range coordinates `c` on the [`DENSE`] or [`CACHED`] path.
    #[inline(always)]
    fn locate_coords_on_path(&self, c: [u32; 3], activate: bool) -> Option<usize> {
        match (PATH, &self.view.tree) {
            (DENSE, _) | (_, None) => Some(self.view.dense_element(c)),
            (_, Some(tree)) => {
                Some(tree.locate_through_cache::<D>(&self.leaf, c, activate, self.cache)? as usize)
            }
        }
    }

    /// What numbers this field's elements: fields with equal ones have the same element at
    /// every index.
    #[inline(always)]
    fn elements(&self) -> Elements<D> {
        Elements {
            tree: self.view.tree.map_or(0, |t| t.words.as_ptr() as usize),
            shape: self.view.shape,
        }
    }

    /// `index` with the element a store finds there, activating a sparse path (and raising
    /// the out-of-bounds or inactive-write flag as a store does): the CPU lowering finds
    /// the element once for a run of stores to one index, and the run's stores into fields
    /// numbered alike take it from the [`Placed`] index instead of finding it again (a
    /// P2G's `grid_v[i] += ..; grid_m[i] += ..;`). Only for stores: a load of a cell the
    /// store could not activate would read it as zero anyway, but would not raise a flag.
    ///
    /// Not on the [`DENSE`] path: a dense element is a bounds check, a multiply and an add,
    /// no more than comparing the fields' shapes costs (mpm99's P2G, `layout_ratios`'
    /// dense P2G 8.5 -> 9.5 ms with it).
    #[inline(always)]
    pub fn place<I: FieldIndex<D>>(&self, index: I) -> Placed<I, D> {
        if PATH == DENSE {
            return Placed::unplaced(index);
        }
        Placed {
            index,
            place: Some(Place {
                elements: self.elements(),
                element: self.element(index, true),
            }),
        }
    }

    /// Whether the element exists: always for dense fields, where its cell is active for
    /// sparse ones.
    #[inline]
    pub fn is_active(&self, index: impl FieldIndex<D>) -> bool {
        self.locate(index, false).is_some()
    }

    /// Activates the element's cell (a no-op on dense fields).
    #[inline]
    pub fn activate(&self, index: impl FieldIndex<D>) {
        let _ = self.locate(index, true);
    }

    /// Queues the element's unit for deactivation when the launch ends (a no-op on dense
    /// fields).
    #[inline]
    pub fn deactivate(&self, index: impl FieldIndex<D>) {
        if let (Some(c), Some(tree)) = (self.view.coords(index), &self.view.tree) {
            tree.deactivate(c);
        }
    }

    #[inline(always)]
    pub fn load(&self, index: impl FieldIndex<D>) -> T {
        match self.locate(index, false) {
            Some(base) => {
                let mut w = [0u32; 16];
                for (slot, cell) in w.iter_mut().zip(self.view.cells(base)) {
                    *slot = cell.load(Relaxed);
                }
                T::read_words(&w[..T::WORDS])
            }
            None => T::zero(),
        }
    }

    // Inlined always, as every access: as a call, the invocation's copies of the views (see
    // `Access`) had to be written to memory (3.6% of mpm3d.toml's substep instructions).
    #[inline(always)]
    pub fn store(&self, index: impl FieldIndex<D>, value: T) {
        self.store_words(index, value, |cell, word| cell.store(word, Relaxed));
    }

    /// `field[index] = value`, each word written by `write` (see [`Owned::store`]).
    #[inline(always)]
    fn store_words(&self, index: impl FieldIndex<D>, value: T, write: impl Fn(&AtomicU32, u32)) {
        if let Some(base) = self.locate(index, true) {
            let mut w = [0u32; 16];
            value.write_words(&mut w[..T::WORDS]);
            for (word, cell) in w.iter().zip(self.view.cells(base)) {
                write(cell, *word);
            }
        }
    }

    /// Atomic `field[index] += value`, component by component.
    #[inline(always)]
    pub fn atomic_add(&self, index: impl FieldIndex<D>, value: T)
    where
        T: AtomicAdd,
    {
        self.atomic_update(index, value, false);
    }

    /// Atomic `field[index] -= value`, component by component.
    #[inline(always)]
    pub fn atomic_sub(&self, index: impl FieldIndex<D>, value: T)
    where
        T: AtomicAdd,
    {
        self.atomic_update(index, value, true);
    }

    #[inline(always)]
    fn atomic_update(&self, index: impl FieldIndex<D>, value: T, subtract: bool) {
        let Some(base) = self.locate(index, true) else {
            return;
        };
        let mut w = [0u32; 16];
        value.write_words(&mut w[..T::WORDS]);
        let float = T::SCALAR == Scalar::F32;
        for (word, cell) in w.iter().zip(self.view.cells(base)) {
            // A float zero adds nothing (+0 or -0: sums that start at +0 never reach -0), so
            // one-hot shares cost one atomic, as on the GPU.
            if float && *word & 0x7fff_ffff == 0 {
                continue;
            }
            add_word(cell, increment(*word, float, subtract), float);
        }
    }

    /// Atomic `field[index] += value` that returns the element's value before the add
    /// (`let old = field.atomic_add(index, value);` in a kernel). Out of bounds it adds
    /// nothing and returns zero.
    #[inline]
    pub fn fetch_add(&self, index: impl FieldIndex<D>, value: T) -> T
    where
        T: FetchAdd,
    {
        let Some(base) = self.locate(index, true) else {
            return T::zero();
        };
        let mut w = [0u32; 1];
        value.write_words(&mut w);
        let old = add_word(&self.view.cells(base)[0], w[0], T::SCALAR == Scalar::F32);
        T::read_words(&[old])
    }

    /// The first word of the element at `c` (in-range coordinates), activating a sparse
    /// path.
    #[inline(always)]
    pub(crate) fn locate_coords(&self, c: [u32; 3]) -> Option<usize> {
        let element = match PATH {
            ANY => self.view.element_at(c, true, self.cache),
            _ => self.locate_coords_on_path(c, true),
        }?;
        Some(element * T::WORDS)
    }

    /// The view this invocation's accesses go to.
    pub(crate) fn view(&self) -> &View<'a, T, D> {
        &self.view
    }

    /// The first storage word of the element at `index`, its cell activated on a sparse
    /// field; `None` (and the out-of-bounds flag raised) outside the shape.
    #[inline(always)]
    pub(crate) fn base_for_add(&self, index: impl FieldIndex<D>) -> Option<usize> {
        self.locate(index, true)
    }

    /// The dense element at `index`, sparse field or not, ignoring a [`Placed`] element;
    /// `None` (and the out-of-bounds flag raised) outside the shape.
    #[inline(always)]
    pub(crate) fn dense_element_for_add(&self, index: impl FieldIndex<D>) -> Option<usize> {
        Some(self.view.dense_element(self.view.coords(index)?))
    }
}

/// A field that each invocation of a loop stores into and names only at its own index, the
/// loop's invocations running for distinct indices (the lowering checks both:
/// `own_index_fields` in mpm-macros): its stores into a dense field are plain writes. Atomic
/// stores, which LLVM does not combine, left the arithmetic before them scalar (mpm3d's
/// G2P: 4.8-5.3 -> 3.7-3.9 ms with plain ones). Everything else goes to the [`Access`].
pub struct Owned<'r, 'l, 'a, T, const D: usize, const PATH: u8>(&'r Access<'l, 'a, T, D, PATH>);

impl<'r, 'l, 'a, T: Elem, const D: usize, const PATH: u8> Owned<'r, 'l, 'a, T, D, PATH> {
    #[inline(always)]
    pub fn new(access: &'r Access<'l, 'a, T, D, PATH>) -> Self {
        Owned(access)
    }

    /// `field[index] = value`, with plain writes on a dense field.
    #[inline(always)]
    pub fn store(&self, index: impl FieldIndex<D>, value: T) {
        if self.0.view.tree.is_some() {
            return self.0.store(index, value);
        }
        self.0.store_words(index, value, |cell, word| {
            // SAFETY: only this invocation touches this element during the launch: the
            // loop's invocations run for distinct indices and each names the field only at
            // its own, the field is a `&mut` kernel parameter (no other parameter shares its
            // words), and a dense element's words are its index's alone. Other threads
            // access other words of the buffer, atomically or not, which is no race; the
            // launch's end (a rayon join) orders these writes before any later access.
            unsafe { cell.as_ptr().write(word) };
        });
    }
}

impl<'l, 'a, T, const D: usize, const PATH: u8> std::ops::Deref for Owned<'_, 'l, 'a, T, D, PATH> {
    type Target = Access<'l, 'a, T, D, PATH>;
    #[inline(always)]
    fn deref(&self) -> &Self::Target {
        self.0
    }
}

/// The increment of one word of `+=` (or of `-=` with `subtract`): a float's sign flips, an
/// integer wraps.
#[inline(always)]
pub(crate) fn increment(word: u32, float: bool, subtract: bool) -> u32 {
    match (float, subtract) {
        (true, true) => (-f32::from_bits(word)).to_bits(),
        (false, true) => word.wrapping_neg(),
        _ => word,
    }
}

/// `old + inc` of one word: f32 addition, or wrapping integer addition.
#[inline(always)]
pub(crate) fn sum_word(old: u32, inc: u32, float: bool) -> u32 {
    match float {
        true => (f32::from_bits(old) + f32::from_bits(inc)).to_bits(),
        false => old.wrapping_add(inc),
    }
}

/// Atomic `cell += inc` of one word (see [`sum_word`]); returns the word before.
#[inline(always)]
pub(crate) fn add_word(cell: &AtomicU32, inc: u32, float: bool) -> u32 {
    match float {
        true => match cell.fetch_update(Relaxed, Relaxed, |old| Some(sum_word(old, inc, true))) {
            Ok(old) | Err(old) => old,
        },
        false => cell.fetch_add(inc, Relaxed),
    }
}

/// Indices one call of a parallel loop's body takes at most. The generated body sets up the
/// fields' views and copies the kernel's scalars once per call and then runs its
/// invocations in a plain loop: once per index, that setup cost a 3D substep a twentieth of
/// its instructions.
pub const BATCH: usize = 64;

/// Indices gathered on the stack and handed on in slices of at most [`BATCH`].
struct Batcher<T> {
    buf: [T; BATCH],
    n: usize,
}

impl<T: Copy + Default> Batcher<T> {
    fn new() -> Self {
        Batcher {
            buf: [T::default(); BATCH],
            n: 0,
        }
    }

    /// Adds `t`, handing the batch to `body` once it is full.
    #[inline(always)]
    fn push(&mut self, t: T, body: &mut impl FnMut(&[T])) {
        self.buf[self.n] = t;
        self.n += 1;
        if self.n == BATCH {
            body(&self.buf);
            self.n = 0;
        }
    }

    /// Hands what is left to `body`.
    #[inline(always)]
    fn finish(self, body: &mut impl FnMut(&[T])) {
        if self.n > 0 {
            body(&self.buf[..self.n]);
        }
    }
}

/// Calls `body` with `items` in order, in slices of at most [`BATCH`] gathered on the stack.
#[inline(always)]
pub(crate) fn in_batches<T: Copy + Default>(
    items: impl Iterator<Item = T>,
    mut body: impl FnMut(&[T]),
) {
    let mut batch = Batcher::new();
    for t in items {
        batch.push(t, &mut body);
    }
    batch.finish(&mut body);
}

/// Integer types a top-level range loop can run over.
pub trait LoopInt: Copy + Default + Send + Sync {
    fn to_i64(self) -> i64;
    fn from_i64(v: i64) -> Self;
}
impl LoopInt for i32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v as i32
    }
}
impl LoopInt for u32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_i64(v: i64) -> Self {
        v as u32
    }
}

/// The host-side range of a top-level `for i in start..end` loop (`start..=end` when
/// `inclusive`; in i64, so that `0..=u32::MAX` does not wrap).
pub fn loop_range<T: LoopInt>(start: T, end: T, inclusive: bool) -> LoopRange {
    let (s, e) = (start.to_i64(), end.to_i64() + inclusive as i64);
    LoopRange {
        start: s,
        count: (e - s).max(0) as u64,
    }
}

/// Runs `body` for every `i` in `start..end` (`start..=end` when `inclusive`) in parallel,
/// in ascending slices of at most [`BATCH`] indices. Each worker calls `init` once for the
/// state its calls of `body` share (the fields' [`Local`] views).
pub fn par_for<T: LoopInt, S>(
    start: T,
    end: T,
    inclusive: bool,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[T]) + Sync + Send,
) {
    par_range(loop_range(start, end, inclusive), BATCH, init, body);
}

/// A top-level `for b in blocks(start..end)` without scattered fields: one block per call
/// and task (a block is a whole particle bin or tile, so they are not batched as `par_for`
/// batches).
pub fn par_blocks<T: LoopInt, S>(
    start: T,
    end: T,
    inclusive: bool,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[T]) + Sync + Send,
) {
    par_range(loop_range(start, end, inclusive), 1, init, body);
}

/// `body` for every index of `range`, `batch` indices per call.
pub(crate) fn par_range<T: LoopInt, S>(
    range: LoopRange,
    batch: usize,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[T]) + Sync + Send,
) {
    let batch = batch as u64;
    (0..range.count.div_ceil(batch) as usize)
        .into_par_iter()
        .for_each_init(init, |state, b| {
            let lo = b as u64 * batch;
            let ks = lo..(lo + batch).min(range.count);
            in_batches(ks.map(|k| T::from_i64(range.start + k as i64)), |ts| {
                body(state, ts)
            });
        });
}

/// Index types a top-level `for i in field.indices()` loop yields.
pub trait IndexSpace<const D: usize>: Copy + Default + Send + Sync {
    fn from_linear(lin: u64, shape: &[u32; D]) -> Self;
    /// The index after this one in linear order (the last axis fastest): a step with
    /// carries, where `from_linear` divides.
    fn next_in(self, shape: &[u32; D]) -> Self;
}
impl IndexSpace<0> for () {
    fn from_linear(_: u64, _: &[u32; 0]) -> Self {}
    fn next_in(self, _: &[u32; 0]) -> Self {}
}
impl IndexSpace<1> for u32 {
    fn from_linear(lin: u64, _: &[u32; 1]) -> Self {
        lin as u32
    }
    #[inline(always)]
    fn next_in(self, _: &[u32; 1]) -> Self {
        self.wrapping_add(1)
    }
}
impl IndexSpace<2> for IVec2 {
    fn from_linear(lin: u64, s: &[u32; 2]) -> Self {
        IVec2::new((lin / s[1] as u64) as i32, (lin % s[1] as u64) as i32)
    }
    #[inline(always)]
    fn next_in(self, s: &[u32; 2]) -> Self {
        match self.y + 1 == s[1] as i32 {
            true => IVec2::new(self.x + 1, 0),
            false => IVec2::new(self.x, self.y + 1),
        }
    }
}
impl IndexSpace<3> for IVec3 {
    fn from_linear(lin: u64, s: &[u32; 3]) -> Self {
        let yz = s[1] as u64 * s[2] as u64;
        IVec3::new(
            (lin / yz) as i32,
            ((lin % yz) / s[2] as u64) as i32,
            (lin % s[2] as u64) as i32,
        )
    }
    #[inline(always)]
    fn next_in(self, s: &[u32; 3]) -> Self {
        if self.z + 1 != s[2] as i32 {
            return IVec3::new(self.x, self.y, self.z + 1);
        }
        match self.y + 1 == s[1] as i32 {
            true => IVec3::new(self.x + 1, 0, 0),
            false => IVec3::new(self.x, self.y + 1, 0),
        }
    }
}

/// The index type of a `D`-dimensional field's `indices()`.
pub trait Dim<const D: usize> {
    type Index: IndexSpace<D>;
}
/// Marker carrying a dimension count.
pub struct Dims;
impl Dim<0> for Dims {
    type Index = ();
}
impl Dim<1> for Dims {
    type Index = u32;
}
impl Dim<2> for Dims {
    type Index = IVec2;
}
impl Dim<3> for Dims {
    type Index = IVec3;
}

/// Runs `body` for every index of `view`'s shape in parallel, in slices of at most
/// [`BATCH`] consecutive indices (in linear order, the last axis fastest). Only a slice's
/// first index is divided out of the linear one (integer division per cell cost a third of
/// a 3D grid loop); the others step.
pub fn par_indices<T: Elem, const D: usize, S>(
    view: &View<'_, T, D>,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[<Dims as Dim<D>>::Index]) + Sync + Send,
) where
    Dims: Dim<D>,
{
    let shape = view.shape;
    let count: u64 = shape.iter().map(|&s| s as u64).product();
    let batch = BATCH as u64;
    (0..count.div_ceil(batch) as usize)
        .into_par_iter()
        .for_each_init(init, |state, b| {
            let lo = b as u64 * batch;
            let n = ((lo + batch).min(count) - lo) as usize;
            let mut index = <<Dims as Dim<D>>::Index as IndexSpace<D>>::from_linear(lo, &shape);
            let mut buf = [<Dims as Dim<D>>::Index::default(); BATCH];
            for slot in &mut buf[..n] {
                *slot = index;
                index = index.next_in(&shape);
            }
            body(state, &buf[..n]);
        });
}

/// Index types built from coordinates (for `active()` loops).
pub trait FromCoords: Copy {
    fn from_coords(c: [u32; 3]) -> Self;
}
impl FromCoords for u32 {
    fn from_coords(c: [u32; 3]) -> Self {
        c[0]
    }
}
impl FromCoords for IVec2 {
    fn from_coords(c: [u32; 3]) -> Self {
        IVec2::new(c[0] as i32, c[1] as i32)
    }
}
impl FromCoords for IVec3 {
    fn from_coords(c: [u32; 3]) -> Self {
        IVec3::new(c[0] as i32, c[1] as i32, c[2] as i32)
    }
}

/// Runs `body` for every active index of `view` in parallel, in slices of at most [`BATCH`]:
/// every index of a dense field, the active cells of a sparse one.
pub fn par_active<T: Elem, const D: usize, S>(
    view: &View<'_, T, D>,
    init: impl Fn() -> S + Sync + Send,
    body: impl Fn(&S, &[<Dims as Dim<D>>::Index]) + Sync + Send,
) where
    Dims: Dim<D>,
    <Dims as Dim<D>>::Index: FromCoords,
{
    match &view.tree {
        None => par_indices(view, init, body),
        // Block by block (a leaf block's path is checked once, not once per element), large
        // blocks in pieces so that every worker gets some.
        Some(tree) => {
            let leaf = &tree.plan.levels[tree.plan.levels.len() - 1];
            let cells = leaf.level.cells();
            let piece = cells.min(PIECE);
            let pieces = cells.div_ceil(piece) as usize;
            (0..leaf.capacity as usize * pieces)
                .into_par_iter()
                .with_min_len((64 / piece as usize).max(1))
                .for_each_init(init, |state, k| {
                    let (block, p) = ((k / pieces) as u32, (k % pieces) as u32);
                    let range = p * piece..((p + 1) * piece).min(cells);
                    let mut batch = Batcher::new();
                    let mut run = |is: &[_]| body(state, is);
                    tree.for_each_active_in_block(block, range, |c, _| {
                        batch.push(<Dims as Dim<D>>::Index::from_coords(c), &mut run)
                    });
                    batch.finish(&mut run);
                })
        }
    }
}

/// Cells of a leaf block one worker takes at a time in an `active()` loop.
const PIECE: u32 = 1024;
