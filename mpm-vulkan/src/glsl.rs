//! Prints kernel IR as GLSL compute shaders, one per parallel loop.
//!
//! Field shapes and `#[specialize]` scalars are specialised into the source as constants. Helper functions (integer
//! division, per-field load/store/atomic-add with bounds checks, ...) and `#extension` lines
//! are emitted on demand: printing the bodies records what they need, and [`Shader`]'s
//! `Display` assembles the sections in dependency order.

use std::collections::BTreeSet;
use std::fmt::{self, Display, Write as _};

use mpm_core::abi;
use mpm_core::ir::{
    BinOp, Block, Builtin, ExprId, ExprKind, Func, Kernel, LoopDomain, Place, Stmt, UnOp, VarId,
};
use mpm_core::layout::Structure;
use mpm_core::types::{Scalar, Ty};

use crate::sparse;

/// What the generated code is specialised for.
#[derive(Clone, Debug)]
pub struct GlslOptions<'a> {
    /// Shape of each field parameter (empty for 0-D fields).
    pub shapes: &'a [Vec<u32>],
    /// The value (one word) of each of the kernel's `#[specialize]` scalars, in the order of
    /// `Kernel::specialized`: printed as constants, so that the shader compiler drops the
    /// branches they rule out.
    pub specialized: &'a [u32],
    /// Use `GL_EXT_shader_atomic_float` for f32 atomic adds (else a compare-and-swap loop).
    pub float_atomics: bool,
    /// The same for `+=` on f32 words of shared arrays.
    pub shared_float_atomics: bool,
    /// Workgroup size in x.
    pub local_size: u32,
    /// Per field: the index in `trees` of the layout tree it is placed on (`None`, or an
    /// empty slice, for dense fields).
    pub field_trees: &'a [Option<u32>],
    /// The distinct layout trees of the launch.
    pub trees: &'a [Structure],
    /// Per tree: frozen (`Tree::freeze`), so that nothing activates and a write into an
    /// inactive cell raises the status flag instead (empty: none is).
    pub frozen: &'a [bool],
    /// Subgroup basic and ballot operations may be used (sparse activation).
    pub subgroups: bool,
    /// Run in the `SignedZeroInfNanPreserve` float mode (the device supports it): without
    /// it a driver may assume no infinities or NaNs, folding away the checks that give
    /// casts and builtins their Rust meaning on those values.
    pub inf_nan_preserve: bool,
    /// Subgroup arithmetic may be used for `+=` on float fields: the invocations of a
    /// subgroup that add into the same element sum their values (`subgroupAdd`), and one
    /// of them adds the sum with one atomic per word. Where neighbouring invocations hold
    /// particles of one cell (sorted by cell), they add into the same nodes and a P2G's
    /// atomics drop by the particles per cell.
    pub aggregate_adds: bool,
}

impl GlslOptions<'_> {
    /// The tree field `k` is placed on.
    fn tree(&self, k: usize) -> Option<(usize, &Structure)> {
        let t = (*self.field_trees.get(k)?)? as usize;
        Some((t, self.trees.get(t)?))
    }
}

/// Binding of the out-of-bounds status word.
pub const STATUS_BINDING: u32 = 0;

/// Binding of the word view of field `k`.
pub fn field_binding(k: usize) -> u32 {
    1 + k as u32
}

/// Binding of the structure buffer of tree `t`, given `n` fields.
pub fn tree_binding(t: usize, n: usize) -> u32 {
    1 + (n + t) as u32
}

/// Binding of the active-block buffer of tree `t`, given `n` fields and `trees` trees.
pub fn active_binding(t: usize, n: usize, trees: usize) -> u32 {
    1 + (n + trees + t) as u32
}

/// Per loop of `kernel`: the tree whose active-block list drives it (an `active()` loop over
/// a field of a sparse tree), else `None`.
pub fn active_loop_trees(
    kernel: &Kernel,
    field_trees: &[Option<u32>],
    trees: &[Structure],
) -> Vec<Option<usize>> {
    kernel
        .loops
        .iter()
        .map(|lp| match lp.domain {
            LoopDomain::Active(f) => {
                let t = (*field_trees.get(f as usize)?)? as usize;
                sparse::is_sparse(trees.get(t)?).then_some(t)
            }
            _ => None,
        })
        .collect()
}

/// The trees that drive some `active()` loop of `kernel`, each once, in order: the trees
/// whose active-block buffers the shaders declare and the launcher binds.
pub fn active_trees(
    kernel: &Kernel,
    field_trees: &[Option<u32>],
    trees: &[Structure],
) -> Vec<usize> {
    let mut active: Vec<usize> = active_loop_trees(kernel, field_trees, trees)
        .into_iter()
        .flatten()
        .collect();
    active.sort_unstable();
    active.dedup();
    active
}

/// Number of push-constant words: start and count of the loop, then the scalars.
pub fn push_words(kernel: &Kernel) -> u32 {
    abi::LOOP_WORDS + pushed_scalars(kernel).map(|(_, t)| t.words()).sum::<u32>()
}

/// The scalars a launch pushes, with their numbers: all but the `#[specialize]` ones, whose
/// values are in the code.
fn pushed_scalars(kernel: &Kernel) -> impl Iterator<Item = (usize, &Ty)> {
    let specialized = |n: usize| kernel.specialized.iter().any(|&k| k as usize == n);
    (kernel.scalars.iter().enumerate()).filter(move |(n, _)| !specialized(*n))
}

/// The scalar words a launch pushes (see [`pushed_scalars`]), out of all of them.
pub fn push_scalar_words(kernel: &Kernel, scalars: &[u32]) -> Vec<u32> {
    let offsets = abi::scalar_offsets(&kernel.scalars);
    pushed_scalars(kernel)
        .flat_map(|(n, t)| {
            let at = offsets[n] as usize;
            scalars[at..at + t.words() as usize].iter().copied()
        })
        .collect()
}

/// For each field: whether its float view is bound (it has f32 atomic adds and float atomics are on).
pub fn float_views(kernel: &Kernel, float_atomics: bool) -> Vec<bool> {
    let mut out = vec![false; kernel.fields.len()];
    if !float_atomics {
        return out;
    }
    fn walk(b: &Block, k: &Kernel, out: &mut [bool]) {
        for s in b {
            match s {
                Stmt::AtomicAdd { field, .. } | Stmt::FetchAdd { field, .. }
                    if k.fields[*field as usize].elem.scalar() == Some(Scalar::F32) =>
                {
                    out[*field as usize] = true;
                }
                Stmt::If {
                    then, otherwise, ..
                } => {
                    walk(then, k, out);
                    walk(otherwise, k, out);
                }
                Stmt::For { body, .. } | Stmt::While { body, .. } | Stmt::Lanes { body, .. } => {
                    walk(body, k, out)
                }
                _ => {}
            }
        }
    }
    for f in &kernel.funcs {
        walk(&f.body, kernel, &mut out);
    }
    for l in &kernel.loops {
        walk(&l.body, kernel, &mut out);
    }
    out
}

/// The shared arrays a block loop body declares, in order.
fn shared_vars(body: &Block) -> Vec<VarId> {
    fn walk(b: &Block, out: &mut Vec<VarId>) {
        for s in b {
            match s {
                Stmt::Shared { var, .. } => out.push(*var),
                Stmt::If {
                    then, otherwise, ..
                } => {
                    walk(then, out);
                    walk(otherwise, out);
                }
                Stmt::For { body, .. } | Stmt::While { body, .. } => walk(body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(body, &mut out);
    out
}

/// Bytes of workgroup-shared memory that loop `l` of `kernel` declares.
pub fn shared_bytes(kernel: &Kernel, l: usize) -> u64 {
    shared_vars(&kernel.loops[l].body)
        .iter()
        .map(|v| kernel.var(*v).ty.words() as u64 * 4)
        .sum()
}

/// Generates one GLSL compute shader per parallel loop of `kernel`.
pub fn generate(kernel: &Kernel, opts: &GlslOptions<'_>) -> Result<Vec<String>, String> {
    if opts.shapes.len() != kernel.fields.len() {
        return Err(format!(
            "{} field shapes given for {} fields",
            opts.shapes.len(),
            kernel.fields.len()
        ));
    }
    for (k, f) in kernel.fields.iter().enumerate() {
        if opts.shapes[k].len() != f.dims as usize {
            return Err(format!(
                "field `{}` has {} dims but shape {:?}",
                f.name, f.dims, opts.shapes[k]
            ));
        }
    }
    (0..kernel.loops.len())
        .map(|l| Ok(Printer::new(kernel, opts).shader(l)?.to_string()))
        .collect()
}

/// Generic helper functions, emitted when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Helper {
    /// f32 -> i32 and f32 -> u32 as Rust's `as` (saturating, NaN to 0).
    FloatToInt,
    FloatToUint,
    /// min, max and sign on floats as the CPU defines them, also for NaN.
    FMin,
    FMax,
    FSign,
    /// Builtins whose GLSL counterparts leave some inputs undefined (negative roots and
    /// logarithms, `pow` of negative bases, `atan(0, 0)`, infinities into sin/cos/tan).
    Sqrt,
    Ln,
    Pow,
    Periodic,
    Tanh,
    Atan2,
    IDiv,
    IRem,
    UDiv,
    URem,
    FRem,
    Round,
    Trace,
    Sum,
    Product,
}

/// A helper that is one scalar GLSL function plus its component-wise vector overloads.
struct ScalarHelper {
    /// The scalar function's source.
    source: String,
    name: &'static str,
    arity: usize,
    /// Vector kinds of the arguments and of the result ("vec", "ivec", "uvec").
    arg: &'static str,
    ret: &'static str,
}

impl Helper {
    /// The helpers written once for a scalar (the others are emitted by hand).
    fn scalar(self) -> Option<ScalarHelper> {
        let (name, arity, arg, ret, source) = match self {
            Helper::FloatToInt => (
                "mpm_f2i",
                1,
                "vec",
                "ivec",
                "int mpm_f2i(float x) {\n    \
                 return x >= 2147483648.0 ? 2147483647\n        \
                 : x >= -2147483648.0 ? int(x) : x < 0.0 ? (-2147483647 - 1) : 0;\n}"
                    .to_string(),
            ),
            Helper::FloatToUint => (
                "mpm_f2u",
                1,
                "vec",
                "uvec",
                "uint mpm_f2u(float x) {\n    \
                 return x >= 4294967296.0 ? 4294967295u : x >= 1.0 ? uint(x) : 0u;\n}"
                    .to_string(),
            ),
            Helper::FMin => (
                "mpm_fmin",
                2,
                "vec",
                "vec",
                "float mpm_fmin(float a, float b) {\n    return b < a ? b : a;\n}".to_string(),
            ),
            Helper::FMax => (
                "mpm_fmax",
                2,
                "vec",
                "vec",
                "float mpm_fmax(float a, float b) {\n    return b > a ? b : a;\n}".to_string(),
            ),
            Helper::FSign => (
                "mpm_fsign",
                1,
                "vec",
                "vec",
                "float mpm_fsign(float a) {\n    return a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : 0.0;\n}"
                    .to_string(),
            ),
            Helper::Sqrt => (
                "mpm_sqrt",
                1,
                "vec",
                "vec",
                format!("float mpm_sqrt(float x) {{\n    return x >= 0.0 ? sqrt(x) : {NAN};\n}}"),
            ),
            Helper::Ln => (
                "mpm_ln",
                1,
                "vec",
                "vec",
                format!(
                    "float mpm_ln(float x) {{\n    \
                     return isinf(x) && x > 0.0 ? x : x > 0.0 ? log(x) : x == 0.0 ? -{INF} : {NAN};\n}}"
                ),
            ),
            // C99 Annex F's pow (Rust's powf): integer powers of negative bases, the signs of
            // zero and infinite results, pow(x, 0) = pow(1, y) = 1.
            Helper::Pow => (
                "mpm_pow",
                2,
                "vec",
                "vec",
                format!(
                    "float mpm_pow(float x, float y) {{\n    \
                     if (y == 0.0 || x == 1.0) return 1.0;\n    \
                     if (isnan(x) || isnan(y)) return x + y;\n    \
                     float ax = abs(x);\n    \
                     if (isinf(y)) return ax == 1.0 ? 1.0 : (ax > 1.0) == (y > 0.0) ? {INF} : 0.0;\n    \
                     bool whole = trunc(y) == y;\n    \
                     if (x < 0.0 && !whole && !isinf(x)) return {NAN};\n    \
                     bool odd = whole && abs(y) < 16777216.0 && (int(abs(y)) & 1) == 1;\n    \
                     float r = ax == 0.0 ? (y < 0.0 ? {INF} : 0.0)\n        \
                     : isinf(ax) ? (y < 0.0 ? 0.0 : {INF}) : pow(ax, y);\n    \
                     return odd && floatBitsToUint(x) >= 0x80000000u ? -r : r;\n}}"
                ),
            ),
            // Clamped: implementations may form tanh from exp(2x), which overflows past 44
            // (tanh is +-1 in f32 beyond |x| = 9).
            Helper::Tanh => (
                "mpm_tanh",
                1,
                "vec",
                "vec",
                "float mpm_tanh(float x) {\n    return isnan(x) ? x : tanh(clamp(x, -10.0, 10.0));\n}"
                    .to_string(),
            ),
            // C99 Annex F's atan2 where GLSL's atan(y, x) is undefined or may differ: zeros
            // (signed), infinities, x = 0.
            Helper::Atan2 => {
                let lit = |v: f32| float_lit(v.to_bits());
                let (pi, half, quarter, three) = (
                    lit(std::f32::consts::PI),
                    lit(std::f32::consts::FRAC_PI_2),
                    lit(std::f32::consts::FRAC_PI_4),
                    lit(3.0 * std::f32::consts::FRAC_PI_4),
                );
                (
                    "mpm_atan2",
                    2,
                    "vec",
                    "vec",
                    format!(
                        "float mpm_atan2(float y, float x) {{\n    \
                         if (isnan(x) || isnan(y)) return x + y;\n    \
                         float s = uintBitsToFloat((floatBitsToUint(y) & 0x80000000u) | 0x3f800000u);\n    \
                         bool left = floatBitsToUint(x) >= 0x80000000u;\n    \
                         if (y == 0.0) return s * (left ? {pi} : 0.0);\n    \
                         if (isinf(x) && isinf(y)) return s * (left ? {three} : {quarter});\n    \
                         if (isinf(x)) return s * (left ? {pi} : 0.0);\n    \
                         if (isinf(y) || x == 0.0) return s * {half};\n    \
                         return atan(y, x);\n}}"
                    ),
                )
            }
            Helper::IDiv => (
                "mpm_idiv",
                2,
                "ivec",
                "ivec",
                "int mpm_idiv(int a, int b) {\n    if (b == 0) return 0;\n    \
                 uint ua = a < 0 ? 0u - uint(a) : uint(a);\n    uint ub = b < 0 ? 0u - uint(b) : uint(b);\n    \
                 uint q = ua / ub;\n    return ((a < 0) != (b < 0)) ? -int(q) : int(q);\n}"
                    .to_string(),
            ),
            Helper::IRem => (
                "mpm_irem",
                2,
                "ivec",
                "ivec",
                "int mpm_irem(int a, int b) {\n    if (b == 0) return 0;\n    \
                 uint ua = a < 0 ? 0u - uint(a) : uint(a);\n    uint ub = b < 0 ? 0u - uint(b) : uint(b);\n    \
                 int r = int(ua % ub);\n    return a < 0 ? -r : r;\n}"
                    .to_string(),
            ),
            Helper::UDiv => (
                "mpm_udiv",
                2,
                "uvec",
                "uvec",
                "uint mpm_udiv(uint a, uint b) {\n    return b == 0u ? 0u : a / b;\n}".to_string(),
            ),
            Helper::URem => (
                "mpm_urem",
                2,
                "uvec",
                "uvec",
                "uint mpm_urem(uint a, uint b) {\n    return b == 0u ? 0u : a % b;\n}".to_string(),
            ),
            Helper::FRem => (
                "mpm_frem",
                2,
                "vec",
                "vec",
                format!(
                    "float mpm_frem(float a, float b) {{\n    \
                     // Rust's %: a - b trunc(a / b), exactly, with the sign of a.\n    \
                     if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return {NAN};\n    \
                     if (isinf(b)) return a;\n    \
                     float x = abs(a), y = abs(b);\n    \
                     // Long division, one exact step per binary digit of the quotient:\n    \
                     // t = y 2^k with t <= x < 2t, so x - t is exact (Sterbenz). No shortcut\n    \
                     // through a / b: GLSL may split fma(-b, trunc(a / b), a) into two roundings\n    \
                     // (lavapipe does), which loses the remainder next to a multiple of b.\n    \
                     while (x >= y) {{\n        \
                     int ex, ey;\n        \
                     frexp(x, ex);\n        \
                     frexp(y, ey);\n        \
                     float t = ldexp(y, ex - ey);\n        \
                     x -= t > x ? 0.5 * t : t;\n    \
                     }}\n    \
                     return a < 0.0 ? -x : x;\n}}"
                ),
            ),
            _ => return None,
        };
        Some(ScalarHelper {
            source,
            name,
            arity,
            arg,
            ret,
        })
    }
}

/// Per-field helpers, emitted when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum FieldOp {
    Load,
    Store,
    Add,
    /// `atomic_add` returning the old value (one-word scalars).
    FetchAdd,
    /// `is_active`: in range (dense fields).
    Active,
    /// `activate` (a bounds check only on dense fields).
    Touch,
    /// `deactivate` (a bounds check only on dense fields).
    Deactivate,
    /// The element a run of stores at one index writes (see [`Printer::stores_at_one_index`]):
    /// found, or activated, as a store finds it.
    Place,
    /// A store into the element whose first word is given (a run's stores).
    StoreAt,
    /// An add into the element whose first word is given (a run's adds).
    AddAt,
}

/// A complete shader: sections printed in order by `Display`.
struct Shader {
    extensions: BTreeSet<&'static str>,
    inf_nan_preserve: bool,
    local_size: u32,
    declarations: String,
    structs: String,
    helpers: String,
    body: String,
}

impl Display for Shader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "#version 450")?;
        for e in &self.extensions {
            writeln!(f, "#extension {e} : require")?;
        }
        if self.inf_nan_preserve {
            // SPIR-V ExecutionMode SignedZeroInfNanPreserve (4461) for 32-bit floats, with its
            // capability (4466) and extension: keeps infinities, NaNs and signed zeros.
            writeln!(f, "#extension GL_EXT_spirv_intrinsics : require")?;
            writeln!(
                f,
                "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 32);"
            )?;
        }
        writeln!(f, "layout(local_size_x = {}) in;", self.local_size)?;
        write!(
            f,
            "{}{}{}{}",
            self.declarations, self.structs, self.helpers, self.body
        )
    }
}

struct Printer<'k> {
    k: &'k Kernel,
    opts: &'k GlslOptions<'k>,
    float_views: Vec<bool>,
    helpers: BTreeSet<Helper>,
    field_ops: BTreeSet<(u32, FieldOp)>,
    extensions: BTreeSet<&'static str>,
    /// Tuple types seen so far; struct `mpm_tN` is entry N.
    tuples: Vec<Vec<Ty>>,
    structs: String,
    /// Return type of the func being printed (None in `main`).
    func_ret: Option<Ty>,
    /// The statement just printed ended with a barrier (a `lanes` loop or a shared array's
    /// fill): a `lanes` loop or fill right after it needs no barrier of its own first.
    fenced: bool,
}

fn scalar_name(s: Scalar) -> &'static str {
    match s {
        Scalar::F32 => "float",
        Scalar::I32 => "int",
        Scalar::U32 => "uint",
        Scalar::Bool => "bool",
    }
}

fn vec_prefix(s: Scalar) -> &'static str {
    match s {
        Scalar::F32 => "",
        Scalar::I32 => "i",
        Scalar::U32 => "u",
        Scalar::Bool => "b",
    }
}

/// A readable, collision-free GLSL identifier for a Rust name plus a unique id.
pub fn var_name(name: &str, id: u32) -> String {
    let mut s = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '_' };
        if !(c == '_' && s.ends_with('_')) {
            s.push(c);
        }
    }
    let s = s.trim_end_matches('_');
    // `gl_` is reserved by GLSL and `mpm` by this printer (helpers, funcs, temporaries).
    let reserved = s.starts_with("gl_") || s.starts_with("mpm");
    let s = if reserved || s.starts_with(|c: char| c.is_ascii_digit()) || s.is_empty() {
        format!("v{s}")
    } else {
        s.to_string()
    };
    format!("{s}_{id}")
}

fn func_name(f: &Func, idx: usize) -> String {
    let short = f.key.rsplit("::").next().unwrap_or(&f.key);
    format!("mpm_fn_{}", var_name(short, idx as u32))
}

/// A float literal that round-trips.
fn float_lit(bits: u32) -> String {
    let v = f32::from_bits(bits);
    if !v.is_finite() {
        return format!("uintBitsToFloat(0x{bits:08x}u)");
    }
    let mut s = format!("{v:?}");
    if !s.contains(['.', 'e', 'E']) {
        s.push_str(".0");
    }
    if v.is_sign_negative() {
        format!("({s})")
    } else {
        s
    }
}

fn int_lit(bits: u32) -> String {
    let v = bits as i32;
    if v == i32::MIN {
        "(-2147483647 - 1)".into()
    } else if v < 0 {
        format!("({v})")
    } else {
        format!("{v}")
    }
}

fn indent(n: usize) -> String {
    "    ".repeat(n)
}

impl<'k> Printer<'k> {
    fn new(k: &'k Kernel, opts: &'k GlslOptions<'k>) -> Self {
        Printer {
            k,
            opts,
            float_views: float_views(k, opts.float_atomics),
            helpers: BTreeSet::new(),
            field_ops: BTreeSet::new(),
            extensions: BTreeSet::new(),
            tuples: Vec::new(),
            structs: String::new(),
            func_ret: None,
            fenced: false,
        }
    }

    fn ty(&mut self, ty: &Ty) -> String {
        match ty {
            Ty::Scalar(s) => scalar_name(*s).into(),
            Ty::Vector(s, n) => format!("{}vec{n}", vec_prefix(*s)),
            Ty::Matrix(n) => format!("mat{n}"),
            Ty::Array(..) => {
                let mut dims = String::new();
                let mut t = ty;
                while let Ty::Array(inner, n) = t {
                    write!(dims, "[{n}]").unwrap();
                    t = inner;
                }
                format!("{}{dims}", self.ty(t))
            }
            Ty::Tuple(ts) => {
                if let Some(i) = self.tuples.iter().position(|t| t == ts) {
                    return format!("mpm_t{i}");
                }
                let members: Vec<String> = ts.iter().map(|t| self.ty(t)).collect();
                let i = self.tuples.len();
                self.tuples.push(ts.clone());
                let mut s = format!("struct mpm_t{i} {{");
                if members.is_empty() {
                    s.push_str(" uint unit;");
                }
                for (j, m) in members.iter().enumerate() {
                    write!(s, " {m} m{j};").unwrap();
                }
                s.push_str(" };\n");
                self.structs.push_str(&s);
                format!("mpm_t{i}")
            }
        }
    }

    fn ety(&self, id: ExprId) -> &'k Ty {
        &self.k.expr(id).ty
    }

    fn var(&self, id: u32) -> String {
        var_name(&self.k.var(id).name, id)
    }

    /// Widens a scalar to `to` when `to` is a vector.
    fn bcast(&mut self, s: String, from: &Ty, to: &Ty) -> String {
        match (from, to) {
            (Ty::Scalar(_), Ty::Vector(..)) => format!("{}({s})", self.ty(to)),
            _ => s,
        }
    }

    fn wider<'a>(a: &'a Ty, b: &'a Ty) -> &'a Ty {
        if matches!(a, Ty::Scalar(_)) {
            b
        } else {
            a
        }
    }

    /// A field index converted to the signed form the field helpers take.
    fn field_index(&mut self, index: ExprId) -> String {
        let s = self.expr(index);
        match self.ety(index) {
            Ty::Scalar(Scalar::U32) => format!("int({s})"),
            Ty::Vector(Scalar::U32, n) => format!("ivec{n}({s})"),
            _ => s,
        }
    }

    fn expr(&mut self, id: ExprId) -> String {
        let e = self.k.expr(id);
        let ty = &e.ty;
        match &e.kind {
            ExprKind::Lit(bits) => match ty {
                Ty::Scalar(Scalar::F32) => float_lit(*bits),
                Ty::Scalar(Scalar::I32) => int_lit(*bits),
                Ty::Scalar(Scalar::U32) => format!("{bits}u"),
                Ty::Scalar(Scalar::Bool) => (if *bits != 0 { "true" } else { "false" }).into(),
                _ => format!("/* bad literal type {ty:?} */ 0"),
            },
            ExprKind::Var(v) => self.var(*v),
            ExprKind::Scalar(n) => format!("mpm_s{n}"),
            ExprKind::Unary(op, a) => {
                let s = self.expr(*a);
                match (op, self.ety(*a)) {
                    (UnOp::Neg, _) => format!("(-{s})"),
                    (UnOp::Not, Ty::Scalar(Scalar::Bool)) => format!("(!{s})"),
                    (UnOp::Not, Ty::Vector(Scalar::Bool, _)) => format!("not({s})"),
                    (UnOp::Not, _) => format!("(~{s})"),
                }
            }
            ExprKind::Binary(op, a, b) => self.binary(*op, *a, *b, ty),
            ExprKind::Cast(a) => {
                let s = self.expr(*a);
                let from = self.ety(*a);
                if from == ty {
                    return s;
                }
                // GLSL's int() and uint() are undefined out of range and for NaN.
                let helper = match (from.scalar(), ty.scalar()) {
                    (Some(Scalar::F32), Some(Scalar::I32)) => Some((Helper::FloatToInt, "mpm_f2i")),
                    (Some(Scalar::F32), Some(Scalar::U32)) => {
                        Some((Helper::FloatToUint, "mpm_f2u"))
                    }
                    _ => None,
                };
                match helper {
                    Some((h, name)) => {
                        self.helpers.insert(h);
                        format!("{name}({s})")
                    }
                    None => format!("{}({s})", self.ty(ty)),
                }
            }
            ExprKind::Builtin(b, args) => self.builtin(*b, args, ty),
            ExprKind::Call(f, args) => {
                let name = func_name(&self.k.funcs[*f as usize], *f as usize);
                let args: Vec<String> = args.iter().map(|a| self.expr(*a)).collect();
                format!("{name}({})", args.join(", "))
            }
            ExprKind::IsActive { field, index } => {
                self.field_ops.insert((*field, FieldOp::Active));
                let i = self.field_index(*index);
                format!("f{field}_active({i})")
            }
            ExprKind::Load { field, index } => {
                self.field_ops.insert((*field, FieldOp::Load));
                let i = self.field_index(*index);
                format!("f{field}_load({i})")
            }
            ExprKind::Extent { field, axis } => format!("uint(F{field}_S{axis})"),
            ExprKind::SharedLoad { var, index } => {
                let idx = self.shared_index(*var, *index);
                format!("mpm_sh{var}_load({idx})")
            }
            ExprKind::Member(a, k) => {
                let s = self.expr(*a);
                match self.ety(*a) {
                    Ty::Vector(..) => format!("{s}.{}", ["x", "y", "z", "w"][(*k as usize).min(3)]),
                    Ty::Tuple(_) => format!("{s}.m{k}"),
                    _ => format!("{s}[{k}]"),
                }
            }
            ExprKind::Index(a, i) => {
                let s = self.expr(*a);
                let len = match self.ety(*a) {
                    Ty::Vector(_, n) | Ty::Matrix(n) => *n as u32,
                    Ty::Array(_, n) => *n,
                    _ => 1,
                };
                let idx = self.clamped_index(*i, len);
                format!("{s}[{idx}]")
            }
            ExprKind::Construct(parts) => {
                let mut ps: Vec<String> = parts.iter().map(|p| self.expr(*p)).collect();
                match ty {
                    Ty::Tuple(ts) if ts.is_empty() => format!("{}(0u)", self.ty(ty)),
                    Ty::Scalar(_) if ps.len() == 1 => ps.pop().unwrap_or_default(),
                    Ty::Array(_, n) if ps.len() == 1 && *n > 1 => {
                        let p = ps.pop().unwrap_or_default();
                        format!("{}({})", self.ty(ty), vec![p; *n as usize].join(", "))
                    }
                    _ => format!("{}({})", self.ty(ty), ps.join(", ")),
                }
            }
            ExprKind::Select(c, a, b) => {
                let (sc, sa, sb) = (self.expr(*c), self.expr(*a), self.expr(*b));
                if matches!(self.ety(*c), Ty::Vector(..)) {
                    format!("mix({sb}, {sa}, {sc})")
                } else {
                    format!("({sc} ? {sa} : {sb})")
                }
            }
        }
    }

    /// The length and element type of shared array `var`.
    fn shared_array(&self, var: VarId) -> (u32, Ty) {
        match &self.k.var(var).ty {
            Ty::Array(t, n) => (*n, (**t).clone()),
            t => (1, t.clone()),
        }
    }

    /// The index into shared array `var`, clamped into range, as a uint.
    fn shared_index(&mut self, var: VarId, i: ExprId) -> String {
        let (len, _) = self.shared_array(var);
        let idx = self.clamped_index(i, len);
        match self.ety(i) {
            Ty::Scalar(Scalar::U32) => idx,
            _ => format!("uint({idx})"),
        }
    }

    fn clamped_index(&mut self, i: ExprId, len: u32) -> String {
        let s = self.expr(i);
        let hi = len.saturating_sub(1);
        match self.ety(i) {
            Ty::Scalar(Scalar::U32) => format!("min({s}, {hi}u)"),
            _ => format!("clamp({s}, 0, {hi})"),
        }
    }

    fn binary(&mut self, op: BinOp, a: ExprId, b: ExprId, ty: &Ty) -> String {
        let (ta, tb) = (self.ety(a), self.ety(b));
        let (sa, sb) = (self.expr(a), self.expr(b));
        let comp = ta.scalar();
        let wide = Self::wider(ta, tb).clone();
        let infix = |o: &str| format!("({sa} {o} {sb})");
        match op {
            BinOp::Add => infix("+"),
            BinOp::Sub => infix("-"),
            BinOp::Mul => infix("*"),
            BinOp::Div | BinOp::Rem => {
                let helper = match (op, comp) {
                    (BinOp::Div, Some(Scalar::F32)) => return infix("/"),
                    (BinOp::Div, Some(Scalar::I32)) => Helper::IDiv,
                    (BinOp::Div, _) => Helper::UDiv,
                    (_, Some(Scalar::F32)) => Helper::FRem,
                    (_, Some(Scalar::I32)) => Helper::IRem,
                    _ => Helper::URem,
                };
                self.helpers.insert(helper);
                let name = match helper {
                    Helper::IDiv => "mpm_idiv",
                    Helper::UDiv => "mpm_udiv",
                    Helper::FRem => "mpm_frem",
                    Helper::IRem => "mpm_irem",
                    _ => "mpm_urem",
                };
                let (ta, tb) = (ta.clone(), tb.clone());
                let (x, y) = (self.bcast(sa, &ta, &wide), self.bcast(sb, &tb, &wide));
                format!("{name}({x}, {y})")
            }
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor => {
                let o = match op {
                    BinOp::BitAnd => "&",
                    BinOp::BitOr => "|",
                    _ => "^",
                };
                match ty {
                    Ty::Scalar(Scalar::Bool) => match op {
                        BinOp::BitAnd => infix("&&"),
                        BinOp::BitOr => infix("||"),
                        _ => infix("!="),
                    },
                    Ty::Vector(Scalar::Bool, n) => {
                        format!("bvec{n}(uvec{n}({sa}) {o} uvec{n}({sb}))")
                    }
                    _ => infix(o),
                }
            }
            BinOp::Shl | BinOp::Shr => {
                let mask = if tb.scalar() == Some(Scalar::U32) {
                    "31u"
                } else {
                    "31"
                };
                let o = if op == BinOp::Shl { "<<" } else { ">>" };
                format!("({sa} {o} ({sb} & {mask}))")
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                if let Ty::Vector(Scalar::Bool, _) = ty {
                    let f = match op {
                        BinOp::Eq => "equal",
                        BinOp::Ne => "notEqual",
                        BinOp::Lt => "lessThan",
                        BinOp::Le => "lessThanEqual",
                        BinOp::Gt => "greaterThan",
                        _ => "greaterThanEqual",
                    };
                    let (ta, tb) = (ta.clone(), tb.clone());
                    let (x, y) = (self.bcast(sa, &ta, &wide), self.bcast(sb, &tb, &wide));
                    format!("{f}({x}, {y})")
                } else {
                    let o = match op {
                        BinOp::Eq => "==",
                        BinOp::Ne => "!=",
                        BinOp::Lt => "<",
                        BinOp::Le => "<=",
                        BinOp::Gt => ">",
                        _ => ">=",
                    };
                    let (ta, tb) = (ta.clone(), tb.clone());
                    let (x, y) = (self.bcast(sa, &ta, &wide), self.bcast(sb, &tb, &wide));
                    format!("({x} {o} {y})")
                }
            }
            BinOp::And | BinOp::Or => match ty {
                Ty::Vector(_, n) => {
                    let o = if op == BinOp::And { "&" } else { "|" };
                    format!("bvec{n}(uvec{n}({sa}) {o} uvec{n}({sb}))")
                }
                _ => infix(if op == BinOp::And { "&&" } else { "||" }),
            },
        }
    }

    fn builtin(&mut self, b: Builtin, args: &[ExprId], ty: &Ty) -> String {
        let broadcast = matches!(
            b,
            Builtin::Min | Builtin::Max | Builtin::Clamp | Builtin::Pow | Builtin::Atan2
        );
        let mut ss = Vec::new();
        for &a in args {
            let s = self.expr(a);
            let ta = self.ety(a).clone();
            ss.push(if broadcast { self.bcast(s, &ta, ty) } else { s });
        }
        // GLSL has no abs or sign on unsigned integers: abs is the value, sign is 0 or 1.
        if ty.scalar() == Some(Scalar::U32) {
            match b {
                Builtin::Abs => return ss[0].clone(),
                Builtin::Sign => {
                    let one = match ty {
                        Ty::Vector(_, n) => format!("uvec{n}(1u)"),
                        _ => "1u".to_string(),
                    };
                    return format!("min({}, {one})", ss[0]);
                }
                _ => {}
            }
        }
        if ty.scalar() == Some(Scalar::F32) {
            if let Some(call) = self.float_builtin(b, &ss) {
                return call;
            }
        }
        let name = match b {
            Builtin::Abs => "abs",
            Builtin::Floor => "floor",
            Builtin::Ceil => "ceil",
            Builtin::Round => {
                self.helpers.insert(Helper::Round);
                "mpm_round"
            }
            Builtin::Fract => "fract",
            Builtin::Sqrt => "sqrt",
            Builtin::Exp => "exp",
            Builtin::Ln => "log",
            Builtin::Pow => "pow",
            Builtin::Sin => "sin",
            Builtin::Cos => "cos",
            Builtin::Tan => "tan",
            // Clamped: implementations may form tanh from exp(2x), which overflows past 44
            // (tanh is +-1 in f32 beyond |x| = 9).
            Builtin::Tanh => "tanh",
            Builtin::Atan2 => "atan",
            Builtin::Min => "min",
            Builtin::Max => "max",
            // min(max()): GLSL's clamp is undefined when lo > hi.
            Builtin::Clamp => return format!("min(max({}, {}), {})", ss[0], ss[1], ss[2]),
            Builtin::Sign => "sign",
            // The CPU's definition (a driver's length() may avoid the overflow of dot).
            Builtin::Length => return format!("sqrt(dot({0}, {0}))", ss[0]),
            Builtin::Normalize => "normalize",
            Builtin::Dot => "dot",
            Builtin::Sum => {
                self.helpers.insert(Helper::Sum);
                "mpm_sum"
            }
            Builtin::Product => {
                self.helpers.insert(Helper::Product);
                "mpm_product"
            }
            Builtin::Cross => "cross",
            Builtin::Outer => "outerProduct",
            Builtin::Transpose => "transpose",
            Builtin::Determinant => "determinant",
            Builtin::Inverse => "inverse",
            Builtin::Trace => {
                self.helpers.insert(Helper::Trace);
                "mpm_trace"
            }
            Builtin::FloatToBits => "floatBitsToUint",
            Builtin::FloatFromBits => "uintBitsToFloat",
        };
        format!("{name}({})", ss.join(", "))
    }

    /// A call of a float builtin that needs a helper to mean what the CPU computes, also for
    /// the inputs GLSL leaves undefined; `None` for the ones GLSL's builtin already matches.
    fn float_builtin(&mut self, b: Builtin, args: &[String]) -> Option<String> {
        let (helper, name) = match b {
            Builtin::Min => (Helper::FMin, "mpm_fmin"),
            Builtin::Max => (Helper::FMax, "mpm_fmax"),
            Builtin::Clamp => {
                self.helpers.insert(Helper::FMin);
                self.helpers.insert(Helper::FMax);
                let (a, lo, hi) = (&args[0], &args[1], &args[2]);
                return Some(format!("mpm_fmin(mpm_fmax({a}, {lo}), {hi})"));
            }
            Builtin::Sign => (Helper::FSign, "mpm_fsign"),
            Builtin::Sqrt => (Helper::Sqrt, "mpm_sqrt"),
            Builtin::Ln => (Helper::Ln, "mpm_ln"),
            Builtin::Pow => (Helper::Pow, "mpm_pow"),
            Builtin::Sin => (Helper::Periodic, "mpm_sin"),
            Builtin::Cos => (Helper::Periodic, "mpm_cos"),
            Builtin::Tan => (Helper::Periodic, "mpm_tan"),
            Builtin::Tanh => (Helper::Tanh, "mpm_tanh"),
            Builtin::Atan2 => (Helper::Atan2, "mpm_atan2"),
            _ => return None,
        };
        self.helpers.insert(helper);
        Some(format!("{name}({})", args.join(", ")))
    }

    /// Prints a place and returns its type.
    fn place(&mut self, p: &Place) -> (String, Ty) {
        match p {
            Place::Var(v) => (self.var(*v), self.k.var(*v).ty.clone()),
            Place::Member(inner, k) => {
                let (s, t) = self.place(inner);
                match t {
                    Ty::Vector(sc, _) => (
                        format!("{s}.{}", ["x", "y", "z", "w"][(*k as usize).min(3)]),
                        Ty::Scalar(sc),
                    ),
                    Ty::Matrix(n) => (format!("{s}[{k}]"), Ty::Vector(Scalar::F32, n)),
                    Ty::Tuple(ts) => (
                        format!("{s}.m{k}"),
                        ts.get(*k as usize).cloned().unwrap_or(Ty::U32),
                    ),
                    Ty::Array(t, _) => (format!("{s}[{k}]"), *t),
                    t => (s, t),
                }
            }
            Place::Index(inner, i) => {
                let (s, t) = self.place(inner);
                let (len, elem) = match &t {
                    Ty::Vector(sc, n) => (*n as u32, Ty::Scalar(*sc)),
                    Ty::Matrix(n) => (*n as u32, Ty::Vector(Scalar::F32, *n)),
                    Ty::Array(e, n) => (*n, (**e).clone()),
                    t => (1, t.clone()),
                };
                let idx = self.clamped_index(*i, len);
                (format!("{s}[{idx}]"), elem)
            }
        }
    }

    fn block(&mut self, b: &Block, depth: usize, out: &mut String) {
        let mut k = 0;
        while k < b.len() {
            let run = self.store_run(&b[k..]);
            if run > 1 {
                self.stores_at_one_index(&b[k..k + run], depth, out);
                k += run;
            } else {
                self.stmt(&b[k], depth, out);
                k += 1;
            }
        }
    }

    /// The field, index and value of a `field[index] = value` or `+= value`.
    fn store_parts(s: &Stmt) -> Option<(u32, ExprId, ExprId)> {
        match s {
            Stmt::Store {
                field,
                index,
                value,
            }
            | Stmt::AtomicAdd {
                field,
                index,
                value,
            } => Some((*field, *index, *value)),
            _ => None,
        }
    }

    /// How many statements from the first of `b` store (`=` or `+=`) at one index into
    /// fields numbered alike (on one tree, or dense of one shape): the run whose element
    /// [`Printer::stores_at_one_index`] finds once. The index reads no field, so that the
    /// run's own stores cannot change it.
    fn store_run(&mut self, b: &[Stmt]) -> usize {
        let Some((first, index, _)) = b.first().and_then(Self::store_parts) else {
            return 0;
        };
        if self.reads_memory(index) {
            return 1;
        }
        let at = self.expr(index);
        let elements = |e: &Self, k: u32| match e.opts.tree(k as usize) {
            Some((t, _)) => (Some(t), Vec::new()),
            None => (None, e.opts.shapes[k as usize].clone()),
        };
        let numbering = elements(self, first);
        let mut run = 1;
        while let Some((field, i, _)) = b.get(run).and_then(Self::store_parts) {
            if elements(self, field) != numbering || self.expr(i) != at {
                break;
            }
            run += 1;
        }
        run
    }

    /// Whether evaluating `id` reads a field or shared memory.
    fn reads_memory(&self, id: ExprId) -> bool {
        let reads = |e: ExprId| self.reads_memory(e);
        match &self.k.expr(id).kind {
            ExprKind::Load { .. } | ExprKind::IsActive { .. } | ExprKind::SharedLoad { .. } => true,
            ExprKind::Lit(_) | ExprKind::Var(_) | ExprKind::Scalar(_) | ExprKind::Extent { .. } => {
                false
            }
            ExprKind::Unary(_, a) | ExprKind::Cast(a) | ExprKind::Member(a, _) => reads(*a),
            ExprKind::Binary(_, a, b) | ExprKind::Index(a, b) => reads(*a) || reads(*b),
            ExprKind::Select(a, b, c) => reads(*a) || reads(*b) || reads(*c),
            ExprKind::Builtin(_, args) | ExprKind::Call(_, args) | ExprKind::Construct(args) => {
                args.iter().any(|a| reads(*a))
            }
        }
    }

    /// A run of stores at one index (see [`Printer::store_run`]): the element is found once,
    /// by the first field's bounds check and tree walk (activating a sparse path, raising
    /// the flags a store raises), and each store writes its words there. A P2G's
    /// `grid_v[i] += ..; grid_m[i] += ..;` walks the tree once instead of twice.
    fn stores_at_one_index(&mut self, run: &[Stmt], d: usize, out: &mut String) {
        let ind = indent(d);
        let Some((first, index, _)) = run.first().and_then(Self::store_parts) else {
            return;
        };
        self.field_ops.insert((first, FieldOp::Place));
        let i = self.field_index(index);
        writeln!(
            out,
            "{ind}{{\n{ind}    uint mpm_e;\n{ind}    if (f{first}_place({i}, mpm_e)) {{"
        )
        .unwrap();
        for s in run {
            let Some((field, _, value)) = Self::store_parts(s) else {
                continue;
            };
            let (op, name) = match s {
                Stmt::Store { .. } => (FieldOp::StoreAt, "store_at"),
                _ => (FieldOp::AddAt, "add_at"),
            };
            self.field_ops.insert((field, op));
            let words = self.k.fields[field as usize].elem.words();
            let v = self.expr(value);
            writeln!(out, "{ind}        f{field}_{name}(mpm_e * {words}u, {v});").unwrap();
        }
        writeln!(out, "{ind}    }}\n{ind}}}").unwrap();
        self.fenced = false;
    }

    fn stmt(&mut self, s: &Stmt, d: usize, out: &mut String) {
        let ind = indent(d);
        let fenced = std::mem::take(&mut self.fenced);
        let mut fences = false;
        match s {
            Stmt::Let { var, init } => {
                let t = self.ty(&self.k.var(*var).ty);
                let name = self.var(*var);
                match init {
                    Some(e) => {
                        let v = self.expr(*e);
                        writeln!(out, "{ind}{t} {name} = {v};").unwrap();
                    }
                    None => writeln!(out, "{ind}{t} {name};").unwrap(),
                }
            }
            Stmt::Assign { place, value } => {
                let (p, _) = self.place(place);
                let v = self.expr(*value);
                writeln!(out, "{ind}{p} = {v};").unwrap();
            }
            Stmt::Activate { field, index } => {
                self.field_ops.insert((*field, FieldOp::Touch));
                let i = self.field_index(*index);
                writeln!(out, "{ind}f{field}_touch({i});").unwrap();
            }
            Stmt::Deactivate { field, index } => {
                self.field_ops.insert((*field, FieldOp::Deactivate));
                let i = self.field_index(*index);
                writeln!(out, "{ind}f{field}_deactivate({i});").unwrap();
            }
            Stmt::Store {
                field,
                index,
                value,
            } => {
                self.field_ops.insert((*field, FieldOp::Store));
                let i = self.field_index(*index);
                let v = self.expr(*value);
                writeln!(out, "{ind}f{field}_store({i}, {v});").unwrap();
            }
            Stmt::AtomicAdd {
                field,
                index,
                value,
            } => {
                self.field_ops.insert((*field, FieldOp::Add));
                let i = self.field_index(*index);
                let v = self.expr(*value);
                writeln!(out, "{ind}f{field}_add({i}, {v});").unwrap();
            }
            Stmt::FetchAdd {
                var,
                field,
                index,
                value,
            } => {
                self.field_ops.insert((*field, FieldOp::FetchAdd));
                let t = self.ty(&self.k.var(*var).ty);
                let name = self.var(*var);
                let i = self.field_index(*index);
                let v = self.expr(*value);
                writeln!(out, "{ind}{t} {name} = f{field}_fetch_add({i}, {v});").unwrap();
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let c = self.expr(*cond);
                writeln!(out, "{ind}if ({c}) {{").unwrap();
                self.block(then, d + 1, out);
                if otherwise.is_empty() {
                    writeln!(out, "{ind}}}").unwrap();
                } else {
                    writeln!(out, "{ind}}} else {{").unwrap();
                    self.block(otherwise, d + 1, out);
                    writeln!(out, "{ind}}}").unwrap();
                }
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let t = self.ty(&self.k.var(*var).ty);
                let name = self.var(*var);
                let (s, e) = (self.expr(*start), self.expr(*end));
                writeln!(out, "{ind}{{").unwrap();
                writeln!(out, "{ind}    {t} mpm_end_{var} = {e};").unwrap();
                writeln!(
                    out,
                    "{ind}    for ({t} {name} = {s}; {name} < mpm_end_{var}; {name}++) {{"
                )
                .unwrap();
                self.block(body, d + 2, out);
                writeln!(out, "{ind}    }}").unwrap();
                writeln!(out, "{ind}}}").unwrap();
            }
            // Every lane fills its share of the array; the barrier before it (unless the
            // statement before ended with one) lets lanes finish reading an earlier fill (a
            // declaration in a sequential loop).
            Stmt::Shared { var, fill } => {
                let (len, elem) = self.shared_array(*var);
                let t = self.ty(&elem);
                let v = self.expr(*fill);
                let ls = self.opts.local_size;
                if !fenced {
                    writeln!(out, "{ind}barrier();").unwrap();
                }
                let lines = [
                    "{".to_string(),
                    format!("    {t} mpm_fill = {v};"),
                    format!("    for (uint mpm_k = gl_LocalInvocationIndex; mpm_k < {len}u; mpm_k += {ls}u) {{"),
                    format!("        mpm_sh{var}_store(mpm_k, mpm_fill);"),
                    "    }".into(),
                    "}".into(),
                    "barrier();".into(),
                ];
                for line in lines {
                    writeln!(out, "{ind}{line}").unwrap();
                }
                fences = true;
            }
            Stmt::SharedStore {
                var,
                index,
                value,
                add,
            } => {
                let idx = self.shared_index(*var, *index);
                let v = self.expr(*value);
                let f = if *add { "add" } else { "store" };
                writeln!(out, "{ind}mpm_sh{var}_{f}({idx}, {v});").unwrap();
            }
            // The iterations strided over the workgroup, counted in uint so that no range
            // overflows; barriers on both sides (lanes may have read shared values at block
            // scope before, and read what others wrote after), the one before left out when
            // the statement before ended with one.
            Stmt::Lanes {
                var,
                start,
                end,
                body,
            } => {
                let t = self.ty(&self.k.var(*var).ty);
                let name = self.var(*var);
                let (a, e) = (self.expr(*start), self.expr(*end));
                let ls = self.opts.local_size;
                let (k, n) = (format!("mpm_k{var}"), format!("mpm_n{var}"));
                if !fenced {
                    writeln!(out, "{ind}memoryBarrierBuffer();\n{ind}barrier();").unwrap();
                }
                let head = [
                    "{".to_string(),
                    format!("    {t} mpm_a{var} = {a};"),
                    format!("    {t} mpm_e{var} = {e};"),
                    format!("    uint {n} = mpm_e{var} > mpm_a{var} ? uint(mpm_e{var}) - uint(mpm_a{var}) : 0u;"),
                    format!("    for (uint {k} = gl_LocalInvocationIndex; {k} < {n}; {k} += {ls}u) {{"),
                    format!("        {t} {name} = {t}(uint(mpm_a{var}) + {k});"),
                ];
                for line in head {
                    writeln!(out, "{ind}{line}").unwrap();
                }
                self.block(body, d + 2, out);
                for line in ["    }", "}", "memoryBarrierBuffer();", "barrier();"] {
                    writeln!(out, "{ind}{line}").unwrap();
                }
                fences = true;
            }
            Stmt::While { cond, body } => {
                let c = self.expr(*cond);
                writeln!(out, "{ind}while ({c}) {{").unwrap();
                self.block(body, d + 1, out);
                writeln!(out, "{ind}}}").unwrap();
            }
            Stmt::Break => writeln!(out, "{ind}break;").unwrap(),
            Stmt::Continue => writeln!(out, "{ind}continue;").unwrap(),
            Stmt::Return(None) => match self.func_ret.clone() {
                Some(t) => {
                    let t = self.ty(&t);
                    writeln!(out, "{ind}return {t}(0u);").unwrap()
                }
                None => writeln!(out, "{ind}return;").unwrap(),
            },
            Stmt::Return(Some(e)) => {
                let v = self.expr(*e);
                writeln!(out, "{ind}return {v};").unwrap();
            }
        }
        self.fenced = fences;
    }

    fn func(&mut self, idx: usize, out: &mut String) {
        let f = &self.k.funcs[idx];
        let ret = self.ty(&f.ret);
        let params: Vec<String> = f
            .params
            .iter()
            .map(|p| {
                let t = self.ty(&self.k.var(*p).ty);
                format!("{t} {}", self.var(*p))
            })
            .collect();
        writeln!(
            out,
            "// {}\n{ret} {}({}) {{",
            f.key,
            func_name(f, idx),
            params.join(", ")
        )
        .unwrap();
        self.func_ret = Some(f.ret.clone());
        self.block(&f.body, 1, out);
        if matches!(&f.ret, Ty::Tuple(ts) if ts.is_empty()) {
            writeln!(out, "    return {ret}(0u);").unwrap();
        }
        self.func_ret = None;
        out.push_str("}\n\n");
    }

    fn loop_main(&mut self, l: usize, out: &mut String) {
        let lp = &self.k.loops[l];
        let ls = self.opts.local_size;
        out.push_str("void main() {\n");
        // A block loop's index is its workgroup's: every lane of a block runs its body.
        let lane = match lp.domain {
            LoopDomain::Blocks => String::new(),
            _ => format!(" * {ls}u + gl_LocalInvocationID.x"),
        };
        writeln!(
            out,
            "    uint mpm_id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x){lane};"
        )
        .unwrap();
        let active_tree = match lp.domain {
            LoopDomain::Active(f) => self
                .opts
                .tree(f as usize)
                .filter(|(_, plan)| sparse::is_sparse(plan)),
            _ => None,
        };
        if active_tree.is_none() {
            out.push_str("    if (mpm_id >= pc.w[1]) {\n        return;\n    }\n");
        }
        let vty = self.k.var(lp.var).ty.clone();
        let t = self.ty(&vty);
        let name = self.var(lp.var);
        let init = match &lp.domain {
            LoopDomain::Active(f) if active_tree.is_some() => {
                let (tr, plan) = active_tree.expect("checked");
                out.push_str(&sparse::active_loop_prologue(tr, plan));
                match self.opts.shapes[*f as usize].len() {
                    0 | 1 => format!("{t}(mpm_c.x)"),
                    2 => format!("{t}(mpm_c.xy)"),
                    _ => format!("{t}(mpm_c)"),
                }
            }
            LoopDomain::Range | LoopDomain::Blocks => match vty {
                Ty::Scalar(Scalar::U32) => "pc.w[0] + mpm_id".to_string(),
                _ => format!("{t}(int(pc.w[0]) + int(mpm_id))"),
            },
            LoopDomain::Active(f) if self.opts.tree(*f as usize).is_some() => {
                let tr = self.opts.tree(*f as usize).map_or(0, |(t, _)| t);
                writeln!(
                    out,
                    "    uvec3 mpm_c;\n    if (!t{tr}_coords(mpm_id, mpm_c)) {{\n        return;\n    }}"
                )
                .unwrap();
                match self.opts.shapes[*f as usize].len() {
                    0 | 1 => format!("{t}(mpm_c.x)"),
                    2 => format!("{t}(mpm_c.xy)"),
                    _ => format!("{t}(mpm_c)"),
                }
            }
            LoopDomain::Indices(f) | LoopDomain::Active(f) => {
                let s = &self.opts.shapes[*f as usize];
                let s: Vec<u32> = s.iter().map(|&x| x.max(1)).collect();
                match s.len() {
                    0 | 1 => format!("{t}(mpm_id)"),
                    2 => format!("{t}(mpm_id / {s1}u, mpm_id % {s1}u)", s1 = s[1]),
                    _ => format!(
                        "{t}(mpm_id / {s12}u, (mpm_id / {s2}u) % {s1}u, mpm_id % {s2}u)",
                        s12 = s[1] as u64 * s[2] as u64,
                        s1 = s[1],
                        s2 = s[2]
                    ),
                }
            }
        };
        writeln!(out, "    {t} {name} = {init};").unwrap();
        self.block(&lp.body, 1, out);
        out.push_str("}\n");
    }

    fn scalar_defines(&self, out: &mut String) {
        // Offsets among the pushed words (specialised scalars have none).
        let mut pushed = abi::LOOP_WORDS;
        for (n, t) in self.k.scalars.iter().enumerate() {
            let off = pushed;
            let word = |o: u32, s: Scalar| match s {
                Scalar::F32 => format!("uintBitsToFloat(pc.w[{o}])"),
                Scalar::I32 => format!("int(pc.w[{o}])"),
                Scalar::U32 => format!("pc.w[{o}]"),
                Scalar::Bool => format!("(pc.w[{o}] != 0u)"),
            };
            let fixed = self.k.specialized.iter().position(|&k| k as usize == n);
            if fixed.is_none() {
                pushed += t.words();
            }
            let v = match (t, fixed.and_then(|i| self.opts.specialized.get(i))) {
                (Ty::Scalar(Scalar::Bool), Some(&w)) => format!("{}", w != 0),
                // Negative ones through the bits: `-2147483648` is no GLSL literal.
                (Ty::Scalar(Scalar::I32), Some(&w)) if (w as i32) < 0 => format!("int({w}u)"),
                (Ty::Scalar(Scalar::I32), Some(&w)) => format!("{w}"),
                (Ty::Scalar(_), Some(&w)) => format!("{w}u"),
                (Ty::Scalar(s), None) => word(off, *s),
                (Ty::Vector(s, c), _) => {
                    let parts: Vec<String> = (0..*c as u32).map(|j| word(off + j, *s)).collect();
                    format!("{}vec{c}({})", vec_prefix(*s), parts.join(", "))
                }
                (Ty::Matrix(c), _) => {
                    let parts: Vec<String> = (0..(*c as u32).pow(2))
                        .map(|j| word(off + j, Scalar::F32))
                        .collect();
                    format!("mat{c}({})", parts.join(", "))
                }
                _ => "0".into(),
            };
            writeln!(out, "#define mpm_s{n} ({v})").unwrap();
        }
    }

    fn declarations(&mut self) -> String {
        let mut d = String::new();
        let n = self.k.fields.len();
        writeln!(
            d,
            "layout(push_constant) uniform MpmPush {{ uint w[{}]; }} pc;",
            push_words(self.k)
        )
        .unwrap();
        writeln!(
            d,
            "layout(set = 0, binding = {STATUS_BINDING}, std430) buffer MpmStatus {{ uint flag; }} mpm_status;"
        )
        .unwrap();
        for (k, f) in self.k.fields.iter().enumerate() {
            let shape = &self.opts.shapes[k];
            writeln!(
                d,
                "// field {k}: `{}` {:?} shape {:?}",
                f.name, f.elem, shape
            )
            .unwrap();
            for (a, s) in shape.iter().enumerate() {
                writeln!(d, "const int F{k}_S{a} = {s};").unwrap();
            }
            writeln!(
                d,
                "layout(set = 0, binding = {}, std430) buffer Field{k} {{ uint d[]; }} f{k};",
                field_binding(k)
            )
            .unwrap();
            // The float view (for float atomics) aliases the word view's binding, which
            // Vulkan allows for variables of one descriptor type ("Shader Resource Interface",
            // DescriptorSet and Binding Assignment): a field costs one storage buffer of the
            // device's per-shader limit, not two.
            if self.float_views[k] {
                writeln!(
                    d,
                    "layout(set = 0, binding = {}, std430) buffer Field{k}F {{ float d[]; }} f{k}f;",
                    field_binding(k)
                )
                .unwrap();
            }
        }
        for (t, plan) in self.opts.trees.iter().enumerate() {
            d.push_str(&sparse::tree_declaration(t, tree_binding(t, n), plan));
        }
        for t in active_trees(self.k, self.opts.field_trees, self.opts.trees) {
            d.push_str(&sparse::active_declaration(
                t,
                active_binding(t, n, self.opts.trees.len()),
            ));
        }
        self.scalar_defines(&mut d);
        d
    }

    fn generic_helpers(&self, out: &mut String) {
        for h in &self.helpers {
            if let Some(scalar) = h.scalar() {
                out.push_str(&scalar.source);
                out.push('\n');
                vec_overloads(out, scalar.name, scalar.arity, scalar.arg, scalar.ret);
                continue;
            }
            match h {
                Helper::Periodic => {
                    for f in ["sin", "cos", "tan"] {
                        writeln!(
                            out,
                            "float mpm_{f}(float x) {{\n    return isinf(x) || isnan(x) ? {NAN} : {f}(x);\n}}"
                        )
                        .unwrap();
                        vec_overloads(out, &format!("mpm_{f}"), 1, "vec", "vec");
                    }
                }
                Helper::Round => {
                    for t in ["float", "vec2", "vec3", "vec4"] {
                        // Half away from zero, exactly: x - trunc(x) has no rounding error.
                        writeln!(
                            out,
                            "{t} mpm_round({t} x) {{\n    {t} t = trunc(x);\n    return t + sign(x) * step(0.5, abs(x - t));\n}}"
                        )
                        .unwrap();
                    }
                }
                Helper::Trace => {
                    out.push_str("float mpm_trace(mat2 m) {\n    return m[0][0] + m[1][1];\n}\n");
                    out.push_str(
                        "float mpm_trace(mat3 m) {\n    return m[0][0] + m[1][1] + m[2][2];\n}\n",
                    );
                }
                // Left to right, as on the CPU.
                Helper::Sum | Helper::Product => {
                    let (name, op) = match h {
                        Helper::Sum => ("mpm_sum", "+"),
                        _ => ("mpm_product", "*"),
                    };
                    for n in 2..=4 {
                        let terms: Vec<&str> = ["v.x", "v.y", "v.z", "v.w"][..n].to_vec();
                        let body = terms.join(&format!(" {op} "));
                        writeln!(out, "float {name}(vec{n} v) {{\n    return {body};\n}}").unwrap();
                    }
                }
                // The scalar helpers, written above.
                _ => {}
            }
        }
    }

    fn tree_helpers(&mut self, out: &mut String) {
        for (t, plan) in self.opts.trees.iter().enumerate() {
            // A frozen tree allocates nothing, so it elects nothing.
            let frozen = self.opts.frozen.get(t).copied().unwrap_or(false);
            let subgroups = self.opts.subgroups && sparse::uses_subgroups(plan) && !frozen;
            if subgroups {
                self.extensions.insert("GL_KHR_shader_subgroup_basic");
                self.extensions.insert("GL_KHR_shader_subgroup_ballot");
            }
            out.push_str(&sparse::tree_helpers(t, plan, subgroups, frozen));
        }
    }

    fn field_helpers(&mut self, out: &mut String) {
        let fields: BTreeSet<u32> = self.field_ops.iter().map(|(f, _)| *f).collect();
        for k in fields {
            let f = &self.k.fields[k as usize];
            let shape = self.opts.shapes[k as usize].clone();
            let w = f.elem.words();
            let et = self.ty(&f.elem);
            let (idx_ty, cond, lin) = match shape.len() {
                0 => ("int".to_string(), "i != 0".to_string(), "0u".to_string()),
                1 => (
                    "int".into(),
                    format!("i < 0 || i >= F{k}_S0"),
                    "uint(i)".into(),
                ),
                d => {
                    let axes = ["x", "y", "z"];
                    let mut cond = format!("any(lessThan(i, ivec{d}(0)))");
                    let mut lin = "uint(i.x)".to_string();
                    for (a, ax) in axes.iter().enumerate().take(d) {
                        write!(cond, " || i.{ax} >= F{k}_S{a}").unwrap();
                        if a > 0 {
                            lin = format!("({lin} * uint(F{k}_S{a}) + uint(i.{ax}))");
                        }
                    }
                    (format!("ivec{d}"), cond, lin)
                }
            };
            let tree = self.opts.tree(k as usize).map(|(t, _)| t);
            let coords = match shape.len() {
                0 | 1 => "uvec3(uint(i), 0u, 0u)",
                2 => "uvec3(uvec2(i), 0u)",
                _ => "uvec3(i)",
            };
            let oob = format!("atomicCompSwap(mpm_status.flag, 0u, {}u);", k + 1);
            // In a frozen tree a write that finds its cell inactive is an error.
            let missed = |t: usize| {
                match self.opts.frozen.get(t).copied().unwrap_or(false) {
                true => format!(
                    "{{\n        if (act) atomicCompSwap(mpm_status.flag, 0u, {}u);\n        return false;\n    }}",
                    (k + 1) | abi::INACTIVE_WRITE
                ),
                false => "return false;".to_string(),
            }
            };
            match tree {
                None => writeln!(
                    out,
                    "// `{}`\nbool f{k}_at({idx_ty} i, out uint b) {{\n    if ({cond}) {{\n        \
                     {oob}\n        b = 0u;\n        return false;\n    }}\n    \
                     b = {lin} * {w}u;\n    return true;\n}}",
                    f.name,
                )
                .unwrap(),
                Some(t) => {
                    let missed = missed(t);
                    writeln!(
                        out,
                        "// `{}` on tree {t}\nbool f{k}_at({idx_ty} i, bool act, out uint b) {{\n    b = 0u;\n    \
                         if ({cond}) {{\n        {oob}\n        return false;\n    }}\n    \
                         uint e;\n    if (!t{t}_locate({coords}, act, e)) {missed}\n    \
                         b = e * {w}u;\n    return true;\n}}",
                        f.name,
                    )
                    .unwrap()
                }
            }
            let (at_read, at_write) = match tree {
                None => ("f{k}_at(i, b)", "f{k}_at(i, b)"),
                Some(_) => ("f{k}_at(i, false, b)", "f{k}_at(i, true, b)"),
            };
            let (at_read, at_write) = (
                at_read.replace("{k}", &k.to_string()),
                at_write.replace("{k}", &k.to_string()),
            );
            let sc = f.elem.scalar().unwrap_or(Scalar::U32);
            let comp = |j: u32| component(&f.elem, j);
            let ops: Vec<FieldOp> = self
                .field_ops
                .iter()
                .filter(|(g, _)| *g == k)
                .map(|(_, o)| *o)
                .collect();
            for &op in &ops {
                match op {
                    FieldOp::Active => match tree {
                        None => writeln!(
                            out,
                            "bool f{k}_active({idx_ty} i) {{\n    return !({cond});\n}}"
                        )
                        .unwrap(),
                        Some(t) => writeln!(
                            out,
                            "bool f{k}_active({idx_ty} i) {{\n    if ({cond}) return false;\n    \
                             uint e;\n    return t{t}_locate({coords}, false, e);\n}}"
                        )
                        .unwrap(),
                    },
                    FieldOp::Touch => {
                        writeln!(
                            out,
                            "void f{k}_touch({idx_ty} i) {{\n    uint b;\n    {at_write};\n}}"
                        )
                        .unwrap();
                    }
                    FieldOp::Deactivate => match tree {
                        None => writeln!(
                            out,
                            "void f{k}_deactivate({idx_ty} i) {{\n    uint b;\n    f{k}_at(i, b);\n}}"
                        )
                        .unwrap(),
                        Some(t) => writeln!(
                            out,
                            "void f{k}_deactivate({idx_ty} i) {{\n    if ({cond}) {{\n        {oob}\n        return;\n    }}\n    \
                             t{t}_deactivate({coords});\n}}"
                        )
                        .unwrap(),
                    },
                    FieldOp::Place => {
                        let find = match tree {
                            None => format!("e = {lin};\n    return true;"),
                            Some(t) => format!(
                                "const bool act = true;\n    if (!t{t}_locate({coords}, act, e)) {missed}\n    return true;",
                                missed = missed(t),
                            ),
                        };
                        writeln!(
                            out,
                            "bool f{k}_place({idx_ty} i, out uint e) {{\n    e = 0u;\n    if ({cond}) {{\n        \
                             {oob}\n        return false;\n    }}\n    {find}\n}}"
                        )
                        .unwrap();
                    }
                    FieldOp::Load => {
                        let words: Vec<String> = (0..w)
                            .map(|j| from_word(sc, &format!("f{k}.d[b + {j}u]")))
                            .collect();
                        writeln!(
                            out,
                            "{et} f{k}_load({idx_ty} i) {{\n    uint b;\n    if (!{at_read}) return {et}(0);\n    \
                             return {et}({});\n}}",
                            words.join(", ")
                        )
                        .unwrap();
                    }
                    FieldOp::Store | FieldOp::StoreAt => {
                        match op {
                            FieldOp::Store => writeln!(out, "void f{k}_store({idx_ty} i, {et} v) {{\n    uint b;\n    if (!{at_write}) return;"),
                            _ => writeln!(out, "void f{k}_store_at(uint b, {et} v) {{"),
                        }
                        .unwrap();
                        for j in 0..w {
                            let word = to_word(sc, &comp(j));
                            writeln!(out, "    f{k}.d[b + {j}u] = {word};").unwrap();
                        }
                        out.push_str("}\n");
                    }
                    FieldOp::FetchAdd => {
                        let float_view = self.float_views[k as usize];
                        let add = match (sc, float_view) {
                            (Scalar::F32, true) => {
                                self.extensions.insert("GL_EXT_shader_atomic_float");
                                format!("return atomicAdd(f{k}f.d[b], v);")
                            }
                            (Scalar::F32, false) => format!(
                                "uint old = f{k}.d[b];\n    for (;;) {{\n        \
                                 uint prev = atomicCompSwap(f{k}.d[b], old, floatBitsToUint(uintBitsToFloat(old) + v));\n        \
                                 if (prev == old) return uintBitsToFloat(old);\n        old = prev;\n    }}"
                            ),
                            (Scalar::I32, _) => format!("return int(atomicAdd(f{k}.d[b], uint(v)));"),
                            _ => format!("return atomicAdd(f{k}.d[b], v);"),
                        };
                        writeln!(
                            out,
                            "{et} f{k}_fetch_add({idx_ty} i, {et} v) {{\n    uint b;\n    if (!{at_write}) return {et}(0);\n    {add}\n}}"
                        )
                        .unwrap();
                    }
                    FieldOp::Add | FieldOp::AddAt => {
                        let float_view = self.float_views[k as usize];
                        if sc == Scalar::F32 && float_view {
                            self.extensions.insert("GL_EXT_shader_atomic_float");
                        }
                        // Once for the field's adds of both kinds.
                        let first_add = op == FieldOp::Add || !ops.contains(&FieldOp::Add);
                        if sc == Scalar::F32 && !float_view && first_add {
                            writeln!(
                                out,
                                "void f{k}_cas_add(uint j, float x) {{\n    uint old = f{k}.d[j];\n    for (;;) {{\n        \
                                 uint prev = atomicCompSwap(f{k}.d[j], old, floatBitsToUint(uintBitsToFloat(old) + x));\n        \
                                 if (prev == old) break;\n        old = prev;\n    }}\n}}"
                            )
                            .unwrap();
                        }
                        match op {
                            FieldOp::Add => writeln!(out, "void f{k}_add({idx_ty} i, {et} v) {{\n    uint b;\n    if (!{at_write}) return;"),
                            _ => writeln!(out, "void f{k}_add_at(uint b, {et} v) {{"),
                        }
                        .unwrap();
                        // Aggregated (see `GlslOptions::aggregate_adds`): each pass takes
                        // the invocations that add into the first one's element; they sum
                        // their values and the elected one adds the sum, the others leave.
                        let aggregate = self.opts.aggregate_adds
                            && sc == Scalar::F32
                            && !matches!(f.elem, Ty::Matrix(_));
                        let indent = if aggregate {
                            for e in [
                                "GL_KHR_shader_subgroup_basic",
                                "GL_KHR_shader_subgroup_ballot",
                                "GL_KHR_shader_subgroup_arithmetic",
                            ] {
                                self.extensions.insert(e);
                            }
                            out.push_str(
                                "    for (;;) {\n        if (b == subgroupBroadcastFirst(b)) {\n            \
                                 v = subgroupAdd(v);\n            if (subgroupElect()) {\n",
                            );
                            "                "
                        } else {
                            "    "
                        };
                        for j in 0..w {
                            let c = comp(j);
                            // A float component of zero adds nothing (the accumulators start
                            // at +0, which no sum turns into -0): one-hot shares and stencil
                            // weights of zero cost no atomic.
                            let line = match (sc, float_view) {
                                (Scalar::F32, true) => {
                                    format!("if ({c} != 0.0) atomicAdd(f{k}f.d[b + {j}u], {c});")
                                }
                                (Scalar::F32, false) => {
                                    format!("if ({c} != 0.0) f{k}_cas_add(b + {j}u, {c});")
                                }
                                (Scalar::Bool, _) => {
                                    format!("if ({c}) atomicOr(f{k}.d[b + {j}u], 1u);")
                                }
                                _ => format!("atomicAdd(f{k}.d[b + {j}u], uint({c}));"),
                            };
                            writeln!(out, "{indent}{line}").unwrap();
                        }
                        if aggregate {
                            out.push_str("            }\n            return;\n        }\n    }\n");
                        }
                        out.push_str("}\n");
                    }
                }
            }
        }
    }

    /// Each shared array of loop `l`: its words in workgroup memory (uint, so that `+=` on
    /// floats can be a compare-and-swap loop) and its load, store and add.
    fn shared_helpers(&mut self, l: usize, out: &mut String) {
        for var in shared_vars(&self.k.loops[l].body) {
            let (len, elem) = self.shared_array(var);
            let (w, sc, et) = (
                elem.words(),
                elem.scalar().unwrap_or(Scalar::U32),
                self.ty(&elem),
            );
            let name = format!("mpm_sh{var}");
            // Float words where the device adds floats in workgroup memory natively.
            let floats = sc == Scalar::F32 && self.opts.shared_float_atomics;
            let word_ty = if floats { "float" } else { "uint" };
            writeln!(
                out,
                "// shared `{}`\nshared {word_ty} {name}[{}];",
                self.k.var(var).name,
                len * w
            )
            .unwrap();
            let words: Vec<String> = (0..w)
                .map(|j| match floats {
                    true => format!("{name}[b + {j}u]"),
                    false => from_word(sc, &format!("{name}[b + {j}u]")),
                })
                .collect();
            writeln!(
                out,
                "{et} {name}_load(uint i) {{\n    uint b = i * {w}u;\n    return {et}({});\n}}",
                words.join(", ")
            )
            .unwrap();
            writeln!(
                out,
                "void {name}_store(uint i, {et} v) {{\n    uint b = i * {w}u;"
            )
            .unwrap();
            for j in 0..w {
                let c = component(&elem, j);
                let word = if floats { c } else { to_word(sc, &c) };
                writeln!(out, "    {name}[b + {j}u] = {word};").unwrap();
            }
            out.push_str("}\n");
            if sc == Scalar::Bool {
                continue;
            }
            writeln!(
                out,
                "void {name}_add(uint i, {et} v) {{\n    uint b = i * {w}u;"
            )
            .unwrap();
            for j in 0..w {
                let c = component(&elem, j);
                match sc {
                    Scalar::F32 if floats => {
                        self.extensions.insert("GL_EXT_shader_atomic_float");
                        writeln!(out, "    atomicAdd({name}[b + {j}u], {c});")
                    }
                    Scalar::F32 => writeln!(
                        out,
                        "    {{\n        uint old = {name}[b + {j}u];\n        for (;;) {{\n            \
                         uint prev = atomicCompSwap({name}[b + {j}u], old, floatBitsToUint(uintBitsToFloat(old) + {c}));\n            \
                         if (prev == old) break;\n            old = prev;\n        }}\n    }}"
                    ),
                    _ => writeln!(out, "    atomicAdd({name}[b + {j}u], uint({c}));"),
                }
                .unwrap();
            }
            out.push_str("}\n");
        }
    }

    fn shader(mut self, l: usize) -> Result<Shader, String> {
        let mut body = String::new();
        for i in 0..self.k.funcs.len() {
            self.func(i, &mut body);
        }
        self.loop_main(l, &mut body);
        let declarations = self.declarations();
        let mut helpers = String::new();
        self.generic_helpers(&mut helpers);
        self.tree_helpers(&mut helpers);
        self.field_helpers(&mut helpers);
        self.shared_helpers(l, &mut helpers);
        if !helpers.is_empty() {
            helpers.push('\n');
        }
        Ok(Shader {
            extensions: self.extensions,
            inf_nan_preserve: self.opts.inf_nan_preserve,
            local_size: self.opts.local_size,
            declarations,
            structs: self.structs,
            helpers,
            body,
        })
    }
}

/// Component `j` of value `v` of element type `elem`, as a GLSL expression.
fn component(elem: &Ty, j: u32) -> String {
    match elem {
        Ty::Scalar(_) => "v".into(),
        Ty::Matrix(n) => format!("v[{}][{}]", j / *n as u32, j % *n as u32),
        _ => format!("v[{j}]"),
    }
}

/// A storage word `r` read as scalar kind `sc`.
fn from_word(sc: Scalar, r: &str) -> String {
    match sc {
        Scalar::F32 => format!("uintBitsToFloat({r})"),
        Scalar::I32 => format!("int({r})"),
        Scalar::U32 => r.to_string(),
        Scalar::Bool => format!("({r} != 0u)"),
    }
}

/// A scalar `c` of kind `sc` as a storage word.
fn to_word(sc: Scalar, c: &str) -> String {
    match sc {
        Scalar::F32 => format!("floatBitsToUint({c})"),
        Scalar::I32 => format!("uint({c})"),
        Scalar::U32 => c.to_string(),
        Scalar::Bool => format!("({c} ? 1u : 0u)"),
    }
}

/// A quiet NaN and +infinity in GLSL (it has no literals for them).
const NAN: &str = "uintBitsToFloat(0x7fc00000u)";
const INF: &str = "uintBitsToFloat(0x7f800000u)";

/// Component-wise overloads, for 2 to 4 components, of a scalar helper `name` that takes
/// `arity` arguments of vector kind `arg` ("vec", "ivec", "uvec") and returns kind `ret`.
fn vec_overloads(out: &mut String, name: &str, arity: usize, arg: &str, ret: &str) {
    let params = &["a", "b", "c"][..arity];
    for n in 2..=4 {
        let decl: Vec<String> = params.iter().map(|p| format!("{arg}{n} {p}")).collect();
        let comps: Vec<String> = ["x", "y", "z", "w"][..n]
            .iter()
            .map(|c| {
                let args: Vec<String> = params.iter().map(|p| format!("{p}.{c}")).collect();
                format!("{name}({})", args.join(", "))
            })
            .collect();
        writeln!(
            out,
            "{ret}{n} {name}({}) {{\n    return {ret}{n}({});\n}}",
            decl.join(", "),
            comps.join(", ")
        )
        .unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(float_lit(1.0f32.to_bits()), "1.0");
        assert_eq!(float_lit((-0.5f32).to_bits()), "(-0.5)");
        assert_eq!(float_lit(1e-7f32.to_bits()), "1e-7");
        assert_eq!(
            float_lit(f32::INFINITY.to_bits()),
            "uintBitsToFloat(0x7f800000u)"
        );
        assert_eq!(int_lit(i32::MIN as u32), "(-2147483647 - 1)");
        assert_eq!(int_lit(-3i32 as u32), "(-3)");
    }

    #[test]
    fn names() {
        assert_eq!(var_name("x", 3), "x_3");
        assert_eq!(var_name("gl_x", 1), "vgl_x_1");
        assert_eq!(var_name("a__b_", 2), "a_b_2");
        assert_eq!(var_name("", 0), "v_0");
        assert_eq!(var_name("mpm_id", 4), "vmpm_id_4");
    }
}
