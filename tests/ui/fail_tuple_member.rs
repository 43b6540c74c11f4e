//! Tuple member access `t.0`: tuples are read by destructuring.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn pair(x: &mut Field<f32>) {
    for i in x.indices() {
        let t = (x[i], 2.0);
        x[i] = t.0;
    }
}

fn main() {}
