//! `#[specialize]` marks kernel parameters; funcs are compiled into their kernels' code.
#![allow(unused_imports)]

use mpm::{func, Field};

#[func]
fn twice(#[specialize] x: i32) -> i32 {
    x * 2
}

fn main() {}
