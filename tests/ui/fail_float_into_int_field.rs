//! A type error both lowerings report: an f32 literal stored into an i32 field (the trace
//! lowering's `IntoExpr<i32>` bound and the CPU lowering's `store`, both at the literal).
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn set(x: &mut Field<i32>) {
    for i in x.indices() {
        x[i] = 1.5;
    }
}

fn main() {}
