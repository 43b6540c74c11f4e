//! A `&Field` parameter is read-only: stores, `+=`, `atomic_add` and activation need
//! `&mut Field`.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn writes_shared(x: &Field<f32>, counts: &Field<u32>, grid: &Field<f32, 2>, out: &mut Field<f32>) {
    for i in out.indices() {
        x[i] = 1.0;
        x[i] += 2.0;
        let old = atomic_add(counts, i, 1u32);
        activate(grid, ivec2(0, 0));
        out[i] = x[i] + old as f32;
    }
}

fn main() {}
