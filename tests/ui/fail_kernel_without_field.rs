//! A kernel with no field parameter: it would have no backend to run on.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::kernel;

#[kernel]
fn nothing_to_run_on(n: i32, dt: f32) {
    for i in 0..n {
        let t = dt * (i as f32);
    }
}

fn main() {}
