//! A generic kernel.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn fill<T: Copy>(x: &mut Field<f32>, value: f32) {
    for i in x.indices() {
        x[i] = value;
    }
}

fn main() {}
