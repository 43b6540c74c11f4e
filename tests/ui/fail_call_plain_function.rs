//! A kernel calling a Rust function that is not a `#[func]`: rustc's resolution error (a func
//! is a function and a module of the same name, whose `expand` traces it), which a macro
//! cannot reword; it names the function and says it is not a module.
#![allow(unused_imports)]

use mpm::{kernel, Field};

fn helper(a: f32) -> f32 {
    a * 2.0
}

#[kernel]
fn calls(x: &mut Field<f32>) {
    for i in x.indices() {
        x[i] = helper(x[i]);
    }
}

fn main() {}
