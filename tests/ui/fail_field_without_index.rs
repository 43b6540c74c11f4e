//! A field used as a value without an index.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn copy(x: &mut Field<f32>, y: &Field<f32>) {
    for i in x.indices() {
        let all = y;
        x[i] = 1.0;
    }
}

fn main() {}
