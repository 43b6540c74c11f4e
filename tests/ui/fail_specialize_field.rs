//! `#[specialize]` is for scalars, not fields.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn copy(#[specialize] a: &Field<i32>, out: &mut Field<i32>) {
    for i in out.indices() {
        out[i] = a[i];
    }
}

fn main() {}
