//! A top-level `let` runs before every parallel loop, so it cannot read a field that an
//! earlier loop may have written.
#![allow(unused_imports)]
use mpm::{kernel, Field};

#[kernel]
fn k(acc: &mut Field<f32, 0>, out: &mut Field<f32>) {
    let start = acc[()];
    for i in out.indices() {
        out[i] = start;
    }
}

fn main() {}
