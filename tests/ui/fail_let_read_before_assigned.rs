//! A `let` without a value read on a path that did not assign it: rustc's own check, on the
//! CPU lowering, at the read.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn maybe(x: &mut Field<f32>) {
    for i in x.indices() {
        let y: f32;
        if x[i] > 0.0 {
            y = 1.0;
        }
        x[i] = y;
    }
}

fn main() {}
