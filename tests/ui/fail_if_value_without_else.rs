//! An `if` used as a value without `else`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn positive(x: &mut Field<f32>) {
    for i in x.indices() {
        let y = if x[i] > 0.0 { 1.0 };
        x[i] = y;
    }
}

fn main() {}
