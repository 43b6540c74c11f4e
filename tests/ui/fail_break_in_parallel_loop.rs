//! `break` directly in a parallel loop: the message points to `continue`.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn stop_early(x: &mut Field<f32>) {
    for i in x.indices() {
        if x[i] < 0.0 {
            break;
        }
        x[i] = 1.0;
    }
}

fn main() {}
