//! A top-level loop over a range without an end: a parallel range has both.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn upto(x: &mut Field<f32>, n: i32) {
    for i in n.. {
        x[i] = 1.0;
    }
}

fn main() {}
