//! Binning and binned loops: `atomic_add` returning the old value, the exclusive scan, the
//! counting sort by block (`mpm_core::binning`) and `for p in grid.bins(order, starts, block)`
//! (`mpm_core::bins`), on the CPU and on Vulkan, checked against host references; on the CPU
//! also bitwise the same sums for any thread count, dense and sparse.

mod common;

use std::sync::Arc;

use common::*;
use mpm::core::binning::{exclusive_scan, Bins, SCAN_CHUNK};
use mpm::core::Result;
use mpm::glam::Vec2;
use mpm::{kernel, BackendRef, CpuBackend, Field, Layout, Tree};
use proptest::collection::vec;
use proptest::prelude::*;

fn vec2s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<Vec2>> {
    vec((lo..hi, lo..hi).prop_map(|(x, y)| Vec2::new(x, y)), n)
}

// -----------------------------------------------------------------------------------------
// atomic_add returning the old value

#[kernel]
fn k_fetch_add(
    keys: &Field<u32>,
    counts: &mut Field<u32>,
    icounts: &mut Field<i32>,
    fcounts: &mut Field<f32>,
    olds: &mut Field<u32>,
    iolds: &mut Field<i32>,
    folds: &mut Field<f32>,
    out_of_range: &mut Field<u32>,
) {
    for p in keys.indices() {
        let k = keys[p];
        let old = atomic_add(counts, k, 1u32);
        olds[p] = old;
        let i = atomic_add(icounts, k, -2);
        iolds[p] = i;
        let f = atomic_add(fcounts, k, 1.0);
        folds[p] = f;
        // Out of bounds: nothing is added and the old value reads as zero (the launch then
        // reports the out-of-bounds access).
        if p == 0u32 {
            let none = atomic_add(counts, 1000u32, 5u32);
            out_of_range[0] = none + 7u32;
        }
    }
}

/// Every invocation gets a distinct old value: per key, the olds are exactly 0, 1, .., n - 1
/// (and 0, -2, -4, .. for i32, 0.0, 1.0, .. for f32, exact below 2^24), on every backend,
/// the compare-and-swap fallback included.
#[test]
fn atomic_add_returns_distinct_old_values() {
    let n = 3000usize;
    property(6, vec(0u32..5, n), move |bk, keys| {
        for (name, be) in [
            ("cpu", &bk.cpu),
            ("vulkan", &bk.vk),
            ("vulkan-cas", &bk.vk_cas),
        ] {
            let run = || -> Result<_> {
                let fk = Field::from_slice(be, [n as u32], &keys)?;
                let mut counts = Field::<u32>::new(be, [5])?;
                let mut icounts = Field::<i32>::new(be, [5])?;
                let mut fcounts = Field::<f32>::new(be, [5])?;
                let mut olds = Field::<u32>::new(be, [n as u32])?;
                let mut iolds = Field::<i32>::new(be, [n as u32])?;
                let mut folds = Field::<f32>::new(be, [n as u32])?;
                let mut oor = Field::<u32>::new(be, [1])?;
                let launched = k_fetch_add(
                    &fk,
                    &mut counts,
                    &mut icounts,
                    &mut fcounts,
                    &mut olds,
                    &mut iolds,
                    &mut folds,
                    &mut oor,
                );
                Ok((
                    launched.is_err(),
                    counts.download()?,
                    olds.download()?,
                    iolds.download()?,
                    folds.download()?,
                    oor.download()?,
                ))
            };
            let (flagged, counts, olds, iolds, folds, oor) = ok(name, run())?;
            prop_assert!(
                flagged,
                "{name}: the out-of-bounds atomic_add was not reported"
            );
            prop_assert_eq!(
                oor[0],
                7,
                "{}: an out-of-bounds atomic_add read non-zero",
                name
            );
            for key in 0..5u32 {
                let mut mine: Vec<u32> = (0..n)
                    .filter(|&p| keys[p] == key)
                    .map(|p| olds[p])
                    .collect();
                let total = mine.len() as u32;
                prop_assert_eq!(
                    counts[key as usize],
                    total,
                    "{}: count of key {}",
                    name,
                    key
                );
                mine.sort_unstable();
                prop_assert!(
                    mine.iter().copied().eq(0..total),
                    "{name}: u32 olds of key {key}"
                );
                let mut ints: Vec<i32> = (0..n)
                    .filter(|&p| keys[p] == key)
                    .map(|p| iolds[p])
                    .collect();
                ints.sort_unstable_by(|a, b| b.cmp(a));
                prop_assert!(
                    ints.iter().copied().eq((0..total as i32).map(|k| -2 * k)),
                    "{name}: i32 olds of key {key}"
                );
                let mut floats: Vec<f32> = (0..n)
                    .filter(|&p| keys[p] == key)
                    .map(|p| folds[p])
                    .collect();
                floats.sort_by(f32::total_cmp);
                prop_assert!(
                    floats.iter().copied().eq((0..total).map(|k| k as f32)),
                    "{name}: f32 olds of key {key}"
                );
            }
        }
        Ok(())
    });
}

// -----------------------------------------------------------------------------------------
// exclusive scan and binning

/// The scan of up to three chunks, across chunk boundaries, against the host's.
#[test]
fn exclusive_scan_matches_the_host() {
    let max = 3 * SCAN_CHUNK as usize + 17;
    property(6, vec(0u32..1000, 1..max), |bk, values| {
        let n = values.len() as u32;
        let mut expected = Vec::with_capacity(values.len());
        let mut sum = 0u32;
        for v in &values {
            expected.push(sum);
            sum += v;
        }
        agree(
            bk,
            false,
            |be| {
                let fv = Field::from_slice(be, [n], &values)?;
                let chunks = n.div_ceil(SCAN_CHUNK);
                let mut partial = Field::<u32>::new(be, [chunks])?;
                let mut out = Field::<u32>::new(be, [n])?;
                exclusive_scan(&fv, &mut partial, &mut out, n, chunks)?;
                out.download()
            },
            |cpu, gpu| {
                same("scan (cpu)", cpu, &expected, Tol::Exact)?;
                same("scan (gpu)", gpu, &expected, Tol::Exact)
            },
        )
    });
}

/// The bin of `x` as the host computes it: the block of `block` cells of its cell, clamped
/// into the grid.
fn host_bin(x: Vec2, inv_dx: f32, shape: [u32; 2], block: u32) -> usize {
    let mut bin = 0usize;
    for a in 0..2 {
        let cell = ((x[a] * inv_dx).floor() as i32).clamp(0, shape[a] as i32 - 1) as u32;
        bin = bin * shape[a].div_ceil(block) as usize + (cell / block) as usize;
    }
    bin
}

/// After `Bins::update`, `starts` is the exclusive scan of the host's bin counts and each
/// bin lists exactly its particles (in any order), particles outside the grid in the nearest
/// bin; a second update with more particles than the first grows the arrays.
#[test]
fn binning_groups_particles_by_block() {
    let shape = [37u32, 20];
    let inv_dx = 16.0;
    property(
        6,
        (vec2s(-0.2, 2.5, 900), 2i32..7),
        move |bk, (x, block)| {
            for (name, be) in [("cpu", &bk.cpu), ("vulkan", &bk.vk)] {
                let run = || -> Result<_> {
                    let mut bins = Bins::new(be, &shape, block, 10)?;
                    let fx = Field::from_slice(be, [x.len() as u32], &x)?;
                    bins.update(&fx, x.len() as u32, inv_dx)?;
                    Ok((bins.starts.download()?, bins.order.download()?))
                };
                let (starts, order) = ok(name, run())?;
                let nbins =
                    (shape[0].div_ceil(block as u32) * shape[1].div_ceil(block as u32)) as usize;
                prop_assert_eq!(starts.len(), nbins + 1);
                let mut members = vec![Vec::new(); nbins];
                for (p, xp) in x.iter().enumerate() {
                    members[host_bin(*xp, inv_dx, shape, block as u32)].push(p as u32);
                }
                let mut at = 0u32;
                for (b, want) in members.iter().enumerate() {
                    prop_assert_eq!(starts[b], at, "{}: start of bin {}", name, b);
                    let mut got = order[starts[b] as usize..starts[b + 1] as usize].to_vec();
                    got.sort_unstable();
                    prop_assert_eq!(&got, want, "{}: members of bin {}", name, b);
                    at += want.len() as u32;
                }
                prop_assert_eq!(starts[nbins], x.len() as u32);
            }
            Ok(())
        },
    );
}

/// Stable bins list each bin's particles in increasing index order (the counting sort's
/// atomics leave them in the order the workers came), bins of a few to hundreds of
/// particles alike, on every backend.
#[test]
fn stable_bins_list_particles_by_index() {
    let shape = [40u32, 24];
    property(
        4,
        (vec2s(0.0, 1.5, 3000), 2i32..9),
        move |bk, (x, block)| {
            for (name, be) in [("cpu", &bk.cpu), ("vulkan", &bk.vk)] {
                let run = || -> Result<_> {
                    let mut bins = Bins::new(be, &shape, block, x.len() as u32)?.stable();
                    let fx = Field::from_slice(be, [x.len() as u32], &x)?;
                    bins.update(&fx, x.len() as u32, 16.0)?;
                    Ok((bins.starts.download()?, bins.order.download()?))
                };
                let (starts, order) = ok(name, run())?;
                let mut members = vec![Vec::new(); starts.len() - 1];
                for (p, xp) in x.iter().enumerate() {
                    members[host_bin(*xp, 16.0, shape, block as u32)].push(p as u32);
                }
                for (b, want) in members.iter().enumerate() {
                    let got = &order[starts[b] as usize..starts[b + 1] as usize];
                    prop_assert_eq!(got, &want[..], "{}: bin {}", name, b);
                }
            }
            Ok(())
        },
    );
}

// -----------------------------------------------------------------------------------------
// binned loops

/// A quadratic P2G over the bins, plus an add into a node far outside every window (the
/// grid's corner) and an integer counter of another shape.
#[kernel]
fn k_binned_p2g(
    x: &Field<Vec2>,
    v: &Field<Vec2>,
    order: &Field<u32>,
    starts: &Field<u32>,
    grid_mv: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    visits: &mut Field<u32>,
    inv_dx: f32,
    block: i32,
) {
    for p in grid_m.bins(order, starts, block) {
        let xp = x[p] * inv_dx;
        let base = (xp - 0.5).floor().as_ivec2();
        let fx = xp - base.as_vec2();
        let w = weights(fx);
        for i in 0..3 {
            for j in 0..3 {
                let off = ivec2(i, j);
                let weight = w[i].x * w[j].y;
                grid_mv[base + off] += weight * v[p];
                grid_m[base + off] += weight;
            }
        }
        grid_m[ivec2(0, 0)] += 1.0;
        grid_mv[ivec2(0, 0)] -= vec2(0.0, 1.0);
        visits[0] += 1u32;
    }
}

/// The same P2G as a plain particle loop.
#[kernel]
fn k_plain_p2g(
    x: &Field<Vec2>,
    v: &Field<Vec2>,
    grid_mv: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    inv_dx: f32,
    count: u32,
) {
    for p in 0..count {
        let xp = x[p] * inv_dx;
        let base = (xp - 0.5).floor().as_ivec2();
        let fx = xp - base.as_vec2();
        let w = weights(fx);
        for i in 0..3 {
            for j in 0..3 {
                let off = ivec2(i, j);
                let weight = w[i].x * w[j].y;
                grid_mv[base + off] += weight * v[p];
                grid_m[base + off] += weight;
            }
        }
        grid_m[ivec2(0, 0)] += 1.0;
        grid_mv[ivec2(0, 0)] -= vec2(0.0, 1.0);
    }
}

const RES: u32 = 24;

type Grids = (Vec<Vec2>, Vec<f32>, u32);

fn binned(
    be: &BackendRef,
    layout: Option<Layout<2>>,
    x: &[Vec2],
    v: &[Vec2],
    block: i32,
) -> Result<Grids> {
    let n = x.len() as u32;
    let fx = Field::from_slice(be, [n], x)?;
    let fv = Field::from_slice(be, [n], v)?;
    let mut bins = Bins::new(be, &[RES, RES], block, n)?;
    bins.update(&fx, n, RES as f32)?;
    let (mut gmv, mut gm) = match layout {
        None => (
            Field::<Vec2, 2>::new(be, [RES, RES])?,
            Field::<f32, 2>::new(be, [RES, RES])?,
        ),
        Some(l) => {
            let tree = Tree::new(be, l)?;
            (Field::place(&tree)?, Field::place(&tree)?)
        }
    };
    let mut visits = Field::<u32>::new(be, [1])?;
    k_binned_p2g(
        &fx,
        &fv,
        &bins.order,
        &bins.starts,
        &mut gmv,
        &mut gm,
        &mut visits,
        RES as f32,
        bins.block(),
    )?;
    Ok((gmv.download()?, gm.download()?, visits.download()?[0]))
}

/// Positions whose stencils stay inside the grid.
fn positions(n: usize) -> impl Strategy<Value = Vec<Vec2>> {
    vec2s(0.1, 0.9, n)
}

/// A binned P2G on the CPU and on Vulkan agrees with the plain loop's sums computed in f64
/// on the host (every particle visited once, the corner node's adds not lost) within the
/// order-independent bound 2 n 2^-24 sum |terms|.
#[test]
fn binned_p2g_matches_the_exact_sums() {
    let n = 1500usize;
    property(
        6,
        (positions(n), vec2s(-1.0, 1.0, n), 2i32..9),
        move |bk, (x, v, block)| {
            let mut exact = exact_p2g(&x, &v, RES);
            // The corner node's extra adds, once per particle.
            exact.m[0] += n as f64;
            exact.mv[0][1] -= n as f64;
            exact.mag[0] += 2.0 * n as f64;
            for (name, be) in [
                ("cpu", &bk.cpu),
                ("vulkan", &bk.vk),
                ("vulkan-cas", &bk.vk_cas),
            ] {
                let (gmv, gm, visits) = ok(name, binned(be, None, &x, &v, block))?;
                prop_assert_eq!(visits, n as u32, "{}: particles visited", name);
                exact.check(name, n, &gm, &gmv)?;
            }
            Ok(())
        },
    );
}

fn bits(g: &Grids) -> (Vec<u32>, Vec<u32>) {
    (
        g.0.iter()
            .flat_map(|v| [v.x.to_bits(), v.y.to_bits()])
            .collect(),
        g.1.iter().map(|m| m.to_bits()).collect(),
    )
}

/// On the CPU a binned loop gives the same bits with 1, 2 and 3 threads, on a dense grid and
/// on a `pointer -> dense` one, and the same bits on both (each node sums in a fixed order:
/// colour by colour, bin by bin, particle by particle).
#[test]
fn binned_scatter_is_bitwise_the_same_for_any_thread_count() {
    let mut g = Gen::new(11);
    let n = 4000;
    let x: Vec<Vec2> = g.many(n, |g| Vec2::new(g.f(0.1, 0.9), g.f(0.1, 0.5)));
    let v: Vec<Vec2> = g.many(n, |g| g.v2());
    let sparse = Layout::root().pointer([6, 6]).dense([4, 4]);
    let mut runs = Vec::new();
    for threads in [1, 2, 3] {
        let be: BackendRef = Arc::new(CpuBackend::with_threads(threads).expect("pool"));
        for layout in [None, Some(sparse.clone())] {
            let sparse_run = layout.is_some();
            let grids = binned(&be, layout, &x, &v, 4).expect("binned P2G");
            assert_eq!(grids.2, n as u32);
            runs.push((threads, sparse_run, bits(&grids)));
        }
    }
    let first = &runs[0].2;
    for (threads, sparse, b) in &runs {
        assert!(
            b == first,
            "{threads} threads, sparse {sparse}: the sums changed bits"
        );
    }
    // And the plain loop's shared atomics give the same sums to rounding.
    let be = mpm::backend::cpu();
    let fx = Field::from_slice(&be, [n as u32], &x).expect("x");
    let fv = Field::from_slice(&be, [n as u32], &v).expect("v");
    let mut gmv = Field::<Vec2, 2>::new(&be, [RES, RES]).expect("grid");
    let mut gm = Field::<f32, 2>::new(&be, [RES, RES]).expect("grid");
    k_plain_p2g(&fx, &fv, &mut gmv, &mut gm, RES as f32, n as u32).expect("plain P2G");
    let plain = gm.download().expect("grid");
    let binned_m: Vec<f32> = first.1.iter().map(|b| f32::from_bits(*b)).collect();
    for (k, (a, b)) in plain.iter().zip(&binned_m).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * a.abs().max(1.0),
            "node {k}: plain {a}, binned {b}"
        );
    }
}

/// Malformed bins are reported, not run past: `starts` with too few entries names `starts`.
#[test]
fn short_starts_are_an_out_of_bounds_error() {
    let be = mpm::backend::cpu();
    let x = Field::from_slice(&be, [1], &[Vec2::splat(0.5)]).expect("x");
    let v = Field::from_slice(&be, [1], &[Vec2::ZERO]).expect("v");
    let order = Field::from_slice(&be, [1], &[0u32]).expect("order");
    let starts = Field::from_slice(&be, [3], &[0u32, 1, 1]).expect("starts");
    let mut gmv = Field::<Vec2, 2>::new(&be, [RES, RES]).expect("grid");
    let mut gm = Field::<f32, 2>::new(&be, [RES, RES]).expect("grid");
    let mut visits = Field::<u32>::new(&be, [1]).expect("visits");
    let e = k_binned_p2g(
        &x,
        &v,
        &order,
        &starts,
        &mut gmv,
        &mut gm,
        &mut visits,
        RES as f32,
        4,
    )
    .expect_err("36 bins need 37 starts");
    assert!(e.to_string().contains("starts"), "{e}");
}

/// Bins left stale by `Bins::refresh` still run every particle once: after the particles
/// moved by up to three cells (most adds now fall outside their block's window and take the
/// queued path), the binned P2G still matches the plain loop's sums; and a changed particle
/// count rebins at once.
#[test]
fn stale_bins_stay_exact_and_a_new_count_rebins() {
    let mut g = Gen::new(5);
    let n = 3000;
    let x0: Vec<Vec2> = g.many(n, |g| Vec2::new(g.f(0.25, 0.75), g.f(0.25, 0.75)));
    let moved: Vec<Vec2> = x0
        .iter()
        .map(|p| *p + Vec2::new(g.f(-3.0, 3.0), g.f(-3.0, 3.0)) / RES as f32)
        .collect();
    let v: Vec<Vec2> = g.many(n, |g| g.v2() * 0.01);
    let be: BackendRef = Arc::new(CpuBackend::with_threads(2).expect("pool"));
    let fx0 = Field::from_slice(&be, [n as u32], &x0).expect("x");
    let fx = Field::from_slice(&be, [n as u32], &moved).expect("x");
    let fv = Field::from_slice(&be, [n as u32], &v).expect("v");
    let mut bins = Bins::new(&be, &[RES, RES], 4, 1).expect("bins");
    bins.refresh(&fx0, n as u32, RES as f32, 1000).expect("bin");
    // Same count, `every` not reached: the bins stay those of the old positions.
    bins.refresh(&fx, n as u32, RES as f32, 1000)
        .expect("refresh");
    let mut gmv = Field::<Vec2, 2>::new(&be, [RES, RES]).expect("grid");
    let mut gm = Field::<f32, 2>::new(&be, [RES, RES]).expect("grid");
    let mut visits = Field::<u32>::new(&be, [1]).expect("visits");
    let (order, starts) = (
        bins.order.download().expect("order"),
        bins.starts.download().expect("starts"),
    );
    let stale = (0..n).filter(|&p| {
        let b = host_bin(moved[p], RES as f32, [RES, RES], 4);
        !order[starts[b] as usize..starts[b + 1] as usize].contains(&(p as u32))
    });
    assert!(
        stale.count() > n / 4,
        "the test should move many particles out of their bins"
    );
    k_binned_p2g(
        &fx,
        &fv,
        &bins.order,
        &bins.starts,
        &mut gmv,
        &mut gm,
        &mut visits,
        RES as f32,
        bins.block(),
    )
    .expect("binned P2G");
    assert_eq!(visits.download().expect("visits")[0], n as u32);
    let mut pmv = Field::<Vec2, 2>::new(&be, [RES, RES]).expect("grid");
    let mut pm = Field::<f32, 2>::new(&be, [RES, RES]).expect("grid");
    k_plain_p2g(&fx, &fv, &mut pmv, &mut pm, RES as f32, n as u32).expect("plain P2G");
    let (a, b) = (gm.download().expect("grid"), pm.download().expect("grid"));
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-4 * x.abs().max(1.0),
            "node {k}: binned {x}, plain {y}"
        );
    }
    // More particles: rebinned whatever `every` says.
    let more: Vec<Vec2> = moved.iter().chain(&moved[..100]).copied().collect();
    let fmore = Field::from_slice(&be, [more.len() as u32], &more).expect("x");
    bins.refresh(&fmore, more.len() as u32, RES as f32, 1000)
        .expect("refresh");
    let starts = bins.starts.download().expect("starts");
    assert_eq!(*starts.last().expect("starts"), more.len() as u32);
}
