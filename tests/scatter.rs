//! Reproducible CPU scatter: a loop that only adds into a dense field gives the same bits on
//! every run of the CPU backend, and the same sums (to rounding) as shared atomics.

use std::sync::Arc;

use mpm::core::Backend;
use mpm::glam::{IVec2, UVec3, Vec2, Vec4};
use mpm::{kernel, BackendRef, CpuBackend, Field};

mod common;

/// Many particles add into few cells: the order of the additions changes the last bits.
#[kernel]
fn splat(grid: &mut Field<f32>, hits: &mut Field<i32>, n: u32, cells: u32, seed: u32) {
    for p in 0..n {
        let cell = p % cells;
        grid[cell] += rand_f32(seed, p) * 1000.0 + 0.001;
        hits[cell] += 1;
    }
}

/// The same, but the loop also reads the field: it keeps the shared atomics.
#[kernel]
fn splat_and_read(grid: &mut Field<f32>, out: &mut Field<f32>, n: u32, cells: u32) {
    for p in 0..n {
        let cell = p % cells;
        grid[cell] += 1.0;
        out[p] = grid[cell] * 0.0;
    }
}

fn run(b: &BackendRef) -> (Vec<u32>, Vec<i32>) {
    let cells = 7;
    let mut grid = Field::<f32>::new(b, [cells]).expect("grid");
    let mut hits = Field::<i32>::new(b, [cells]).expect("hits");
    splat(&mut grid, &mut hits, 200_000, cells, 3).expect("splat");
    let bits = grid
        .download()
        .expect("grid")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    (bits, hits.download().expect("hits"))
}

#[test]
fn reproducible_backends_give_the_same_bits() {
    let reproducible: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    let first = run(&reproducible);
    for _ in 0..5 {
        assert_eq!(
            run(&reproducible),
            first,
            "a reproducible run changed its sums"
        );
    }
    assert!(first
        .1
        .iter()
        .all(|&h| h == 200_000 / 7 || h == 200_000 / 7 + 1));
    // Shared atomics add the same numbers in another order: equal to rounding.
    let shared: BackendRef = Arc::new(
        CpuBackend::with_threads(2)
            .expect("pool")
            .with_shared_atomics(),
    );
    let (bits, hits) = run(&shared);
    assert_eq!(hits, first.1);
    for (a, b) in bits.iter().zip(&first.0) {
        let (a, b) = (f32::from_bits(*a), f32::from_bits(*b));
        assert!((a - b).abs() <= 1e-4 * a.abs(), "{a} vs {b}");
    }
    // A loop that also reads the field keeps exact integer-valued sums either way.
    let mut grid = Field::<f32>::new(&reproducible, [7]).expect("grid");
    let mut out = Field::<f32>::new(&reproducible, [700]).expect("out");
    splat_and_read(&mut grid, &mut out, 700, 7).expect("kernel");
    assert_eq!(grid.download().expect("grid"), vec![100.0; 7]);
}

/// A sparse field adds into copies of its tree's block pool the same way: the same bits on
/// every run, blocks activated where the adds land, as with shared atomics.
#[test]
fn sparse_fields_scatter_reproducibly() {
    use mpm::{Layout, Tree};
    let run = |b: &BackendRef| -> Vec<u32> {
        let tree = Tree::new(b, Layout::<1>::root().pointer([16]).dense([8])).expect("tree");
        let mut grid = Field::<f32>::place(&tree).expect("grid");
        let mut hits = Field::<i32>::place(&tree).expect("hits");
        splat(&mut grid, &mut hits, 200_000, 7, 3).expect("splat");
        assert_eq!(
            &hits.download().expect("hits")[..7],
            &[28572, 28572, 28572, 28571, 28571, 28571, 28571]
        );
        assert!(tree.memory().expect("memory").in_use < tree.memory().expect("memory").reserved);
        grid.download()
            .expect("grid")
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    let two: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    let first = run(&two);
    for _ in 0..5 {
        assert_eq!(run(&two), first, "a sparse run changed its sums");
    }
    let shared: BackendRef = Arc::new(
        CpuBackend::with_threads(2)
            .expect("pool")
            .with_shared_atomics(),
    );
    for (a, b) in run(&shared).iter().zip(&first) {
        let (a, b) = (f32::from_bits(*a), f32::from_bits(*b));
        assert!((a - b).abs() <= 1e-4 * a.abs(), "{a} vs {b}");
    }
}

#[kernel]
fn add_at(at: &Field<IVec2>, val: &Field<f32>, grid: &mut Field<f32, 2>) {
    for k in at.indices() {
        grid[at[k]] += val[k];
    }
}

/// Adds, then asks another field of the tree whether the cell is active.
#[kernel]
fn add_then_ask(
    at: &Field<IVec2>,
    grid: &mut Field<f32, 2>,
    twin: &Field<f32, 2>,
    seen: &mut Field<i32>,
) {
    for k in at.indices() {
        grid[at[k]] += 0.0;
        seen[k] = select(is_active(twin, at[k]), 1, 0);
    }
}

/// Reads `f` through a stencil (a loop of its own): on the CPU from a dense snapshot of a
/// sparse field where its grid is not much larger than its pool, through the worker's block
/// cache otherwise (`mpm_core::snapshot`).
#[kernel]
fn stencil_sums(f: &Field<f32, 2>, sums: &mut Field<f32, 2>) {
    for c in sums.indices() {
        let mut s = 0.0;
        for k in 0..3 {
            s = s * 2.0 + f[ivec2(c.x, c.y + k)];
        }
        sums[c] = s;
    }
}

#[kernel]
fn activity(f: &Field<f32, 2>, active: &mut Field<i32, 2>) {
    for c in active.indices() {
        active[c] = select(is_active(f, c), 1, 0);
    }
}

/// `count` adds at cells of the `span`^2 corner with values in [-1, 1], drawn from `seed`,
/// then one add of each `lone` value at its cell.
fn random_adds(
    seed: u32,
    count: usize,
    span: u32,
    lone: &[((i32, i32), f32)],
) -> (Vec<IVec2>, Vec<f32>) {
    let mut state = seed;
    let mut next = |n: u32| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) % n
    };
    let mut at: Vec<IVec2> = Vec::new();
    let mut val: Vec<f32> = Vec::new();
    for _ in 0..count {
        at.push(IVec2::new(next(span) as i32, next(span) as i32));
        val.push(next(2001) as f32 / 1000.0 - 1.0);
    }
    for &((x, y), v) in lone {
        at.push(IVec2::new(x, y));
        val.push(v);
    }
    (at, val)
}

/// A sparse field's private copy is grid-shaped (dense addressing; the cells are activated
/// after the loop) where the grid is at most a few times its pool, and a copy of its pool
/// otherwise (`mpm_core::scatter`): 64^2 grids with 64 blocks reserved take the first, 512^2
/// ones the second. Either way every `+=` activates its cell's unit, one of 0.0 or -0.0
/// too, and the sums have the dense field's bits; and a stencil reads them, from a snapshot
/// (64^2) or through the block cache (512^2), as it reads the dense field.
#[test]
fn every_add_activates_its_cell_whatever_the_copy_shape() {
    use mpm::Layout;
    let b: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    // Many adds into the first 24^2 cells, and lone adds of zero into units nothing else
    // reaches.
    let lone = [((40, 40), 0.0), ((57, 9), -0.0), ((9, 58), 0.0)];
    let (at, val) = random_adds(2024, 20_000, 24, &lone);
    let ats = Field::from_slice(&b, [at.len() as u32], &at).expect("at");
    let vals = Field::from_slice(&b, [val.len() as u32], &val).expect("val");
    let mut dense = Field::<f32, 2>::new(&b, [64, 64]).expect("dense");
    add_at(&ats, &vals, &mut dense).expect("dense adds");
    let want_bits: Vec<u32> = dense
        .download()
        .expect("dense")
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let mut want_sums = Field::<f32, 2>::new(&b, [64, 62]).expect("dense sums");
    stencil_sums(&dense, &mut want_sums).expect("dense stencil");
    let want_sums = want_sums.download().expect("dense sums");
    let layouts: [(&str, u32, Layout<2>); 4] = [
        (
            "grid-shaped pointer>dense",
            8,
            Layout::root().pointer([8, 8]).dense([8, 8]),
        ),
        (
            "pool-shaped pointer>dense",
            8,
            Layout::root().pointer([64, 64]).dense([8, 8]),
        ),
        (
            "grid-shaped pointer>bitmasked>dense",
            4,
            Layout::root()
                .pointer([8, 8])
                .bitmasked([2, 2])
                .dense([4, 4]),
        ),
        (
            "pool-shaped pointer>bitmasked>dense",
            4,
            Layout::root()
                .pointer([64, 64])
                .bitmasked([2, 2])
                .dense([4, 4]),
        ),
    ];
    for (name, unit, layout) in layouts {
        let tree = mpm::Tree::new(&b, layout.reserve(64)).expect(name);
        let mut grid = Field::<f32, 2>::place(&tree).expect(name);
        add_at(&ats, &vals, &mut grid).expect(name);
        let side = tree.shape()[1] as usize;
        let mut active = Field::<i32, 2>::new(&b, tree.shape()).expect(name);
        activity(&grid, &mut active).expect(name);
        let (values, active) = (grid.download().expect(name), active.download().expect(name));
        for x in 0..64 {
            let row = x * side;
            let bits: Vec<u32> = values[row..row + 64].iter().map(|v| v.to_bits()).collect();
            assert!(
                bits == want_bits[x * 64..x * 64 + 64],
                "{name}: row {x} differs from dense"
            );
        }
        let mut sums = Field::<f32, 2>::new(&b, [64, 62]).expect(name);
        stencil_sums(&grid, &mut sums).expect(name);
        let sums = sums.download().expect(name);
        for (k, (got, want)) in sums.iter().zip(&want_sums).enumerate() {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{name}: the stencil read {got} at {k}, the dense field {want}"
            );
        }
        // An invocation sees the cell its `+=` activated, through another field of the tree
        // (that loop keeps the pool-shaped copy: a grid-shaped one activates after it).
        let twin = Field::<f32, 2>::place(&tree).expect(name);
        let far: Vec<IVec2> = (0..64)
            .map(|k| IVec2::new(32 + k / 8 * 4, 32 + k % 8 * 4))
            .collect();
        let far_at = Field::from_slice(&b, [far.len() as u32], &far).expect(name);
        let mut seen = Field::<i32>::new(&b, [far.len() as u32]).expect(name);
        add_then_ask(&far_at, &mut grid, &twin, &mut seen).expect(name);
        assert!(
            seen.download().expect(name).iter().all(|&s| s == 1),
            "{name}: an add's cell read inactive"
        );
        let unit_of = |c: IVec2| (c.x as u32 / unit, c.y as u32 / unit);
        let reached: std::collections::HashSet<_> = at.iter().map(|&c| unit_of(c)).collect();
        for (i, &a) in active.iter().enumerate() {
            let c = IVec2::new((i / side) as i32, (i % side) as i32);
            let want = reached.contains(&unit_of(c)) as i32;
            assert_eq!(a, want, "{name}: cell {c} active {a}, want {want}");
        }
    }
}

#[kernel]
fn add_two_at(at: &Field<IVec2>, val: &Field<f32>, m: &mut Field<f32, 2>, v: &mut Field<Vec4, 2>) {
    for k in at.indices() {
        m[at[k]] += val[k];
        v[at[k]] += val[k] * vec4(1.0, -2.0, 0.5, 3.0);
    }
}

/// Past the 64 MiB cap on grid-shaped copies (`mpm_core::scatter`): on a 2048^2 grid with
/// 8,192 blocks reserved (8x its pool) and two threads, the `f32` field's grid-shaped
/// copies would fit the cap (8 Mi words) and the `Vec4` field's would not (32 Mi words), so
/// the `Vec4` field takes pool-shaped copies, and the `f32` field of the same tree with it
/// (which keeps the loop on the block cache's path; the path of every storage, which mixed
/// shapes would take, gives the same bits more slowly, so the sums cannot tell the two
/// apart). The sums have the dense fields' bits, and exactly the units that adds reached
/// are active.
#[test]
fn fields_past_the_copy_cap_sum_as_dense_ones() {
    use mpm::Layout;
    let b: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    // Adds spread over a 300^2 corner (about 1,400 blocks), and lone zeros far out.
    let lone = [((2000, 31), 0.0), ((1500, 2047), -0.0), ((700, 1100), 0.0)];
    let (at, val) = random_adds(77, 40_000, 300, &lone);
    let ats = Field::from_slice(&b, [at.len() as u32], &at).expect("at");
    let vals = Field::from_slice(&b, [val.len() as u32], &val).expect("val");
    let side = 2048u32;
    let mut dense_m = Field::<f32, 2>::new(&b, [side, side]).expect("dense m");
    let mut dense_v = Field::<Vec4, 2>::new(&b, [side, side]).expect("dense v");
    add_two_at(&ats, &vals, &mut dense_m, &mut dense_v).expect("dense adds");
    let layout = Layout::root().pointer([256, 256]).dense([8, 8]);
    let tree = mpm::Tree::new(&b, layout.reserve(8192)).expect("tree");
    assert_eq!(tree.shape(), [side, side]);
    let mut m = Field::<f32, 2>::place(&tree).expect("m");
    let mut v = Field::<Vec4, 2>::place(&tree).expect("v");
    add_two_at(&ats, &vals, &mut m, &mut v).expect("sparse adds");
    let bits = |f: &[f32]| f.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let (want_m, got_m) = (dense_m.download().expect("m"), m.download().expect("m"));
    assert!(bits(&got_m) == bits(&want_m), "m differs from dense");
    let words = |f: Vec<Vec4>| f.iter().flat_map(|x| x.to_array()).collect::<Vec<f32>>();
    let want_v = words(dense_v.download().expect("v"));
    let got_v = words(v.download().expect("v"));
    assert!(bits(&got_v) == bits(&want_v), "v differs from dense");
    let mut active = Field::<i32, 2>::new(&b, [side, side]).expect("active");
    activity(&m, &mut active).expect("activity");
    let unit_of = |c: IVec2| (c.x / 8, c.y / 8);
    let reached: std::collections::HashSet<_> = at.iter().map(|&c| unit_of(c)).collect();
    for (i, &a) in active.download().expect("active").iter().enumerate() {
        let c = IVec2::new(i as i32 / side as i32, i as i32 % side as i32);
        let want = reached.contains(&unit_of(c)) as i32;
        assert_eq!(a, want, "cell {c} active {a}, want {want}");
    }
}

/// The label says what holds: several threads add reproducibly into dense fields only
/// (sparse ones keep shared atomics); one thread is reproducible throughout.
#[test]
fn the_label_claims_only_what_holds() {
    let two = CpuBackend::with_threads(2).expect("pool");
    assert!(
        two.describe().ends_with("reproducible on dense grids)"),
        "{}",
        two.describe()
    );
    let shared = CpuBackend::with_threads(2)
        .expect("pool")
        .with_shared_atomics();
    assert_eq!(shared.describe(), "cpu (2 threads)");
    let one = CpuBackend::with_threads(1).expect("pool");
    assert!(
        one.describe().ends_with(", reproducible)"),
        "{}",
        one.describe()
    );
}

/// Adds `n` ones into `counts` (`len` words), from word `first` on, every `stride`-th word
/// (wrapping).
#[kernel]
fn strided_ones(counts: &mut Field<u32>, n: u32, first: u32, stride: u32, len: u32) {
    for k in 0..n {
        counts[(first + k * stride) % len] += 1u32;
    }
}

/// Only the pages of words a chunk's adds reached are summed and zeroed after a launch:
/// launch after launch into ranges that move, grow and shrink (one word, a few, the whole
/// field, wrapping around), every count stays exact and no copy keeps a stale add for the
/// next.
#[test]
fn each_launch_sums_exactly_the_words_its_adds_reached() {
    let b: BackendRef = Arc::new(CpuBackend::with_threads(3).expect("pool"));
    let len = 50_000u32;
    let mut counts = Field::<u32>::new(&b, [len]).expect("counts");
    let mut model = vec![0u32; len as usize];
    let launches = [
        (1, 17, 1),
        (5_000, 40_000, 1),
        (120_000, 3, 7),
        (10, 49_990, 3),
        (3, 25_000, 20_000),
        (0, 0, 1),
        (70_000, 11, 13),
    ];
    for (n, first, stride) in launches {
        strided_ones(&mut counts, n, first, stride, len).expect("launch");
        for k in 0..n as u64 {
            model[((first as u64 + k * stride as u64) % len as u64) as usize] += 1;
        }
        assert_eq!(
            counts.download().expect("counts"),
            model,
            "after {n} adds from {first} by {stride}"
        );
    }
}

/// Adds `(1, 10, 100)` `n` times into `sums` (`len` elements), from element `first` on,
/// every `stride`-th element (wrapping).
#[kernel]
fn strided_triples(sums: &mut Field<UVec3>, n: u32, first: u32, stride: u32, len: u32) {
    for k in 0..n {
        sums[(first + k * stride) % len] += UVec3::new(1, 10, 100);
    }
}

/// An element of three words can straddle two pages of the copies (1024 words each):
/// element 341 holds words 1023 to 1025. Its words on both pages are summed, and zeroed for
/// the next launch, alone and among others.
#[test]
fn elements_across_pages_are_summed_whole() {
    let b: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    let len = 3_000u32;
    let mut sums = Field::<UVec3>::new(&b, [len]).expect("sums");
    let mut model = vec![UVec3::ZERO; len as usize];
    for (n, first, stride) in [
        (1, 341, 1),
        (2, 682, 1),
        (9_000, 5, 1),
        (1, 1706, 1),
        (400, 0, 341),
    ] {
        strided_triples(&mut sums, n, first, stride, len).expect("launch");
        for k in 0..n as u64 {
            model[((first as u64 + k * stride as u64) % len as u64) as usize] +=
                UVec3::new(1, 10, 100);
        }
        assert_eq!(
            sums.download().expect("sums"),
            model,
            "after {n} adds from {first} by {stride}"
        );
    }
}

/// A particle's 3x3 stencil, in cell units: the nodes a P2G adds into and a G2P reads.
#[kernel]
fn stencil_splat(x: &Field<Vec2>, grid: &mut Field<Vec2, 2>) {
    for p in x.indices() {
        let base = (x[p] - 0.5).floor().as_ivec2();
        for i in 0..3 {
            for j in 0..3 {
                grid[base + ivec2(i, j)] += x[p] * (1.0 + (i * 3 + j) as f32 * 0.1);
            }
        }
    }
}

#[kernel]
fn stencil_gather(x: &Field<Vec2>, grid: &Field<Vec2, 2>, out: &mut Field<Vec2>) {
    for p in x.indices() {
        let base = (x[p] - 0.5).floor().as_ivec2();
        let mut sum = Vec2::ZERO;
        for i in 0..3 {
            for j in 0..3 {
                sum += grid[base + ivec2(i, j)] * (1.0 + (i * 3 + j) as f32 * 0.01);
            }
        }
        out[p] = sum;
    }
}

/// Activates the corners of each stencil (enough for leaf blocks at least two cells wide).
#[kernel]
fn stencil_touch(x: &Field<Vec2>, grid: &mut Field<Vec2, 2>) {
    for p in x.indices() {
        let base = (x[p] - 0.5).floor().as_ivec2();
        activate(grid, base);
        activate(grid, base + ivec2(2, 0));
        activate(grid, base + ivec2(0, 2));
        activate(grid, base + ivec2(2, 2));
    }
}

/// How the grid of [`every_access_path_gives_the_same_bits`] is stored.
#[derive(Clone, Copy)]
enum Grid {
    Dense,
    Sparse(fn() -> mpm::Layout<2>),
    Frozen(fn() -> mpm::Layout<2>),
}

/// The splat and the gather of `x` on `grid`: the grid's values (zero where inactive) and the
/// gathered sums, as bits.
fn splat_and_gather(b: &BackendRef, x: &[Vec2], grid: Grid) -> mpm::core::Result<Vec<u32>> {
    let xs = Field::from_slice(b, [x.len() as u32], x)?;
    let (tree, mut g) = match grid {
        Grid::Dense => (None, Field::<Vec2, 2>::new(b, [32, 32])?),
        Grid::Sparse(layout) | Grid::Frozen(layout) => {
            let tree = mpm::Tree::new(b, layout())?;
            let g = Field::place(&tree)?;
            (Some(tree), g)
        }
    };
    match (grid, &tree) {
        (Grid::Frozen(_), Some(tree)) => {
            stencil_touch(&xs, &mut g)?;
            tree.while_frozen(|| stencil_splat(&xs, &mut g))?;
        }
        _ => stencil_splat(&xs, &mut g)?,
    }
    let mut out = Field::<Vec2>::new(b, [x.len() as u32])?;
    stencil_gather(&xs, &g, &mut out)?;
    let values = g.download()?.into_iter().chain(out.download()?);
    Ok(values
        .flat_map(|v| [v.x.to_bits(), v.y.to_bits()])
        .collect())
}

/// The CPU lowering runs a batch of a loop on the narrowest access path its fields allow
/// (`mpm_core::host::ANY`): dense fields, sparse ones through the block cache, or every path
/// (a frozen tree, a layout without the quick walk). Each path adds the same numbers in the
/// same order, so every grid gives the dense grid's bits; and each reports a stencil that
/// leaves the grid.
#[test]
fn every_access_path_gives_the_same_bits() {
    use mpm::Layout;
    let b: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    // Stencils from node 1 to node 30 of the 32 a side.
    let mut state = 12345u32;
    let mut next = || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        1.5 + 29.0 * (state >> 8) as f32 / (1u32 << 24) as f32
    };
    let x: Vec<Vec2> = (0..5000).map(|_| Vec2::new(next(), next())).collect();
    let grids = [
        (
            "pointer>dense",
            Grid::Sparse(|| Layout::root().pointer([4, 4]).dense([8, 8])),
        ),
        (
            "pointer>bitmasked>dense",
            Grid::Sparse(|| {
                Layout::root()
                    .pointer([4, 4])
                    .bitmasked([2, 2])
                    .dense([4, 4])
            }),
        ),
        // Four levels above the leaf: more than the quick walk takes.
        (
            "four pointer levels",
            Grid::Sparse(|| {
                Layout::root()
                    .pointer([2, 2])
                    .pointer([2, 2])
                    .pointer([2, 2])
                    .pointer([2, 2])
                    .dense([2, 2])
                    .reserve(256)
            }),
        ),
        (
            "frozen pointer>dense",
            Grid::Frozen(|| Layout::root().pointer([4, 4]).dense([8, 8])),
        ),
    ];
    let dense = splat_and_gather(&b, &x, Grid::Dense).expect("dense grid");
    assert!(dense.iter().any(|&w| w != 0));
    for (name, grid) in grids {
        let bits = splat_and_gather(&b, &x, grid).expect(name);
        assert!(bits == dense, "{name} differs from the dense grid");
    }
    let mut outside = x.clone();
    outside[4321] = Vec2::new(0.2, 7.0);
    for (name, grid) in [("dense", Grid::Dense)].into_iter().chain(grids) {
        match splat_and_gather(&b, &outside, grid) {
            Err(mpm::core::Error::OutOfBounds { field, .. }) => assert_eq!(field, "grid"),
            other => panic!(
                "{name}: a stencil outside the grid gave {:?}",
                other.map(|bits| bits.len())
            ),
        }
    }
}

/// Runs of stores at one index, which the CPU lowering locates once (the first store's
/// element, taken by the later stores into fields numbered alike): a store into a field the
/// run stored into just before, a `-=` into a privatised field, a field of another shape or
/// tree in the run, and a value whose block moves the index, which ends the run after its
/// store (the next stores go to the new index).
#[kernel]
fn store_runs(a: &mut Field<f32, 2>, b: &mut Field<Vec2, 2>, c: &mut Field<f32, 2>, n: i32) {
    for p in 0..n {
        let mut at = ivec2(p % 16, p / 16);
        a[at] = p as f32;
        b[at] += vec2(a[at], 1.0);
        c[at] -= 2.0;
        b[at] = {
            at = at + ivec2(0, 16);
            b[at - ivec2(0, 16)] * 2.0
        };
        c[at] += 5.0;
        a[at] = 1.0;
    }
}

/// `store_runs` gives what the statements say one by one, with `b` and `c` dense (the
/// `DENSE` path, which does not place), on one tree (the `CACHED` path: `c` takes `b`'s
/// elements, `a` finds its own) and on a tree without the quick walk (`ANY`); and a run
/// that leaves the grid names the run's first field. On the CPU and on Vulkan (whose
/// lowering finds a run's element once too), with float atomics and without.
#[test]
fn runs_of_stores_at_one_index_store_what_each_statement_says() {
    let cpu: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    let mut backends = vec![("cpu", &cpu)];
    if let Some(b) = common::backends() {
        backends.extend(b.gpus(true));
    }
    for (name, be) in backends {
        check_store_runs(be, name);
    }
    if let Some(b) = common::backends() {
        b.check_validation();
    }
}

fn check_store_runs(be: &BackendRef, backend: &str) {
    use mpm::Layout;
    // `b` and `c` dense, or on the tree a function makes.
    type Storage = Option<fn() -> Layout<2>>;
    let layouts: [(&str, Storage); 3] = [
        ("dense", None),
        (
            "pointer>dense",
            Some(|| Layout::root().pointer([4, 8]).dense([4, 4])),
        ),
        (
            "four pointer levels",
            Some(|| {
                Layout::root()
                    .pointer([2, 2])
                    .pointer([2, 2])
                    .pointer([2, 2])
                    .pointer([2, 4])
                    .dense([1, 1])
                    .reserve(512)
            }),
        ),
    ];
    for (layout_name, layout) in layouts {
        let name = format!("{backend}, {layout_name}");
        let run = |n: i32| -> mpm::core::Result<(Vec<f32>, Vec<Vec2>, Vec<f32>)> {
            let mut a = Field::<f32, 2>::new(be, [16, 32])?;
            let (_tree, mut b, mut c) = match layout {
                None => (None, Field::new(be, [16, 32])?, Field::new(be, [16, 32])?),
                Some(layout) => {
                    let tree = mpm::Tree::new(be, layout())?;
                    let (b, c) = (Field::place(&tree)?, Field::place(&tree)?);
                    (Some(tree), b, c)
                }
            };
            store_runs(&mut a, &mut b, &mut c, n)?;
            Ok((a.download()?, b.download()?, c.download()?))
        };
        let (a, b, c) = run(256).expect(&name);
        for y in 0..16 {
            for x in 0..16 {
                let (cell, moved) = ((x * 32 + y) as usize, (x * 32 + y + 16) as usize);
                let p = (y * 16 + x) as f32;
                assert_eq!(a[cell], p, "{name}: a at ({x}, {y})");
                assert_eq!(b[cell], Vec2::new(2.0 * p, 2.0), "{name}: b at ({x}, {y})");
                assert_eq!(c[cell], -2.0, "{name}: c at ({x}, {y})");
                assert_eq!(a[moved], 1.0, "{name}: a at ({x}, {})", y + 16);
                assert_eq!(b[moved], Vec2::ZERO, "{name}: b at ({x}, {})", y + 16);
                assert_eq!(c[moved], 5.0, "{name}: c at ({x}, {})", y + 16);
            }
        }
        match run(300) {
            Err(mpm::core::Error::OutOfBounds { field, .. }) => assert_eq!(field, "c", "{name}"),
            other => panic!(
                "{name}: moving out of the grid gave {:?}",
                other.map(|_| ())
            ),
        }
    }
}
