//! A closure in a kernel: write a #[func] instead.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn double(x: &mut Field<f32>) {
    for i in x.indices() {
        let twice = |a: f32| a * 2.0;
        x[i] = twice(x[i]);
    }
}

fn main() {}
