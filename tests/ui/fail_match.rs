//! `match` in a kernel: use `if` / `else`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn pick(x: &mut Field<f32>, mode: i32) {
    for i in x.indices() {
        x[i] = match mode {
            0 => 1.0,
            _ => 2.0,
        };
    }
}

fn main() {}
