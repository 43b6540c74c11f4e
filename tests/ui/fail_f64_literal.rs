//! An f64 literal: kernel floats are f32.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn set(x: &mut Field<f32>) {
    for i in x.indices() {
        x[i] = 0.5f64;
    }
}

fn main() {}
