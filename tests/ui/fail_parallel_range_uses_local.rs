//! The bounds of a parallel range are computed on the host: only scalar parameters, literals
//! and constants may appear there, not a top-level `let`.
#![allow(unused_imports)]
use mpm::{kernel, Field};

#[kernel]
fn k(x: &mut Field<f32>, n: i32) {
    let half = n / 2;
    for i in 0..half {
        x[i] = 1.0;
    }
}

fn main() {}
