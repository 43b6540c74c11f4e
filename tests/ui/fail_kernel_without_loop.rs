//! A kernel with no top-level `for` loop: nothing to launch.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn no_launch(x: &mut Field<f32>) {
    let a = 1.0;
}

fn main() {}
