//! The names the kernel language knows besides user funcs.

/// Free functions, the same name on both lowerings (`mpm_core::lang` / `mpm_core::trace`).
pub const FUNCTIONS: &[&str] = &[
    "abs",
    "floor",
    "ceil",
    "round",
    "fract",
    "sqrt",
    "exp",
    "ln",
    "pow",
    "sin",
    "cos",
    "tan",
    "atan2",
    "min",
    "max",
    "clamp",
    "sign",
    "length",
    "normalize",
    "dot",
    "cross",
    "outer",
    "transpose",
    "determinant",
    "inverse",
    "trace",
    "svd",
    "polar",
    "select",
    "to_bits",
    "from_bits",
    "rand_u32",
    "rand_f32",
    "vec2",
    "vec3",
    "vec4",
    "ivec2",
    "ivec3",
    "uvec2",
    "uvec3",
    "mat2",
    "mat3",
];

/// Methods (`x.floor()`) and the function each one means (`floor(x)`).
pub const METHODS: &[(&str, &str)] = &[
    ("abs", "abs"),
    ("floor", "floor"),
    ("ceil", "ceil"),
    ("round", "round"),
    ("fract", "fract"),
    ("sqrt", "sqrt"),
    ("exp", "exp"),
    ("ln", "ln"),
    ("powf", "pow"),
    ("sin", "sin"),
    ("cos", "cos"),
    ("tan", "tan"),
    ("atan2", "atan2"),
    ("min", "min"),
    ("max", "max"),
    ("clamp", "clamp"),
    ("signum", "sign"),
    ("length", "length"),
    ("normalize", "normalize"),
    ("dot", "dot"),
    ("cross", "cross"),
    ("transpose", "transpose"),
    ("determinant", "determinant"),
    ("inverse", "inverse"),
    ("to_bits", "to_bits"),
    ("col", "index"),
    ("as_vec2", "as_vec2"),
    ("as_ivec2", "as_ivec2"),
    ("as_uvec2", "as_uvec2"),
    ("as_vec3", "as_vec3"),
    ("as_ivec3", "as_ivec3"),
    ("as_uvec3", "as_uvec3"),
];

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
