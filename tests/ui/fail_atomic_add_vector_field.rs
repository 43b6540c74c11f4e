//! `atomic_add` returning the old value works on one-word scalar fields only.
#![allow(unused_imports)]

use mpm::glam::Vec2;
use mpm::{kernel, Field};

#[kernel]
fn fetch_vector(sums: &mut Field<Vec2>, out: &mut Field<Vec2>) {
    for i in out.indices() {
        let old = atomic_add(sums, 0u32, Vec2::ONE);
        out[i] = old;
    }
}

fn main() {}
