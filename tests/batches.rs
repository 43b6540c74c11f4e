//! Batches of launches (`mpm::core::batched`): a GPU backend records the launches of a batch
//! into one submission. Whatever it defers, the results, the errors a kernel reports, the
//! fields a batch uses and the per-loop profile must be those of launches run one by one.

use mpm::core::{batched, Error, Tree};
use mpm::glam::{ivec2, IVec2};
use mpm::{kernel, BackendRef, Field, Layout};

mod backends;

/// One step of a ping-pong between two fields (as mpm99 swaps its grids): `to` from `from`,
/// then a second loop that reads what the first wrote.
#[kernel]
fn k_step(from: &Field<f32>, to: &mut Field<f32>, total: &mut Field<f32>, n: u32, k: u32) {
    'next: for i in 0..n {
        to[i] = 0.5 * from[i] + from[(i + 1) % n] + k as f32;
    }
    'sum: for i in 0..1u32 {
        let mut s = total[i];
        for j in 0..n {
            s += to[j] * 1e-3;
        }
        total[i] = s;
    }
}

/// `k_step`'s loops under a name of their own, for the profile's count.
#[kernel]
fn k_counted(from: &Field<f32>, to: &mut Field<f32>, total: &mut Field<f32>, k: u32) {
    'next: for i in to.indices() {
        to[i] = from[i] + k as f32;
    }
    'sum: for i in 0..1u32 {
        total[i] += to[0];
    }
}

#[kernel]
fn k_oob(src: &Field<f32>, dst: &mut Field<f32, 2>, shift: i32) {
    for i in src.indices() {
        dst[ivec2(i as i32 + shift, 0)] = src[i];
    }
}

/// Adds one to every cell of a sparse field that a host list names (activating it).
#[kernel]
fn k_touch(cells: &Field<IVec2>, grid: &mut Field<f32, 2>) {
    for i in cells.indices() {
        grid[cells[i]] += 1.0;
    }
}

/// `steps` ping-pong steps, launched as they come or as one batch; the two fields and the
/// running total afterwards.
fn ping_pong(be: &BackendRef, steps: u32, batch: bool) -> Result<Vec<Vec<f32>>, Error> {
    let start: Vec<f32> = (0..97).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut a = Field::<f32>::from_slice(be, [97], &start)?;
    let mut b = Field::<f32>::new(be, [97])?;
    let mut total = Field::<f32>::new(be, [1])?;
    let mut run = || -> Result<(), Error> {
        for k in 0..steps {
            k_step(&a, &mut b, &mut total, 97, k)?;
            std::mem::swap(&mut a, &mut b);
        }
        Ok(())
    };
    match batch {
        true => batched(be.as_ref(), run)?,
        false => run()?,
    }
    Ok(vec![a.download()?, b.download()?, total.download()?])
}

/// More launches than one submission holds (64), with alternating bindings: the same bits
/// as launched one by one.
fn batched_launches_match_immediate_ones(be: &BackendRef) {
    let one_by_one = ping_pong(be, 150, false).expect("immediate launches");
    let batch = ping_pong(be, 150, true).expect("a batch");
    assert_eq!(one_by_one, batch);
}

/// A read inside a batch sees every launch before it; so does a launch on a sparse tree,
/// which runs at once (the host grows its pool after it), between batched launches.
fn reads_and_sparse_launches_inside_a_batch_see_earlier_launches(be: &BackendRef) {
    let mut a = Field::<f32>::from_slice(be, [8], &[1.0; 8]).expect("a");
    let mut b = Field::<f32>::new(be, [8]).expect("b");
    let mut total = Field::<f32>::new(be, [1]).expect("total");
    let tree = Tree::new(be, Layout::root().pointer([4, 4]).dense([4, 4])).expect("tree");
    let mut grid = Field::<f32, 2>::place(&tree).expect("grid");
    let cells = Field::<IVec2>::from_slice(be, [3], &[ivec2(0, 0), ivec2(9, 9), ivec2(9, 9)])
        .expect("cells");
    batched(be.as_ref(), || -> Result<(), Error> {
        k_step(&a, &mut b, &mut total, 8, 1)?;
        assert_eq!(b.download()?, vec![2.5; 8], "a read after a batched launch");
        k_touch(&cells, &mut grid)?;
        k_step(&b, &mut a, &mut total, 8, 2)?;
        k_touch(&cells, &mut grid)?;
        Ok(())
    })
    .expect("the batch");
    assert_eq!(a.download().unwrap(), vec![5.75; 8]);
    let g = grid.download().expect("grid");
    assert_eq!((g[0], g[9 * 16 + 9], g[5]), (2.0, 4.0, 0.0));
}

/// A kernel that fails inside a batch is reported, naming it and its field (not a kernel
/// launched before or after it), when the batch ends; the next batch starts clean.
fn an_error_in_a_batch_names_its_kernel(be: &BackendRef) {
    let src = Field::<f32>::from_slice(be, [16], &[1.0; 16]).expect("src");
    let mut dst = Field::<f32, 2>::new(be, [16, 1]).expect("dst");
    let mut a = Field::<f32>::new(be, [4]).expect("a");
    let mut total = Field::<f32>::new(be, [1]).expect("total");
    let got = batched(be.as_ref(), || -> Result<(), Error> {
        k_step(&src, &mut a, &mut total, 4, 0)?;
        k_oob(&src, &mut dst, 0)?;
        k_oob(&src, &mut dst, 3)?;
        k_step(&src, &mut a, &mut total, 4, 0)?;
        Ok(())
    });
    match got {
        Err(Error::OutOfBounds { kernel, field }) => {
            assert!(kernel.ends_with("k_oob"), "{kernel}");
            assert_eq!(field, "dst");
        }
        other => panic!("expected an out-of-bounds error, got {other:?}"),
    }
    batched(be.as_ref(), || k_oob(&src, &mut dst, 0)).expect("a clean batch after it");
    assert_eq!(dst.download().unwrap(), vec![1.0; 16]);
}

/// Fields dropped while a batch still holds their launches stay alive until those ran; and
/// batches nest, the outer end waiting for both.
fn dropped_fields_and_nested_batches(be: &BackendRef) {
    let mut out = Field::<f32>::new(be, [32]).expect("out");
    let mut total = Field::<f32>::new(be, [1]).expect("total");
    batched(be.as_ref(), || -> Result<(), Error> {
        for k in 0..5 {
            let from = Field::<f32>::from_slice(be, [32], &[k as f32; 32])?;
            batched(be.as_ref(), || k_step(&from, &mut out, &mut total, 32, 0))?;
        }
        Ok(())
    })
    .expect("the batch");
    assert_eq!(out.download().unwrap(), vec![6.0; 32]);
}

/// The profile counts every loop of every launch of a batch, once (the other checks of this
/// suite, which may run meanwhile, launch other kernels).
fn the_profile_counts_batched_loops(be: &BackendRef) {
    let mut a = Field::<f32>::new(be, [8]).expect("a");
    let mut b = Field::<f32>::new(be, [8]).expect("b");
    let mut total = Field::<f32>::new(be, [1]).expect("total");
    be.reset_profile();
    batched(be.as_ref(), || -> Result<(), Error> {
        for k in 0..70 {
            k_counted(&a, &mut b, &mut total, k)?;
            std::mem::swap(&mut a, &mut b);
        }
        Ok(())
    })
    .expect("the batch");
    let mut calls: Vec<(String, u64)> = be
        .profile()
        .into_iter()
        .filter(|t| t.kernel.ends_with("k_counted"))
        .map(|t| (t.name, t.calls))
        .collect();
    calls.sort();
    assert_eq!(calls, vec![("next".into(), 70), ("sum".into(), 70)]);
}

per_backend! {
    batched_launches_match_immediate_ones => batched_launches_match_immediate_ones,
    reads_and_sparse_launches_inside_a_batch_see_earlier_launches =>
        reads_and_sparse_launches_inside_a_batch_see_earlier_launches,
    an_error_in_a_batch_names_its_kernel => an_error_in_a_batch_names_its_kernel,
    dropped_fields_and_nested_batches => dropped_fields_and_nested_batches,
    the_profile_counts_batched_loops => the_profile_counts_batched_loops,
}
