//! An unknown vector component (`.u`).
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::glam::Vec2;
use mpm::{kernel, Field};

#[kernel]
fn component(x: &mut Field<Vec2>, y: &mut Field<f32>) {
    for i in x.indices() {
        y[i] = x[i].u;
    }
}

fn main() {}
