//! A func without a return type: funcs return a value and cannot write fields.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::func;

#[func]
fn side_effect(a: f32) {
    let b = a * 2.0;
}

fn main() {}
