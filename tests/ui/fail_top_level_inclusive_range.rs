//! A top-level loop over an inclusive range `a..=b`: parallel ranges are `a..b`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn upto(x: &mut Field<f32>, n: i32) {
    for i in 0..=n {
        x[i] = 1.0;
    }
}

fn main() {}
