//! Block loops (`for b in blocks(a..b)`): `shared` arrays, `lanes` loops and their
//! barriers, on the CPU (one worker per block, the lanes in order) and on Vulkan (one
//! workgroup per block, the array in workgroup memory), checked against host models: a
//! block-local P2G against the exact sums, and an integer kernel that uses every rule
//! exactly.

mod common;

use common::*;
use mpm::core::binning::Bins;
use mpm::core::Result;
use mpm::glam::{IVec2, Vec2};
use mpm::{kernel, BackendRef, Field};
use proptest::collection::vec;
use proptest::prelude::*;

// -----------------------------------------------------------------------------------------
// a block-local P2G

/// Cells per block side, and the side of a block's tile: the quadratic stencils of the
/// block's particles reach one node before it and two after.
const B: i32 = 4;
const SIDE: i32 = B + 3;
const TILE: usize = (SIDE * SIDE) as usize;
const RES: u32 = 26;

/// Each block scatters its particles into shared tiles, then adds the tiles into the grid,
/// one lane per node: the grid sees one add per node and block instead of one per particle.
#[kernel]
fn k_tile_p2g(
    x: &Field<Vec2>,
    v: &Field<Vec2>,
    order: &Field<u32>,
    starts: &Field<u32>,
    grid_mv: &mut Field<Vec2, 2>,
    grid_m: &mut Field<f32, 2>,
    inv_dx: f32,
    blocks_y: i32,
    bins: u32,
) {
    'p2g: for b in blocks(0..bins) {
        let (first, end) = (starts[b], starts[b + 1]);
        if first == end {
            continue;
        }
        let origin = ivec2(b as i32 / blocks_y, b as i32 % blocks_y) * B - IVec2::ONE;
        let tile_m = shared([0.0f32; TILE]);
        let tile_mv = shared([Vec2::ZERO; TILE]);
        for k in lanes(first..end) {
            let p = order[k];
            let xp = x[p] * inv_dx;
            let base = (xp - 0.5).floor().as_ivec2();
            let w = weights(xp - base.as_vec2());
            for i in 0..3 {
                for j in 0..3 {
                    let node = base + ivec2(i, j) - origin;
                    let t = node.x * SIDE + node.y;
                    let weight = w[i].x * w[j].y;
                    tile_m[t] += weight;
                    tile_mv[t] += weight * v[p];
                }
            }
        }
        for t in lanes(0..SIDE * SIDE) {
            let m = tile_m[t];
            if m != 0.0 {
                let node = origin + ivec2(t / SIDE, t % SIDE);
                grid_m[node] += m;
                grid_mv[node] += tile_mv[t];
            }
        }
    }
}

fn tile_p2g(be: &BackendRef, x: &[Vec2], v: &[Vec2]) -> Result<(Vec<Vec2>, Vec<f32>)> {
    let n = x.len() as u32;
    let fx = Field::from_slice(be, [n], x)?;
    let fv = Field::from_slice(be, [n], v)?;
    let mut bins = Bins::new(be, &[RES, RES], B, n)?;
    bins.update(&fx, n, RES as f32)?;
    let mut gmv = Field::<Vec2, 2>::new(be, [RES, RES])?;
    let mut gm = Field::<f32, 2>::new(be, [RES, RES])?;
    let blocks_y = RES.div_ceil(B as u32);
    k_tile_p2g(
        &fx,
        &fv,
        &bins.order,
        &bins.starts,
        &mut gmv,
        &mut gm,
        RES as f32,
        blocks_y as i32,
        blocks_y * blocks_y,
    )?;
    Ok((gmv.download()?, gm.download()?))
}

fn vec2s(lo: f32, hi: f32, n: usize) -> impl Strategy<Value = Vec<Vec2>> {
    vec((lo..hi, lo..hi).prop_map(|(x, y)| Vec2::new(x, y)), n)
}

/// The tiled P2G on the CPU, on Vulkan and on its compare-and-swap fallback gives the
/// particle-by-particle sums computed in f64 on the host, within the order-independent
/// bound 2 n 2^-24 sum |terms| (every particle in exactly one tile, no add lost in the
/// workgroup's atomics or the flush).
#[test]
fn tiled_p2g_matches_the_exact_sums() {
    let n = 1200usize;
    property(
        6,
        (vec2s(0.1, 0.9, n), vec2s(-1.0, 1.0, n)),
        move |bk, (x, v)| {
            let exact = exact_p2g(&x, &v, RES);
            for (name, be) in [
                ("cpu", &bk.cpu),
                ("vulkan", &bk.vk),
                ("vulkan-cas", &bk.vk_cas),
            ] {
                let (gmv, gm) = ok(name, tile_p2g(be, &x, &v))?;
                exact.check(name, n, &gm, &gmv)?;
            }
            Ok(())
        },
    );
}

// -----------------------------------------------------------------------------------------
// every rule, exactly

const NKEYS: i32 = 8;
const KEYS: usize = NKEYS as usize;

/// Per block: a histogram of its keys in a shared array (key 7 skipped with `continue`),
/// signed sums with `-=`, a doubling with `*=` one lane per element over an `i32` range with
/// a negative start, a block-scope read of the shared array between `lanes` loops, a fill
/// value other than zero, an index past the end (clamped, as for local arrays), and an empty
/// block that ends at once with `continue`.
#[kernel]
fn k_histogram(
    keys: &Field<u32>,
    starts: &Field<u32>,
    hist: &mut Field<u32, 2>,
    sums: &mut Field<i32>,
    last: &mut Field<f32>,
    lo: i32,
    bins: u32,
) {
    for b in blocks(0..bins) {
        let (first, end) = (starts[b], starts[b + 1]);
        if first == end {
            continue;
        }
        let counts = shared([0u32; KEYS]);
        let acc = shared([0i32; 4]);
        let seen = shared([-1.5f32; KEYS]);
        for k in lanes(first..end) {
            let key = keys[k];
            if key == 7 {
                continue;
            }
            counts[key] += 1;
            acc[key % 4] -= key as i32;
        }
        for i in lanes(lo..=lo + 3) {
            acc[i - lo] *= 2;
        }
        let low = counts[0] + counts[1];
        for c in lanes(0..NKEYS) {
            hist[ivec2(b as i32, c)] = counts[c] + low;
            if c < 6 {
                seen[c] = counts[c] as f32;
            }
        }
        for c in lanes(0u32..4) {
            sums[b * 4 + c] = acc[c];
        }
        for _once in lanes(0..1) {
            last[b] = seen[5] + seen[100];
        }
    }
}

/// The histogram kernel's outputs computed on the host.
fn histogram_model(keys: &[u32], starts: &[u32]) -> (Vec<u32>, Vec<i32>, Vec<f32>) {
    let bins = starts.len() - 1;
    let (mut hist, mut sums, mut last) = (
        vec![0u32; bins * KEYS],
        vec![0i32; bins * 4],
        vec![0f32; bins],
    );
    for b in 0..bins {
        let block = &keys[starts[b] as usize..starts[b + 1] as usize];
        if block.is_empty() {
            continue;
        }
        let mut counts = [0u32; KEYS];
        let mut acc = [0i32; 4];
        for &k in block.iter().filter(|&&k| k != 7) {
            counts[k as usize] += 1;
            acc[k as usize % 4] -= k as i32;
        }
        for c in 0..KEYS {
            hist[b * KEYS + c] = counts[c] + counts[0] + counts[1];
        }
        for c in 0..4 {
            sums[b * 4 + c] = 2 * acc[c];
        }
        // seen[7] keeps its fill value: only elements below 6 are written.
        last[b] = counts[5] as f32 + -1.5;
    }
    (hist, sums, last)
}

fn histogram(
    be: &BackendRef,
    keys: &[u32],
    starts: &[u32],
    lo: i32,
) -> Result<(Vec<u32>, Vec<i32>, Vec<f32>)> {
    let bins = starts.len() as u32 - 1;
    let fk = Field::from_slice(be, [keys.len() as u32], keys)?;
    let fs = Field::from_slice(be, [starts.len() as u32], starts)?;
    let mut hist = Field::<u32, 2>::new(be, [bins, KEYS as u32])?;
    let mut sums = Field::<i32>::new(be, [bins * 4])?;
    let mut last = Field::<f32>::new(be, [bins])?;
    k_histogram(&fk, &fs, &mut hist, &mut sums, &mut last, lo, bins)?;
    Ok((hist.download()?, sums.download()?, last.download()?))
}

/// Blocks of 0 to 300 keys (more than a workgroup's lanes, so lanes take several
/// iterations, and empty blocks): every backend gives the host model's values exactly.
#[test]
fn lanes_and_shared_arrays_follow_the_rules_exactly() {
    property(
        8,
        (vec(0usize..300, 1..12), any::<u64>(), -50i32..50),
        |bk, (sizes, seed, lo)| {
            let mut starts = vec![0u32];
            for s in &sizes {
                starts.push(starts.last().copied().unwrap_or(0) + *s as u32);
            }
            let mut gen = Gen::new(seed);
            let n = *starts.last().unwrap_or(&0) as usize;
            let keys: Vec<u32> = (0..n.max(1)).map(|_| gen.u() % KEYS as u32).collect();
            let want = histogram_model(&keys, &starts);
            for (name, be) in [
                ("cpu", &bk.cpu),
                ("vulkan", &bk.vk),
                ("vulkan-cas", &bk.vk_cas),
            ] {
                let got = ok(name, histogram(be, &keys, &starts, lo))?;
                prop_assert_eq!(&got.0, &want.0, "{}: histograms", name);
                prop_assert_eq!(&got.1, &want.1, "{}: sums", name);
                prop_assert_eq!(&got.2, &want.2, "{}: last", name);
            }
            Ok(())
        },
    );
}

/// More shared memory than the device has (256 KiB: GPUs allow 32 to 64 KiB per block) is
/// refused before anything runs, naming the kernel, the loop and the sizes; the CPU, whose
/// blocks live on a worker's stack, runs it (up to 1 MiB: a larger array does not compile).
#[kernel]
fn k_huge_tile(out: &mut Field<f32>) {
    for _b in blocks(0..1) {
        let tile = shared([1.0f32; 1 << 16]);
        for i in lanes(0..1) {
            out[i] = tile[i];
        }
    }
}

#[test]
fn too_much_shared_memory_is_named() {
    with_backends(|bk| {
        let mut out = Field::<f32>::new(&bk.vk, [1]).expect("field");
        let e = k_huge_tile(&mut out)
            .expect_err("256 KiB of shared memory")
            .to_string();
        assert!(
            e.contains("k_huge_tile") && e.contains("262144 bytes") && e.contains("allows"),
            "{e}"
        );
        let mut out = Field::<f32>::new(&bk.cpu, [1]).expect("field");
        k_huge_tile(&mut out).expect("the CPU runs it");
        assert_eq!(out.download().expect("out"), [1.0]);
    });
}
