//! A method outside the language (`.lerp`): the error names it and the module of the
//! language's methods (`mpm_core::builtins::methods`, whose docs list them).

use mpm::glam::Vec2;
use mpm::{kernel, Field};

#[kernel]
fn lerp_all(x: &mut Field<Vec2>, t: f32) {
    for i in x.indices() {
        x[i] = x[i].lerp(Vec2::ZERO, t);
    }
}

fn main() {}
