//! A top-level loop over `indices()` of something that is not a field parameter.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn over_scalar(x: &mut Field<f32>, n: i32) {
    for i in n.indices() {
        x[i] = 1.0;
    }
}

fn main() {}
