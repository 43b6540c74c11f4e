//! A func that calls itself: GPUs have no call stack.
#![allow(unused_imports)]

use mpm::func;

#[func]
fn factorial(n: i32) -> i32 {
    if n <= 1 {
        1
    } else {
        n * factorial(n - 1)
    }
}

fn main() {}
