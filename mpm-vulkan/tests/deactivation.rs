//! The deactivation pass after a launch is dispatched indirectly from the queue's length:
//! it clears exactly the queued cells (and their fields) whether the queue is empty, partly
//! full or full, on pointer and bitmasked levels, over one or many workgroups.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

use common::*;
use mpm_core::backend::{Buffer, FieldArg, LaunchArgs, LoopRange, TreeArg};
use mpm_core::ir::*;
use mpm_core::layout::{Layout, Structure};
use mpm_core::sparse::{FieldWords, Sparse};
use mpm_core::types::{Scalar, Ty};
use mpm_core::{Backend, Result};

/// Per tree `t`, a loop `for i in 0..n { grid_t.deactivate(ivec2(xs_t[i], ys_t[i])) }`.
fn drop_kernel(name: &str, trees: usize) -> Result<Kernel> {
    let mut k = Kb::new(name);
    for _ in 0..trees {
        let grid = k.field("grid", Ty::F32, 2);
        let xs = k.field("xs", Ty::I32, 1);
        let ys = k.field("ys", Ty::I32, 1);
        let i = k.par_range(Ty::I32);
        let iv = k.v(i);
        let x = k.load(xs, iv);
        let y = k.load(ys, iv);
        let c = k.construct(&[x, y], vec_ty(Scalar::I32, 2));
        k.push(Stmt::Deactivate {
            field: grid,
            index: c,
        });
    }
    k.finish()
}

fn trace_drop() -> Result<Kernel> {
    drop_kernel("drop", 1)
}

fn trace_drop_two() -> Result<Kernel> {
    drop_kernel("drop_two", 2)
}

/// The active elements of a tree and their grid words, by coordinates.
fn contents(plan: &Structure, words: &[AtomicU32], grid: &[u32]) -> HashMap<[u32; 2], u32> {
    let tree = Sparse::new(plan, words);
    (0..plan.elements)
        .filter_map(|e| {
            tree.element_coords(e)
                .map(|c| ([c[0], c[1]], grid[e as usize]))
        })
        .collect()
}

fn atomics(words: &[u32]) -> Vec<AtomicU32> {
    words.iter().copied().map(AtomicU32::new).collect()
}

/// One tree of a launch: `active` activated on the host, then `dropped` deactivated.
struct Case<'a> {
    layout: &'a Layout<2>,
    active: &'a [[u32; 2]],
    dropped: &'a [[u32; 2]],
}

/// A case ready to launch: the host's result and the device's buffers.
struct Prepared {
    plan: Structure,
    queued: u32,
    want: HashMap<[u32; 2], u32>,
    want_grid: Vec<u32>,
    structure: Arc<dyn Buffer>,
    grid: Arc<dyn Buffer>,
    xs: Arc<dyn Buffer>,
    ys: Arc<dyn Buffer>,
}

fn prepare(be: &mpm_vulkan::VulkanBackend, case: &Case) -> Prepared {
    let plan = case.layout.structure().unwrap();
    let queue = plan.deactivation.clone().expect("a sparse layout");
    let words = atomics(&plan.initial_words());
    let host = Sparse::new(&plan, &words);
    for c in case.active {
        host.locate::<2>([c[0], c[1], 0], true)
            .expect("room in the pools");
    }
    let grid_words: Vec<u32> = (0..plan.elements)
        .map(|e| match host.element_coords(e) {
            Some(_) => (e as f32 + 1.0).to_bits(),
            None => 0,
        })
        .collect();
    let before: Vec<u32> = words.iter().map(|w| w.load(Relaxed)).collect();
    for c in case.dropped {
        host.deactivate([c[0], c[1], 0]);
    }
    let queued = words[queue.len as usize].load(Relaxed);
    let host_grid = atomics(&grid_words);
    host.maintain(&[FieldWords {
        words: &host_grid,
        per_element: 1,
    }])
    .expect("no pool ran out");
    let want_grid: Vec<u32> = host_grid.iter().map(|w| w.load(Relaxed)).collect();
    let coords = |a: usize| -> Vec<i32> { case.dropped.iter().map(|c| c[a] as i32).collect() };
    Prepared {
        want: contents(&plan, &words, &want_grid),
        want_grid,
        queued,
        structure: buf(be, &before),
        grid: buf(be, &grid_words),
        xs: ibuf(be, &coords(0)),
        ys: ibuf(be, &coords(1)),
        plan,
    }
}

/// Runs the cases' deactivations in one launch (a tree each) and compares every tree's
/// contents with the host's deactivation of the same cells. Returns how many cells each
/// tree queued.
fn check(be: &mpm_vulkan::VulkanBackend, cases: &[Case]) -> Vec<u32> {
    let prepared: Vec<Prepared> = cases.iter().map(|c| prepare(be, c)).collect();
    let shapes: Vec<([u32; 2], [u32; 1])> = cases
        .iter()
        .map(|c| (c.layout.shape(), [c.dropped.len() as u32]))
        .collect();
    let mut fields = Vec::new();
    let mut trees: Vec<Arc<dyn TreeArg>> = Vec::new();
    for (p, (shape, n)) in prepared.iter().zip(&shapes) {
        let tree: Arc<dyn TreeArg> = Arc::new(TestTree {
            plan: p.plan.clone(),
            structure: p.structure.clone(),
            grid: p.grid.clone(),
        });
        trees.push(tree);
        fields.push(FieldArg {
            buffer: p.grid.clone(),
            shape,
            tree: Some(trees.len() - 1),
        });
        for b in [&p.xs, &p.ys] {
            fields.push(FieldArg {
                buffer: b.clone(),
                shape: n,
                tree: None,
            });
        }
    }
    let ranges: Vec<LoopRange> = cases
        .iter()
        .map(|c| LoopRange {
            start: 0,
            count: c.dropped.len() as u64,
        })
        .collect();
    let args = LaunchArgs {
        fields,
        trees,
        scalars: &[],
        ranges: &ranges,
        loops: 0..ranges.len(),
    };
    match cases.len() {
        1 => be.launch(&desc!("drop", ["grid", "xs", "ys"], trace_drop), &args),
        _ => be.launch(
            &desc!(
                "drop_two",
                ["grid", "xs", "ys", "grid2", "xs2", "ys2"],
                trace_drop_two
            ),
            &args,
        ),
    }
    .outcome
    .unwrap();
    for (case, p) in cases.iter().zip(&prepared) {
        let layout = case.layout;
        let queue = p.plan.deactivation.as_ref().unwrap();
        let after = be.read(&*p.structure).unwrap();
        let grid = be.read(&*p.grid).unwrap();
        assert_eq!(after[queue.len as usize], 0, "{layout:?}: queue reset");
        let level = &p.plan.levels[queue.level as usize];
        let marks = (level.capacity * level.level.cells()).div_ceil(32) as usize;
        let marks = &after[queue.queued as usize..][..marks];
        assert!(
            marks.iter().all(|&w| w == 0),
            "{layout:?}: queued bits reset"
        );
        let got = contents(&p.plan, &atomics(&after), &grid);
        assert_eq!(got, p.want, "{layout:?}: {} cells queued", p.queued);
        // The dropped elements' words were cleared (blocks keep their indices on both sides).
        assert_eq!(grid, p.want_grid, "{layout:?}: field words");
    }
    prepared.iter().map(|p| p.queued).collect()
}

/// The first element of every cell of the deactivation level, level by level (so that the
/// first `capacity` of them fit the pools).
fn queue_units(plan: &Structure) -> Vec<[u32; 2]> {
    let level = plan.deactivation.as_ref().expect("a sparse layout").level as usize;
    let mut corners = vec![[0u32; 2]];
    for p in &plan.levels[..=level] {
        let [sx, sy, _] = p.level.shape;
        corners = corners
            .into_iter()
            .flat_map(|c| {
                (0..sx).flat_map(move |x| {
                    (0..sy).map(move |y| [c[0] + x * p.stride[0], c[1] + y * p.stride[1]])
                })
            })
            .collect();
    }
    corners
}

/// Cells to activate and to drop on a layout, filling its queue to different lengths.
struct Scenario {
    /// One cell of each unit the queue can hold.
    units: Vec<[u32; 2]>,
    /// Every cell of the layout.
    all: Vec<[u32; 2]>,
    /// Every other unit of the first third, some twice or by another of their cells, and a
    /// few inactive cells.
    partial: Vec<[u32; 2]>,
    /// How many units `partial` queues.
    partial_units: usize,
}

impl Scenario {
    fn new(layout: &Layout<2>) -> Scenario {
        let plan = layout.structure().unwrap();
        let queue = plan.deactivation.clone().unwrap();
        let span = plan.levels[queue.level as usize].stride;
        let shape = layout.shape();
        let all: Vec<[u32; 2]> = (0..shape[0])
            .flat_map(|x| (0..shape[1]).map(move |y| [x, y]))
            .collect();
        let mut units = queue_units(&plan);
        units.truncate(queue.capacity as usize);
        assert_eq!(units.len() as u32, queue.capacity, "{layout:?}");
        let (some, rest) = units.split_at(units.len() / 3);
        let halves: Vec<[u32; 2]> = some.iter().step_by(2).copied().collect();
        let mut partial = halves.clone();
        partial.extend(
            halves
                .iter()
                .step_by(3)
                .map(|c| [c[0] + span[0] - 1, c[1] + span[1] - 1]),
        );
        partial.extend_from_slice(&rest[..5]);
        Scenario {
            partial_units: halves.len(),
            units,
            all,
            partial,
        }
    }

    /// The active third of the units.
    fn some(&self) -> &[[u32; 2]] {
        &self.units[..self.units.len() / 3]
    }

    /// The other units (inactive when `some` are active).
    fn rest(&self) -> &[[u32; 2]] {
        &self.units[self.units.len() / 3..]
    }
}

#[test]
fn deactivation_clears_exactly_the_queued_cells() {
    let Some(be) = backend_or_skip() else { return };
    // Pointer leaves: the queue holds blocks of the pool (200: four workgroups when full).
    let pointer = Layout::root().pointer([16, 16]).dense([4, 4]).reserve(200);
    // A bitmasked level under a pointer: the queue holds cells of the pooled blocks.
    let mixed = Layout::root().pointer([8, 8]).bitmasked([8, 8]).reserve(40);
    // Bitmasked only: the queue holds every cell of the table.
    let bitmasked = Layout::root().bitmasked([16, 16]).dense([4, 4]);
    for layout in [&pointer, &mixed, &bitmasked] {
        let s = Scenario::new(layout);
        let case = |active, dropped| {
            [Case {
                layout,
                active,
                dropped,
            }]
        };
        // Empty: nothing dropped, then only inactive cells.
        assert_eq!(check(&be, &case(s.some(), &[])), [0], "{layout:?}");
        assert_eq!(check(&be, &case(s.some(), s.rest())), [0], "{layout:?}");
        // Partly full.
        let queued = check(&be, &case(s.some(), &s.partial));
        assert_eq!(queued, [s.partial_units as u32], "{layout:?}");
        // Full: as many units active as the queue holds, and every cell dropped.
        let queued = check(&be, &case(&s.units, &s.all));
        assert_eq!(queued, [s.units.len() as u32], "{layout:?}");
    }
    // Two trees in one launch, each with its own dispatch: of one plan, then of two.
    let (p, m) = (Scenario::new(&pointer), Scenario::new(&mixed));
    let queued = check(
        &be,
        &[
            Case {
                layout: &pointer,
                active: p.some(),
                dropped: &p.partial,
            },
            Case {
                layout: &pointer,
                active: &p.units,
                dropped: &p.all,
            },
        ],
    );
    assert_eq!(queued, [p.partial_units as u32, p.units.len() as u32]);
    let queued = check(
        &be,
        &[
            Case {
                layout: &mixed,
                active: &m.units,
                dropped: &m.all,
            },
            Case {
                layout: &pointer,
                active: p.some(),
                dropped: &[],
            },
        ],
    );
    assert_eq!(queued, [m.units.len() as u32, 0]);
    let maint = be
        .compiled_shaders()
        .into_iter()
        .filter(|s| s.kernel == "mpm_vulkan::maintenance")
        .collect::<Vec<_>>();
    assert!(
        maint.iter().any(|s| s.glsl.contains("buffer Dispatch")),
        "the deactivation pass's dispatch is written on the device"
    );
    final_checks(&be);
}
