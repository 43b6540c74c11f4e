//! A `#[specialize]` parameter is a constant of the launch: the body cannot assign it.
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn counted(out: &mut Field<i32>, #[specialize] mut n: i32) {
    for i in out.indices() {
        n = n + 1;
        out[i] = n;
    }
}

fn main() {}
