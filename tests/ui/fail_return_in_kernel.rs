//! `return` in a kernel: use `continue` to end a parallel iteration.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn skip_negative(x: &mut Field<f32>) {
    for i in x.indices() {
        if x[i] < 0.0 {
            return;
        }
        x[i] = 1.0;
    }
}

fn main() {}
