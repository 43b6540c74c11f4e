//! Scalar parameters have the language's element types.
#![allow(unused_imports)]
use mpm::{kernel, Field};

#[kernel]
fn k(x: &mut Field<f32>, s: f64) {
    for i in x.indices() {
        x[i] = 1.0;
    }
}

fn main() {}
