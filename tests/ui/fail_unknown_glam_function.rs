//! A glam associated function outside the language (`Vec2::from_angle`).
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::glam::Vec2;
use mpm::{kernel, Field};

#[kernel]
fn rotate(x: &mut Field<Vec2>, angle: f32) {
    for i in x.indices() {
        x[i] = Vec2::from_angle(angle);
    }
}

fn main() {}
