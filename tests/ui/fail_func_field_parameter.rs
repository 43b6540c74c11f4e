//! A func taking a field (a reference): funcs take values.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{func, Field};

#[func]
fn first(x: &Field<f32>) -> f32 {
    x[0]
}

fn main() {}
