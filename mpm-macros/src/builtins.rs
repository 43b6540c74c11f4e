//! The glam names the kernel language knows: types, components, constructors.
//!
//! Builtin functions need no list here: they are func-shaped items of
//! `mpm_core::builtins`, glob-imported into every body, and calls of them lower like calls of
//! user funcs.

/// glam types whose associated functions and constants kernels may use.
pub const TYPES: &[&str] = &[
    "Vec2", "Vec3", "Vec4", "IVec2", "IVec3", "UVec2", "UVec3", "Mat2", "Mat3",
];

/// Component names and their numbers.
pub fn member(name: &str) -> Option<u32> {
    Some(match name {
        "x" | "x_axis" => 0,
        "y" | "y_axis" => 1,
        "z" | "z_axis" => 2,
        "w" | "w_axis" => 3,
        _ => return None,
    })
}

/// `Vec2::new` -> `vec2`, `Mat2::from_cols` -> `mat2`.
pub fn constructor(ty: &str, f: &str) -> Option<String> {
    let lower = ty.to_ascii_lowercase();
    match f {
        "new" if !ty.starts_with("Mat") => Some(lower),
        "from_cols" if ty.starts_with("Mat") => Some(lower),
        _ => None,
    }
}
