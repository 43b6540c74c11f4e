//! An f64 local: the language's floats are f32.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn wide(x: &mut Field<f32>) {
    for i in x.indices() {
        let a: f64 = 1.0;
        x[i] = a as f32;
    }
}

fn main() {}
