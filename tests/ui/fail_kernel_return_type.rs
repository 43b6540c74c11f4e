//! A kernel with a return type: results are written into fields.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn total(x: &mut Field<f32>) -> f32 {
    for i in x.indices() {
        x[i] = 1.0;
    }
}

fn main() {}
