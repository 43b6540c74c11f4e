//! `break` in a func outside any loop.
#![allow(unused_imports)]
use mpm::func;

#[func]
fn f(a: f32) -> f32 {
    if a > 0.0 {
        break;
    }
    a
}

fn main() {}
