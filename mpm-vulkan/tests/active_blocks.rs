//! `active()` loops over sparse trees run over a compacted list of live leaf blocks,
//! dispatched indirectly: every active cell is visited exactly once per loop, and nothing else.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

use common::*;
use mpm_core::backend::{FieldArg, LaunchArgs, LoopRange, TreeArg};
use mpm_core::ir::*;
use mpm_core::layout::Layout;
use mpm_core::sparse::Sparse;
use mpm_core::types::{Scalar, Ty};
use mpm_core::{Backend, Result};

/// Two loops, each `for i in grid.active() { visits[i] += 1 }`.
fn trace_visit() -> Result<Kernel> {
    let mut k = Kb::new("visit");
    let grid = k.field("grid", Ty::F32, 2);
    let visits = k.field("visits", Ty::I32, 2);
    for _ in 0..2 {
        let v = k.var("i", vec_ty(Scalar::I32, 2));
        k.k.loops.push(ParLoop {
            domain: LoopDomain::Active(grid),
            var: v,
            body: vec![],
        });
        let iv = k.v(v);
        let one = k.i(1);
        k.push(Stmt::AtomicAdd {
            field: visits,
            index: iv,
            value: one,
        });
    }
    k.finish()
}

/// Activates `cells` on the host, runs the kernel twice and checks the visits against the
/// host's `element_coords` over every element.
fn check(be: &mpm_vulkan::VulkanBackend, layout: Layout<2>, cells: &[[u32; 2]]) {
    let plan = layout.structure().unwrap();
    let shape = layout.shape();
    let words: Vec<AtomicU32> = plan
        .initial_words()
        .into_iter()
        .map(AtomicU32::new)
        .collect();
    let host = Sparse::new(&plan, &words);
    for c in cells {
        host.locate::<2>([c[0], c[1], 0], true)
            .expect("room in the pools");
    }
    let expected: HashSet<[u32; 2]> = (0..plan.elements)
        .filter_map(|e| host.element_coords(e))
        .map(|c| [c[0], c[1]])
        .collect();
    let want: HashSet<[u32; 2]> = cells.iter().copied().collect();
    let leaf = plan.levels.last().unwrap().level.cells() as usize;
    // A bitmasked last level activates single cells; a dense one whole blocks.
    assert!(expected.is_superset(&want) && expected.len() <= want.len() * leaf);
    let structure = buf(
        be,
        &words.iter().map(|w| w.load(Relaxed)).collect::<Vec<_>>(),
    );
    let grid = be.alloc(plan.elements as usize).unwrap();
    let tree: Arc<dyn TreeArg> = Arc::new(TestTree {
        plan: plan.clone(),
        structure,
        grid: grid.clone(),
    });
    let n = (shape[0] * shape[1]) as usize;
    let visits = ibuf(be, &vec![0; n]);
    let d = desc!("visit", ["grid", "visits"], trace_visit);
    let range = LoopRange {
        start: 0,
        count: plan.elements,
    };
    let ranges = [range, range];
    for _ in 0..2 {
        let args = LaunchArgs {
            fields: vec![
                FieldArg {
                    buffer: grid.clone(),
                    shape: &shape,
                    tree: Some(0),
                },
                FieldArg {
                    buffer: visits.clone(),
                    shape: &shape,
                    tree: None,
                },
            ],
            trees: vec![tree.clone()],
            scalars: &[],
            ranges: &ranges,
            loops: 0..ranges.len(),
        };
        be.launch(&d, &args).outcome.unwrap();
    }
    let got = read_i(be, &visits);
    for x in 0..shape[0] {
        for y in 0..shape[1] {
            let v = got[(x * shape[1] + y) as usize];
            let want = if expected.contains(&[x, y]) { 4 } else { 0 };
            assert_eq!(v, want, "{layout:?}: visits of ({x}, {y})");
        }
    }
}

#[test]
fn active_loops_visit_exactly_the_active_cells() {
    let Some(be) = backend_or_skip() else { return };
    // Scattered cells: most blocks of each layout stay free.
    let cells: Vec<[u32; 2]> = (0..40u32)
        .map(|k| [(k * 37 + 5) % 128, (k * 91 + 11) % 128])
        .collect();
    check(
        &be,
        Layout::root()
            .pointer([32, 32])
            .bitmasked([4, 4])
            .reserve(64),
        &cells,
    );
    check(
        &be,
        Layout::root()
            .pointer([8, 8])
            .pointer([4, 4])
            .dense([4, 4])
            .reserve(64),
        &cells,
    );
    check(
        &be,
        Layout::root().bitmasked([16, 16]).bitmasked([8, 8]),
        &cells,
    );
    // Nothing active: the indirect dispatch is empty.
    check(&be, Layout::root().pointer([32, 32]).dense([4, 4]), &[]);
    let shaders = be.compiled_shaders();
    assert!(shaders
        .iter()
        .any(|s| s.kernel == "mpm_vulkan::active_blocks"));
    let visit = shaders
        .iter()
        .find(|s| s.kernel.ends_with("visit"))
        .expect("the kernel was compiled");
    assert!(visit.glsl.contains("_leaf_origin(mpm_b"), "{}", visit.glsl);
    final_checks(&be);
}
