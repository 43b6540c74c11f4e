//! A top-level loop over an array: parallel loops run over `field.indices()` or `a..b`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn three(x: &mut Field<f32>) {
    for i in [0, 1, 2] {
        x[i] = 1.0;
    }
}

fn main() {}
