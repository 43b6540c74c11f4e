//! An i64 literal suffix: kernel integers are i32 or u32.
// (On error the attribute emits only the error, so the imports would warn as unused.)
#![allow(unused_imports)]

use mpm::{kernel, Field};

#[kernel]
fn set(x: &mut Field<i32>) {
    for i in x.indices() {
        x[i] = 7i64;
    }
}

fn main() {}
