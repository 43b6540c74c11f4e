//! `as` to a vector type: only f32, i32 and u32; vectors use `as_vec2()` and friends.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::glam::{IVec2, Vec2};
use mpm::{kernel, Field};

#[kernel]
fn to_float(x: &mut Field<Vec2>, cells: &Field<IVec2>) {
    for i in x.indices() {
        x[i] = cells[i] as Vec2;
    }
}

fn main() {}
