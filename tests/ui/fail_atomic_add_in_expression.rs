//! `atomic_add(f, i, v)` returns the old value only as the whole value of a `let`: inside an
//! expression its evaluation order would differ between the lowerings.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn fetch_in_expression(counts: &mut Field<u32>, out: &mut Field<u32>) {
    for i in out.indices() {
        out[i] = atomic_add(counts, i % 4u32, 1u32) + 1u32;
    }
}

fn main() {}
