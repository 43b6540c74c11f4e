//! A statement other than `let` or `for` at the top level of a kernel.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn serial_store(x: &mut Field<f32>) {
    x[0] = 1.0;
    for i in x.indices() {
        x[i] = 2.0;
    }
}

fn main() {}
