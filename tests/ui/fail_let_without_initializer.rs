//! `let` without an initial value or a type.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn late_init(x: &mut Field<f32>) {
    for i in x.indices() {
        let a;
        a = 1.0;
        x[i] = a;
    }
}

fn main() {}
