//! Sparse layouts against a reference model: random activation / write / add / read /
//! deactivate sequences give the same activity and values as a plain HashMap, for every kind
//! of tree, in 1, 2 and 3 dimensions.
//!
//! Activity is per *unit*: the cell of the deepest pointer or bitmasked level (all elements
//! below it are dense). Writing activates the unit; reading an inactive one gives zero;
//! `deactivate` clears the unit (its data too) when the launch ends.
//!
//! Every check runs on the CPU and on Vulkan (validation layer on), each against the model;
//! Vulkan is skipped, with the reason printed, only where no Vulkan device exists.

use std::collections::{HashMap, HashSet};

use mpm::core::layout::{Layout, LevelKind};
use mpm::core::Error;
use mpm::demos::blob::{Blob, GridKind};
use mpm::glam::{IVec2, IVec3, Vec2};
use mpm::{backend, kernel, BackendRef, Field, Tree};
use proptest::prelude::*;

mod backends;

use backends::{all as backends, no_validation_messages, spirv_valid, vulkan};

#[kernel]
fn write2(f: &mut Field<f32, 2>, idx: &Field<IVec2>, val: &Field<f32>) {
    for k in idx.indices() {
        f[idx[k]] = val[k];
    }
}

#[kernel]
fn add2(f: &mut Field<f32, 2>, idx: &Field<IVec2>, val: &Field<f32>) {
    for k in idx.indices() {
        f[idx[k]] += val[k];
    }
}

#[kernel]
fn activate2(f: &mut Field<f32, 2>, idx: &Field<IVec2>) {
    for k in idx.indices() {
        activate(f, idx[k]);
    }
}

#[kernel]
fn deactivate2(f: &mut Field<f32, 2>, idx: &Field<IVec2>) {
    for k in idx.indices() {
        deactivate(f, idx[k]);
    }
}

/// Reads through a stencil (a loop of its own), which the CPU takes from a dense snapshot of
/// a sparse field (`mpm_core::snapshot`): each cell's and its next two's along y (wrapping
/// round a 16-cell axis), weighted 4, 2, 1.
#[kernel]
fn stencil2(f: &Field<f32, 2>, sums: &mut Field<f32, 2>) {
    for c in sums.indices() {
        let mut s = 0.0;
        for k in 0..3 {
            s = s * 2.0 + f[ivec2(c.x, (c.y + k) % 16)];
        }
        sums[c] = s;
    }
}

/// Activity and values of every cell, and what an `active()` loop visits.
#[kernel]
fn probe2(
    f: &Field<f32, 2>,
    active: &mut Field<i32, 2>,
    value: &mut Field<f32, 2>,
    visits: &mut Field<i32, 2>,
) {
    for c in active.indices() {
        active[c] = select(is_active(f, c), 1, 0);
        value[c] = f[c];
        visits[c] = 0;
    }
    for c in f.active() {
        visits[c] += 1;
    }
}

#[kernel]
fn write1(f: &mut Field<f32>, idx: &Field<i32>, val: &Field<f32>) {
    for k in idx.indices() {
        f[idx[k]] = val[k];
    }
}

#[kernel]
fn deactivate1(f: &mut Field<f32>, idx: &Field<i32>) {
    for k in idx.indices() {
        deactivate(f, idx[k]);
    }
}

#[kernel]
fn probe1(f: &Field<f32>, active: &mut Field<i32>, visits: &mut Field<i32>) {
    for c in active.indices() {
        active[c] = select(is_active(f, c as i32), 1, 0);
        visits[c] = 0;
    }
    for c in f.active() {
        visits[c] += 1;
    }
}

#[kernel]
fn add3(f: &mut Field<f32, 3>, idx: &Field<IVec3>, val: &Field<f32>) {
    for k in idx.indices() {
        f[idx[k]] += val[k];
    }
}

#[kernel]
fn deactivate3(f: &mut Field<f32, 3>, idx: &Field<IVec3>) {
    for k in idx.indices() {
        deactivate(f, idx[k]);
    }
}

#[kernel]
fn probe3(f: &Field<f32, 3>, active: &mut Field<i32, 3>, visits: &mut Field<i32, 3>) {
    for c in active.indices() {
        active[c] = select(is_active(f, c), 1, 0);
        visits[c] = 0;
    }
    for c in f.active() {
        visits[c] += 1;
    }
}

#[kernel]
fn double_active2(src: &Field<f32, 2>, dst: &mut Field<f32, 2>) {
    for c in src.active() {
        dst[c] = src[c] * 2.0;
    }
}

/// The reference: active units and the values of written elements.
struct Model<const D: usize> {
    /// Elements per unit along each axis (None: all dense, always active).
    unit: Option<[u32; D]>,
    shape: [u32; D],
    active: HashSet<[u32; D]>,
    values: HashMap<[u32; D], f32>,
}

impl<const D: usize> Model<D> {
    fn new(layout: &Layout<D>) -> Self {
        let levels = layout.levels();
        let unit = levels
            .iter()
            .rposition(|l| l.kind != LevelKind::Dense)
            .map(|k| {
                let mut u = [1u32; D];
                for l in &levels[k + 1..] {
                    for (u, s) in u.iter_mut().zip(l.shape) {
                        *u *= s;
                    }
                }
                u
            });
        Model {
            unit,
            shape: layout.shape(),
            active: HashSet::new(),
            values: HashMap::new(),
        }
    }
    fn unit_of(&self, c: [u32; D]) -> [u32; D] {
        let u = self.unit.unwrap_or([u32::MAX; D]);
        std::array::from_fn(|a| c[a] / u[a])
    }
    fn is_active(&self, c: [u32; D]) -> bool {
        self.unit.is_none() || self.active.contains(&self.unit_of(c))
    }
    fn write(&mut self, c: [u32; D], v: f32) {
        self.active.insert(self.unit_of(c));
        self.values.insert(c, v);
    }
    fn add(&mut self, c: [u32; D], v: f32) {
        self.active.insert(self.unit_of(c));
        *self.values.entry(c).or_insert(0.0) += v;
    }
    fn activate(&mut self, c: [u32; D]) {
        self.active.insert(self.unit_of(c));
    }
    fn deactivate(&mut self, c: [u32; D]) {
        if self.unit.is_none() {
            return;
        }
        let u = self.unit_of(c);
        self.active.remove(&u);
        let unit_of = |c: &[u32; D]| self.unit_of(*c);
        let keep: HashMap<[u32; D], f32> = self
            .values
            .iter()
            .filter(|(k, _)| unit_of(k) != u)
            .map(|(k, v)| (*k, *v))
            .collect();
        self.values = keep;
    }
    fn clear(&mut self) {
        self.active.clear();
        self.values.clear();
    }
    fn value(&self, c: [u32; D]) -> f32 {
        if self.is_active(c) {
            self.values.get(&c).copied().unwrap_or(0.0)
        } else {
            0.0
        }
    }
    /// Every coordinate, last axis fastest.
    fn coords(&self) -> Vec<[u32; D]> {
        let n: u32 = self.shape.iter().product();
        (0..n)
            .map(|mut lin| {
                let mut c = [0u32; D];
                for a in (0..D).rev() {
                    c[a] = lin % self.shape[a];
                    lin /= self.shape[a];
                }
                c
            })
            .collect()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Write(Vec<(u32, u32, f32)>),
    Add(Vec<(u32, u32, f32)>),
    Activate(Vec<(u32, u32)>),
    Deactivate(Vec<(u32, u32)>),
    DeactivateAll,
}

fn op(n: u32) -> impl Strategy<Value = Op> {
    let cell = (0..n, 0..n);
    prop_oneof![
        3 => prop::collection::vec((0..n, 0..n, -8i32..8), 1..12)
            .prop_map(|v| Op::Write(v.into_iter().map(|(x, y, a)| (x, y, a as f32 * 0.5)).collect())),
        3 => prop::collection::vec((0..n, 0..n, -8i32..8), 1..40)
            .prop_map(|v| Op::Add(v.into_iter().map(|(x, y, a)| (x, y, a as f32 * 0.25)).collect())),
        1 => prop::collection::vec(cell.clone(), 1..6).prop_map(Op::Activate),
        2 => prop::collection::vec(cell, 1..6).prop_map(Op::Deactivate),
        1 => Just(Op::DeactivateAll),
    ]
}

fn layouts_2d() -> Vec<Layout<2>> {
    vec![
        Layout::root().dense([16, 16]),
        Layout::root().bitmasked([16, 16]),
        Layout::root().pointer([4, 4]).dense([4, 4]),
        Layout::root()
            .pointer([4, 4])
            .bitmasked([2, 2])
            .dense([2, 2]),
        Layout::root().pointer([2, 2]).pointer([2, 2]).dense([4, 4]),
        Layout::root()
            .dense([2, 2])
            .pointer([2, 4])
            .bitmasked([4, 2]),
    ]
}

/// Pools start at one block, so they grow (moving every value) as the operations go on.
fn check_2d(be: &BackendRef, layout: &Layout<2>, ops: &[Op]) -> Result<(), Error> {
    let tree = Tree::new(be, layout.clone().reserve(1))?;
    let mut f = Field::<f32, 2>::place(&tree)?;
    let shape = tree.shape();
    let mut model = Model::<2>::new(layout);
    let mut active = Field::<i32, 2>::new(be, shape)?;
    let mut value = Field::<f32, 2>::new(be, shape)?;
    let mut visits = Field::<i32, 2>::new(be, shape)?;
    let mut sums = Field::<f32, 2>::new(be, shape)?;
    for op in ops {
        // Growth keeps every pool at most half full after each launch, so a pool of 2 T b
        // blocks has T b free: enough for the b blocks one operation can activate and for
        // the blocks that contenders lost the race for a slot with (at most T - 1 per slot
        // with T workers, given back only after the launch).
        let cells = match op {
            Op::Write(l) | Op::Add(l) => l.len(),
            Op::Activate(l) => l.len(),
            _ => 0,
        };
        let workers = rayon::current_num_threads().max(2);
        tree.reserve((2 * workers * cells) as u32)?;
        match op {
            Op::Write(list) => {
                // Distinct cells: several writes of one cell in a launch race.
                let mut seen = HashSet::new();
                let list: Vec<_> = list
                    .iter()
                    .filter(|(x, y, _)| seen.insert((*x, *y)))
                    .collect();
                let idx: Vec<IVec2> = list
                    .iter()
                    .map(|(x, y, _)| IVec2::new(*x as i32, *y as i32))
                    .collect();
                let val: Vec<f32> = list.iter().map(|t| t.2).collect();
                write2(
                    &mut f,
                    &Field::from_slice(be, [idx.len() as u32], &idx)?,
                    &Field::from_slice(be, [val.len() as u32], &val)?,
                )?;
                list.iter().for_each(|(x, y, v)| model.write([*x, *y], *v));
            }
            Op::Add(list) => {
                let idx: Vec<IVec2> = list
                    .iter()
                    .map(|(x, y, _)| IVec2::new(*x as i32, *y as i32))
                    .collect();
                let val: Vec<f32> = list.iter().map(|t| t.2).collect();
                add2(
                    &mut f,
                    &Field::from_slice(be, [idx.len() as u32], &idx)?,
                    &Field::from_slice(be, [val.len() as u32], &val)?,
                )?;
                list.iter().for_each(|(x, y, v)| model.add([*x, *y], *v));
            }
            Op::Activate(list) => {
                let idx: Vec<IVec2> = list
                    .iter()
                    .map(|(x, y)| IVec2::new(*x as i32, *y as i32))
                    .collect();
                activate2(&mut f, &Field::from_slice(be, [idx.len() as u32], &idx)?)?;
                list.iter().for_each(|(x, y)| model.activate([*x, *y]));
            }
            Op::Deactivate(list) => {
                let idx: Vec<IVec2> = list
                    .iter()
                    .map(|(x, y)| IVec2::new(*x as i32, *y as i32))
                    .collect();
                deactivate2(&mut f, &Field::from_slice(be, [idx.len() as u32], &idx)?)?;
                list.iter().for_each(|(x, y)| model.deactivate([*x, *y]));
            }
            Op::DeactivateAll => {
                tree.deactivate_all()?;
                model.clear();
            }
        }
        probe2(&f, &mut active, &mut value, &mut visits)?;
        stencil2(&f, &mut sums)?;
        let (a, v, n, dense, sums) = (
            active.download()?,
            value.download()?,
            visits.download()?,
            f.download()?,
            sums.download()?,
        );
        for (k, c) in model.coords().into_iter().enumerate() {
            let want_sum = (0..3).fold(0.0f32, |s, d| {
                s * 2.0 + model.value([c[0], (c[1] + d) % shape[1]])
            });
            assert_eq!(
                sums[k], want_sum,
                "{layout:?}: stencil sum at {c:?} after {op:?}"
            );
            let want_active = model.is_active(c) as i32;
            assert_eq!(
                a[k], want_active,
                "{layout:?}: activity of {c:?} after {op:?}"
            );
            assert_eq!(
                n[k], want_active,
                "{layout:?}: active() visits of {c:?} after {op:?}"
            );
            // Values are sums of quarters and halves: exact in f32.
            assert_eq!(
                v[k],
                model.value(c),
                "{layout:?}: value of {c:?} after {op:?}"
            );
            assert_eq!(
                dense[k],
                model.value(c),
                "{layout:?}: downloaded value of {c:?} after {op:?}"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sparse_2d_matches_hashmap_model(ops in prop::collection::vec(op(16), 1..10)) {
        for be in backends() {
            for layout in layouts_2d() {
                check_2d(&be, &layout, &ops)
                    .unwrap_or_else(|e| panic!("{}: kernels run: {e}", be.describe()));
            }
        }
        no_validation_messages();
    }
}

per_backend! {
    sparse_1d_and_3d_match_the_model => check_1d_and_3d,
    full_pool_is_a_clear_error_then_grows_and_blocks_are_reused => check_full_pool,
    a_pool_with_a_block_per_slot_fills_under_contention => check_contended_full_pool,
    pools_grow_before_they_run_out_and_keep_every_field => check_growth_of_every_kind,
    sparse_fields_use_memory_where_cells_are_active => check_memory,
    two_trees_in_one_launch_and_fields_outside_the_kernel => check_two_trees,
    frozen_trees_write_only_where_cells_are_active => check_frozen,
    the_blob_activates_exactly_the_units_its_stencils_reach => check_blob_activation,
}

fn check_1d_and_3d(be: &BackendRef) {
    let be = be.clone();
    // 1-D: pointer -> bitmasked; write, then deactivate one unit.
    let layout = Layout::<1>::root().pointer([8]).bitmasked([4]).dense([2]);
    let tree = Tree::new(&be, layout.clone()).unwrap();
    let mut f = Field::<f32>::place(&tree).unwrap();
    let mut model = Model::<1>::new(&layout);
    let idx = [1, 9, 10, 33, 63];
    write1(
        &mut f,
        &Field::from_slice(&be, [5], &idx).unwrap(),
        &Field::from_slice(&be, [5], &[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap(),
    )
    .unwrap();
    for (i, v) in idx.iter().zip([1.0, 2.0, 3.0, 4.0, 5.0]) {
        model.write([*i as u32], v);
    }
    deactivate1(&mut f, &Field::from_slice(&be, [1], &[9]).unwrap()).unwrap();
    model.deactivate([9]);
    let mut active = Field::<i32>::new(&be, [64]).unwrap();
    let mut visits = Field::<i32>::new(&be, [64]).unwrap();
    probe1(&f, &mut active, &mut visits).unwrap();
    let (a, n, v) = (
        active.download().unwrap(),
        visits.download().unwrap(),
        f.download().unwrap(),
    );
    for c in 0..64u32 {
        assert_eq!(
            a[c as usize],
            model.is_active([c]) as i32,
            "1-D activity of {c}"
        );
        assert_eq!(
            n[c as usize],
            model.is_active([c]) as i32,
            "1-D visits of {c}"
        );
        assert_eq!(v[c as usize], model.value([c]), "1-D value of {c}");
    }

    // 3-D: pointer -> pointer -> dense, contended adds.
    let layout = Layout::<3>::root()
        .pointer([2, 2, 2])
        .pointer([2, 2, 2])
        .dense([2, 2, 2]);
    let tree = Tree::new(&be, layout.clone()).unwrap();
    let mut f = Field::<f32, 3>::place(&tree).unwrap();
    let mut model = Model::<3>::new(&layout);
    let cells: Vec<IVec3> = (0..600)
        .map(|k| IVec3::new(k % 3, (k / 3) % 5, (k * 7) % 8))
        .collect();
    add3(
        &mut f,
        &Field::from_slice(&be, [600], &cells).unwrap(),
        &Field::from_slice(&be, [600], &vec![0.5; 600]).unwrap(),
    )
    .unwrap();
    for c in &cells {
        model.add([c.x as u32, c.y as u32, c.z as u32], 0.5);
    }
    deactivate3(
        &mut f,
        &Field::from_slice(&be, [1], &[IVec3::new(0, 0, 0)]).unwrap(),
    )
    .unwrap();
    model.deactivate([0, 0, 0]);
    let mut active = Field::<i32, 3>::new(&be, [8, 8, 8]).unwrap();
    let mut visits = Field::<i32, 3>::new(&be, [8, 8, 8]).unwrap();
    probe3(&f, &mut active, &mut visits).unwrap();
    let (a, n, v) = (
        active.download().unwrap(),
        visits.download().unwrap(),
        f.download().unwrap(),
    );
    for (k, c) in model.coords().into_iter().enumerate() {
        assert_eq!(a[k], model.is_active(c) as i32, "3-D activity of {c:?}");
        assert_eq!(n[k], model.is_active(c) as i32, "3-D visits of {c:?}");
        assert_eq!(v[k], model.value(c), "3-D value of {c:?}");
    }
}

/// A field of 2D cell indices, for the kernels above that take one.
fn cell_field(be: &BackendRef, cells: &[(i32, i32)]) -> Field<IVec2> {
    let v: Vec<IVec2> = cells.iter().map(|&(x, y)| IVec2::new(x, y)).collect();
    Field::from_slice(be, [v.len() as u32], &v).unwrap()
}

fn check_full_pool(be: &BackendRef) {
    let be = be.clone();
    // Room for two 4x4 blocks below the pointer level.
    let tree = Tree::new(
        &be,
        Layout::<2>::root().pointer([4, 4]).dense([4, 4]).reserve(2),
    )
    .unwrap();
    let mut f = Field::<f32, 2>::place(&tree).unwrap();
    let cells = |v: &[(i32, i32)]| cell_field(&be, v);
    let ones = |n: usize| Field::from_slice(&be, [n as u32], &vec![1.0f32; n]).unwrap();
    let three = cells(&[(0, 0), (5, 5), (9, 9)]);
    let err = write2(&mut f, &three, &ones(3)).expect_err("three blocks do not fit in two");
    assert!(
        matches!(
            err,
            Error::PoolExhausted {
                capacity: 2,
                level: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("repeat"), "{err}");
    // The pool grew after the failed launch, so the same launch now fits.
    assert_eq!(tree.pool_capacities(), [4, 0]);
    write2(&mut f, &three, &ones(3)).unwrap();
    // Three of four blocks in use: more than half, so the pool doubled again.
    assert_eq!(tree.pool_capacities(), [8, 0]);
    let values = f.download().unwrap();
    for c in [(0, 0), (5, 5), (9, 9)] {
        assert_eq!(values[(c.0 * 16 + c.1) as usize], 1.0, "{c:?}");
    }
    // Freed blocks come back: many rounds of activate / deactivate stay within the pool,
    // which (half full at most) does not grow.
    tree.deactivate_all().unwrap();
    for round in 0..50 {
        let (x, y) = ((round * 4) % 16, (round * 8) % 16);
        write2(&mut f, &cells(&[(x, y), ((x + 4) % 16, y)]), &ones(2)).unwrap();
        deactivate2(&mut f, &cells(&[(x, y), ((x + 4) % 16, y)])).unwrap();
    }
    assert_eq!(tree.pool_capacities(), [8, 0]);
    let m = tree.memory().unwrap();
    assert!(m.in_use <= m.reserved, "{m:?}");
}

/// Every invocation activating at once, each block wanted by many of them, in a pool with
/// exactly one block per slot: no contender may hold a block it does not install, or the
/// last slot finds the pool empty. (When each contender took a block before racing for the
/// slot, this failed within 30 rounds on two CPU threads.)
fn check_contended_full_pool(be: &BackendRef) {
    let tree = Tree::new(
        be,
        Layout::<2>::root()
            .pointer([4, 4])
            .dense([4, 4])
            .reserve(16),
    )
    .unwrap();
    assert_eq!(tree.pool_capacities(), [16, 0]);
    let mut f = Field::<f32, 2>::place(&tree).unwrap();
    // Every cell eight times, interleaved so that each thread's share covers every block.
    let cells: Vec<(i32, i32)> = (0..2048).map(|k| ((k / 16) % 16, k % 16)).collect();
    let idx = cell_field(be, &cells);
    let ones = Field::from_slice(be, [2048], &[1.0f32; 2048]).unwrap();
    for round in 0..100 {
        tree.deactivate_all().unwrap();
        add2(&mut f, &idx, &ones).unwrap_or_else(|e| panic!("round {round}: {e}"));
        let values = f.download().unwrap();
        assert!(
            values.iter().all(|&v| v == 8.0),
            "round {round}: every cell takes eight adds"
        );
    }
    assert_eq!(tree.pool_capacities(), [16, 0]);
}

/// A frozen tree takes writes into its active cells and refuses, naming the field, writes
/// and activations elsewhere, leaving them undone; thawed, writes activate again. Pointer
/// and bitmasked levels alike (in a bitmasked leaf, a cell can be inactive inside an active
/// block).
fn check_frozen(be: &BackendRef) {
    let layouts = [
        Layout::<2>::root().pointer([4, 4]).dense([4, 4]),
        Layout::<2>::root().pointer([4, 4]).bitmasked([4, 4]),
    ];
    for layout in layouts {
        let what = format!("{layout:?}");
        let tree = Tree::new(be, layout).unwrap();
        let mut f = Field::<f32, 2>::place(&tree).unwrap();
        let cells = |v: &[(i32, i32)]| cell_field(be, v);
        let values = |v: &[f32]| Field::from_slice(be, [v.len() as u32], v).unwrap();
        write2(&mut f, &cells(&[(0, 0), (5, 6)]), &values(&[1.0, 2.0])).unwrap();
        tree.freeze();
        assert!(tree.is_frozen());
        add2(&mut f, &cells(&[(0, 0), (5, 6)]), &values(&[0.5, 0.25])).unwrap();
        // (5, 7): inactive in the bitmasked leaf, in an active dense block.
        let outside = if what.contains("Bitmasked") {
            (5, 7)
        } else {
            (9, 9)
        };
        let err = add2(&mut f, &cells(&[(0, 0), outside]), &values(&[1.0, 3.0]))
            .expect_err("a write into an inactive cell of a frozen tree");
        assert!(
            matches!(&err, Error::InactiveWrite { field, .. } if field == "f"),
            "{what}: {err}"
        );
        assert!(err.to_string().contains("Tree::freeze"), "{err}");
        let err = activate2(&mut f, &cells(&[(12, 12)])).expect_err("activation while frozen");
        assert!(matches!(err, Error::InactiveWrite { .. }), "{what}: {err}");
        let got = f.download().unwrap();
        let at = |c: (i32, i32)| got[(c.0 * 16 + c.1) as usize];
        assert_eq!(at((0, 0)), 2.5, "{what}: the active cell took both adds");
        assert_eq!(at((5, 6)), 2.25, "{what}");
        assert_eq!(at(outside), 0.0, "{what}: the refused write was not done");
        assert_eq!(at((12, 12)), 0.0, "{what}");
        tree.thaw();
        add2(&mut f, &cells(&[outside]), &values(&[3.0])).unwrap();
        assert_eq!(
            f.download().unwrap()[(outside.0 * 16 + outside.1) as usize],
            3.0,
            "{what}"
        );
    }
}

/// The layout demo's P2G (on a GPU: marks per unit, one activation per marked unit, then
/// the P2G on the frozen tree) activates exactly the cells of the `unit`-wide units its
/// particles' 3x3 stencils reach, keeps no unit from the substep before (the blob moved 20
/// cells between the two), and scatters the mass the dense grid takes.
fn check_blob_activation(be: &BackendRef) {
    let n_grid = 64;
    let reached = |x: &[Vec2], unit: i32| {
        let mut cells = HashSet::new();
        for p in x {
            let base = (*p * n_grid as f32 - 0.5).floor().as_ivec2();
            for (i, j) in (0..3).flat_map(|i| (0..3).map(move |j| (i, j))) {
                let corner = (base + IVec2::new(i, j)) / unit * unit;
                for (a, b) in (0..unit).flat_map(|a| (0..unit).map(move |b| (a, b))) {
                    cells.insert((corner.x + a, corner.y + b));
                }
            }
        }
        cells
    };
    let mass = |blob: &Blob| blob.grid_m.download().unwrap().iter().sum::<f32>();
    let mut dense = Blob::new(be, n_grid, 0.1, GridKind::Dense).unwrap();
    dense.clear().unwrap();
    dense.p2g().unwrap();
    let dense_mass = mass(&dense);
    let side = n_grid as i32;
    let mut active = Field::<i32, 2>::new(be, [n_grid, n_grid]).unwrap();
    let mut visits = Field::<i32, 2>::new(be, [n_grid, n_grid]).unwrap();
    let mut value = Field::<f32, 2>::new(be, [n_grid, n_grid]).unwrap();
    for (kind, unit) in [
        (GridKind::PointerDense, 8),
        (GridKind::PointerBitmaskedDense, 4),
    ] {
        let mut blob = Blob::new(be, n_grid, 0.1, kind).unwrap();
        let start = blob.x.download().unwrap();
        let moved: Vec<Vec2> = start
            .iter()
            .map(|p| *p + Vec2::new(20.0, 9.0) / n_grid as f32)
            .collect();
        for x in [&start, &moved] {
            blob.x.upload(x).unwrap();
            blob.clear().unwrap();
            blob.p2g()
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            probe2(&blob.grid_m, &mut active, &mut value, &mut visits).unwrap();
            let got: HashSet<(i32, i32)> = (0..side * side)
                .zip(active.download().unwrap())
                .filter(|&(_, a)| a == 1)
                .map(|(k, _)| (k / side, k % side))
                .collect();
            assert_eq!(got, reached(x, unit), "{}: active cells", kind.name());
            let m = mass(&blob);
            assert!(
                (m - dense_mass).abs() <= 1e-5 * dense_mass,
                "{}: mass {m} against {dense_mass}",
                kind.name()
            );
        }
    }
}

fn check_growth_of_every_kind(be: &BackendRef) {
    {
        for layout in [
            Layout::<2>::root().pointer([16, 16]).dense([4, 4]),
            Layout::<2>::root()
                .pointer([8, 8])
                .bitmasked([2, 2])
                .dense([4, 4]),
            Layout::<2>::root()
                .pointer([4, 4])
                .pointer([4, 4])
                .dense([4, 4]),
            // The pool below a dense level: its counters are not the tree's first.
            Layout::<2>::root()
                .dense([2, 2])
                .pointer([8, 8])
                .dense([4, 4]),
        ] {
            check_growth(be, layout.reserve(2));
        }
    }
}

/// Writes one new 4x4 block per launch, into two fields, starting from pools of two blocks:
/// the pools double whenever a launch leaves them more than half full, so no launch fails,
/// and both fields keep every value across the moves.
fn check_growth(be: &BackendRef, layout: Layout<2>) {
    let tree = Tree::new(be, layout.clone()).unwrap();
    let mut f = Field::<f32, 2>::place(&tree).unwrap();
    let mut g = Field::<f32, 2>::place(&tree).unwrap();
    let mut model = HashMap::new();
    for step in 0..40i32 {
        let cell = IVec2::new((step % 16) * 4, (step / 16) * 4 + step % 3);
        let idx = Field::from_slice(be, [1], &[cell]).unwrap();
        let val = Field::from_slice(be, [1], &[step as f32 + 1.0]).unwrap();
        write2(&mut f, &idx, &val).unwrap_or_else(|e| panic!("{layout:?} step {step}: {e}"));
        add2(&mut g, &idx, &val).unwrap();
        model.insert((cell.x, cell.y), step as f32 + 1.0);
    }
    let grown = tree.pool_capacities();
    assert!(
        grown.iter().any(|&c| c > 2),
        "{layout:?}: no pool grew: {grown:?}"
    );
    assert!(
        grown.iter().all(|&c| c <= 128),
        "{layout:?}: pools grew too far: {grown:?}"
    );
    let (fv, gv) = (f.download().unwrap(), g.download().unwrap());
    for x in 0..64 {
        for y in 0..64 {
            let want = model.get(&(x, y)).copied().unwrap_or(0.0);
            let i = (x * 64 + y) as usize;
            assert_eq!((fv[i], gv[i]), (want, want), "{layout:?} at {x},{y}");
        }
    }
    let m = tree.memory().unwrap();
    assert!(m.in_use <= m.reserved, "{m:?}");
}

fn check_memory(be: &BackendRef) {
    let be = be.clone();
    // 2048^3 virtual cells; a dense grid of mass and velocity would take 2048^3 * 16 bytes.
    let layout = Layout::<3>::root()
        .pointer([64, 64, 64])
        .pointer([8, 8, 8])
        .dense([4, 4, 4])
        .reserve(4096);
    let tree = Tree::new(&be, layout).unwrap();
    assert_eq!(tree.shape(), [2048, 2048, 2048]);
    let mut mass = Field::<f32, 3>::place(&tree).unwrap();
    let _velocity = Field::<mpm::glam::Vec3, 3>::place(&tree).unwrap();
    // A 40^3 blob of cells.
    let cells: Vec<IVec3> = (0..40 * 40 * 40)
        .map(|k| IVec3::new(1000 + k % 40, 1000 + (k / 40) % 40, 1000 + k / 1600))
        .collect();
    let n = cells.len() as u32;
    add3(
        &mut mass,
        &Field::from_slice(&be, [n], &cells).unwrap(),
        &Field::from_slice(&be, [n], &vec![1.0; n as usize]).unwrap(),
    )
    .unwrap();
    let m = tree.memory().unwrap();
    let dense = 2048u64.pow(3) * 16;
    println!(
        "sparse tree: {} MB reserved, {} MB in use; dense: {} GB",
        m.reserved >> 20,
        m.in_use >> 20,
        dense >> 30
    );
    assert!(m.reserved < 100 << 20, "{m:?}");
    // 10^3 to 11^3 blocks of 4^3 cells cover the blob, 16 bytes a cell, plus the pointer
    // tables in use (the top one, 1 MiB, and one 2 KiB table per used middle block).
    assert!(m.in_use >= 40 * 40 * 40 * 16 && m.in_use < 3 << 20, "{m:?}");
}

/// mpm99 on sparse grids gives bitwise the particles of the dense grid on the CPU. One thread,
/// so that float atomics add in the same order for every layout.
#[test]
fn mpm99_on_sparse_grids_is_bitwise_the_dense_result() {
    use mpm::demos::mpm99::{GridLayout, Mpm99};
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a thread pool");
    let run = |layout| {
        pool.install(|| {
            let be = backend::cpu();
            let mut sim = Mpm99::with_grid(&be, 3, layout).expect("scene");
            for _ in 0..60 {
                sim.substep().expect("substep");
            }
            (
                sim.x.download().expect("x"),
                sim.v.download().expect("v"),
                sim.grid.tree.as_ref().map(|t| t.memory().expect("memory")),
            )
        })
    };
    let (x_dense, v_dense, _) = run(GridLayout::Dense);
    for layout in [GridLayout::PointerDense, GridLayout::PointerBitmasked] {
        let (x, v, memory) = run(layout);
        let same = x
            .iter()
            .zip(&x_dense)
            .all(|(a, b)| a.x.to_bits() == b.x.to_bits() && a.y.to_bits() == b.y.to_bits())
            && v.iter()
                .zip(&v_dense)
                .all(|(a, b)| a.x.to_bits() == b.x.to_bits() && a.y.to_bits() == b.y.to_bits());
        assert!(same, "{layout:?} differs from the dense grid");
        let m = memory.expect("a sparse grid has a tree");
        println!("{layout:?}: grid memory {m:?}");
        assert!(m.in_use < m.reserved, "{layout:?}: {m:?}");
    }
}

/// mpm99 on the pointer -> bitmasked grid: the CPU and Vulkan agree within the tolerance of
/// `tests/mpm99.rs` (float atomics add in a different order on each backend). Also prints the
/// time of a Vulkan substep on the sparse and the dense grid.
#[test]
fn mpm99_sparse_grid_cpu_and_vulkan_agree() {
    use mpm::demos::mpm99::{GridLayout, Mpm99};
    const SUBSTEPS: usize = 200;
    let Some(vk) = vulkan() else { return };
    let run = |be: &BackendRef, layout| {
        let mut sim = Mpm99::with_grid(be, 7, layout).expect("scene");
        // Warm up (shader compilation), then time.
        sim.substep().expect("substep");
        be.reset_profile();
        let t0 = std::time::Instant::now();
        for _ in 1..SUBSTEPS {
            sim.substep().expect("substep");
        }
        let per_step = t0.elapsed() / (SUBSTEPS as u32 - 1);
        let kernels: std::time::Duration = be.profile().iter().map(|p| p.total).sum();
        for p in be.profile() {
            println!("  loop {} {:?}", p.loop_index, p.total / p.calls as u32);
        }
        println!(
            "{} {layout:?}: {per_step:?} a substep, of which {:?} in the kernel's loops",
            be.describe(),
            kernels / (SUBSTEPS as u32 - 1)
        );
        (sim.x.download().expect("x"), per_step)
    };
    let (on_cpu, cpu_time) = run(&backend::cpu(), GridLayout::PointerBitmasked);
    let (on_gpu, vk_time) = run(&vk, GridLayout::PointerBitmasked);
    let (_, vk_dense_time) = run(&vk, GridLayout::Dense);
    println!(
        "mpm99 substep: cpu sparse {cpu_time:?}, {} sparse {vk_time:?}, dense {vk_dense_time:?}",
        vk.describe()
    );
    let diffs: Vec<f32> = on_cpu
        .iter()
        .zip(&on_gpu)
        .map(|(a, b)| (*a - *b).length())
        .collect();
    let max = diffs.iter().cloned().fold(0.0, f32::max);
    let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
    println!("pointer-bitmasked grid, cpu vs vulkan after {SUBSTEPS} substeps: max {max:e}, mean {mean:e}");
    assert!(max < 1e-4, "max position difference {max}");
    assert!(mean < 1e-5, "mean position difference {mean}");
    no_validation_messages();
}

/// One fixed sequence of every operation on every 2-D layout, on Vulkan, then `spirv-val` on
/// every shader compiled (the generated walks of each kind of tree, the maintenance passes).
#[test]
fn sparse_2d_shaders_are_valid_spirv() {
    let Some(vk) = vulkan() else { return };
    let ops = [
        Op::Write(vec![(1, 2, 0.5), (9, 9, 1.0), (15, 0, -2.0)]),
        Op::Add(vec![(1, 2, 0.25), (4, 4, 0.75), (4, 4, 0.25)]),
        Op::Activate(vec![(12, 3)]),
        Op::Deactivate(vec![(9, 9), (0, 0)]),
        Op::DeactivateAll,
        Op::Add(vec![(3, 3, 1.0)]),
    ];
    for layout in layouts_2d() {
        check_2d(&vk, &layout, &ops).expect("kernels run");
    }
    no_validation_messages();
    spirv_valid();
}

/// Two trees with the same layout in one launch, and deactivation clearing a field of the tree
/// that the kernel was not given.
fn check_two_trees(be: &BackendRef) {
    let be = be.clone();
    {
        let layout = Layout::<2>::root()
            .pointer([4, 4])
            .bitmasked([2, 2])
            .dense([2, 2]);
        let (ta, tb) = (
            Tree::new(&be, layout.clone()).unwrap(),
            Tree::new(&be, layout.clone()).unwrap(),
        );
        let mut src = Field::<f32, 2>::place(&ta).unwrap();
        let mut dst = Field::<f32, 2>::place(&tb).unwrap();
        let mut other = Field::<f32, 2>::place(&tb).unwrap();
        let cells = |v: &[(i32, i32)]| {
            let idx: Vec<IVec2> = v.iter().map(|(x, y)| IVec2::new(*x, *y)).collect();
            Field::from_slice(&be, [idx.len() as u32], &idx).unwrap()
        };
        let vals = |v: &[f32]| Field::from_slice(&be, [v.len() as u32], v).unwrap();
        write2(
            &mut src,
            &cells(&[(0, 0), (5, 9), (15, 15)]),
            &vals(&[1.0, 2.0, 3.0]),
        )
        .unwrap();
        write2(
            &mut other,
            &cells(&[(5, 9), (5, 8), (12, 0)]),
            &vals(&[4.0, 5.0, 6.0]),
        )
        .unwrap();
        double_active2(&src, &mut dst).unwrap();
        let d = dst.download().unwrap();
        let at = |x: usize, y: usize| x * 16 + y;
        assert_eq!(d[at(0, 0)], 2.0, "{}", be.describe());
        assert_eq!(d[at(5, 9)], 4.0, "{}", be.describe());
        assert_eq!(d[at(15, 15)], 6.0, "{}", be.describe());
        assert_eq!(d.iter().filter(|v| **v != 0.0).count(), 3);
        // Deactivating (5, 9) through `dst` clears its unit (2x2 cells) in `other` too.
        deactivate2(&mut dst, &cells(&[(5, 9)])).unwrap();
        let o = other.download().unwrap();
        assert_eq!(o[at(5, 9)], 0.0, "{}", be.describe());
        assert_eq!(o[at(5, 8)], 0.0, "{}", be.describe());
        assert_eq!(o[at(12, 0)], 6.0, "{}", be.describe());
        // The unit is zero when written again (its old data was cleared, not just hidden).
        write2(&mut dst, &cells(&[(4, 8)]), &vals(&[1.0])).unwrap();
        let o = other.download().unwrap();
        assert_eq!(o[at(5, 8)], 0.0, "{}", be.describe());
        assert_eq!(o[at(5, 9)], 0.0, "{}", be.describe());
    }
}

/// `deactivate_all` clears only the blocks handed out since the tree was last emptied: after
/// the pools grew and blocks were freed and reused, nothing written before resurfaces when
/// the same blocks are handed out again (in another order), on layouts with pools at several
/// depths.
#[test]
fn deactivate_all_clears_every_block_handed_out() {
    for be in backends() {
        let cells = |v: &[(i32, i32)]| cell_field(&be, v);
        let values = |v: f32, n: usize| Field::from_slice(&be, [n as u32], &vec![v; n]).unwrap();
        for layout in [
            Layout::<2>::root().pointer([4, 4]).dense([4, 4]),
            Layout::<2>::root()
                .pointer([2, 2])
                .pointer([2, 2])
                .dense([4, 4]),
            Layout::<2>::root()
                .dense([2, 2])
                .pointer([2, 2])
                .bitmasked([4, 4]),
        ] {
            let tree = Tree::new(&be, layout.reserve(1)).unwrap();
            let mut f = Field::<f32, 2>::place(&tree).unwrap();
            for round in 1..=3 {
                // Fill the grid block by block (the pools grow on the way), free two blocks
                // and take one back, then empty the tree.
                for bx in 0..4 {
                    for by in 0..4 {
                        let block: Vec<(i32, i32)> =
                            (0..16).map(|k| (4 * bx + k / 4, 4 * by + k % 4)).collect();
                        write2(&mut f, &cells(&block), &values(round as f32, 16)).unwrap();
                    }
                }
                deactivate2(&mut f, &cells(&[(0, 0), (15, 15)])).unwrap();
                write2(&mut f, &cells(&[(15, 15)]), &values(1.0, 1)).unwrap();
                tree.deactivate_all().unwrap();
                // One cell per block, blocks taken in reverse order: every other cell of
                // every block must read zero.
                let corners: Vec<(i32, i32)> = (0..16)
                    .rev()
                    .map(|b| (4 * (b / 4) + 3, 4 * (b % 4) + 3))
                    .collect();
                add2(&mut f, &cells(&corners), &values(0.0, 16)).unwrap();
                let grid = f.download().unwrap();
                assert!(
                    grid.iter().all(|&v| v == 0.0),
                    "round {round} on {}: {grid:?}",
                    be.describe()
                );
            }
        }
    }
    no_validation_messages();
}

/// An `active()` loop over leaf blocks of thousands of cells (split among workers on the
/// CPU) visits every active cell once and no other.
#[test]
fn active_loops_over_large_leaf_blocks_visit_each_active_cell_once() {
    for be in backends() {
        for layout in [
            Layout::<2>::root().bitmasked([64, 96]),
            Layout::<2>::root().pointer([2, 1]).bitmasked([32, 96]),
        ] {
            let tree = Tree::new(&be, layout).unwrap();
            let mut f = Field::<f32, 2>::place(&tree).unwrap();
            let picked: Vec<IVec2> = (0..64 * 96)
                .filter(|k| k % 7 == 0 || k % 11 == 3)
                .map(|k| IVec2::new(k / 96, k % 96))
                .collect();
            let n = picked.len() as u32;
            activate2(&mut f, &Field::from_slice(&be, [n], &picked).unwrap()).unwrap();
            let mut active = Field::<i32, 2>::new(&be, [64, 96]).unwrap();
            let mut value = Field::<f32, 2>::new(&be, [64, 96]).unwrap();
            let mut visits = Field::<i32, 2>::new(&be, [64, 96]).unwrap();
            probe2(&f, &mut active, &mut value, &mut visits).unwrap();
            let visits = visits.download().unwrap();
            for k in 0..64 * 96 {
                let expected = i32::from(k % 7 == 0 || k % 11 == 3);
                assert_eq!(
                    visits[k as usize],
                    expected,
                    "cell {k} on {}",
                    be.describe()
                );
            }
        }
    }
    no_validation_messages();
}
