//! A string literal: only number and bool literals.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn named(x: &mut Field<f32>) {
    for i in x.indices() {
        let name = "particle";
        x[i] = 1.0;
    }
}

fn main() {}
