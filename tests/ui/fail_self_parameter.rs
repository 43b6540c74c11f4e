//! A func with a `self` receiver: kernels and funcs are free functions.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::func;

struct Particle;

impl Particle {
    #[func]
    fn mass(&self) -> f32 {
        1.0
    }
}

fn main() {}
