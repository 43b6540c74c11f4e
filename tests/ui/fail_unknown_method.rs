//! A method outside the language (`.lerp`): the message lists the known methods.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::glam::Vec2;
use mpm::{kernel, Field};

#[kernel]
fn lerp_all(x: &mut Field<Vec2>, t: f32) {
    for i in x.indices() {
        x[i] = x[i].lerp(Vec2::ZERO, t);
    }
}

fn main() {}
