//! The typed kernel IR that `#[kernel]` bodies are traced into (see [`crate::trace`]).
//!
//! Expressions are pure trees stored in an arena (`Kernel::exprs`); statements carry the
//! side effects (variables, field stores, atomics, control flow). Backends that generate code
//! (the Vulkan backend's GLSL printer) walk this structure.

use crate::types::{Scalar, Ty};

/// Index of an expression in [`Kernel::exprs`].
pub type ExprId = u32;
/// Index of a local variable in [`Kernel::vars`].
pub type VarId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    /// Remainder with the sign of the dividend (Rust's `%`).
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    /// Shift amounts are taken modulo 32 (Rust's `wrapping_shl`).
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Short-circuit logical and.
    And,
    /// Short-circuit logical or.
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    /// Logical not on bool, bitwise not on integers.
    Not,
}

pub use crate::builtins::Builtin;

/// A pure expression node.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A literal scalar (its 32-bit pattern; the type says how to read it).
    Lit(u32),
    /// The current value of a local variable (or func parameter).
    Var(VarId),
    /// Scalar kernel parameter number `n` (in parameter order, counting scalars only).
    Scalar(u32),
    Unary(UnOp, ExprId),
    Binary(BinOp, ExprId, ExprId),
    /// Numeric conversion with Rust `as` semantics for in-range values.
    Cast(ExprId),
    Builtin(Builtin, Vec<ExprId>),
    /// A call of a traced func, by index into [`Kernel::funcs`].
    Call(u32, Vec<ExprId>),
    /// Read of element `index` of field parameter `field` (index into [`Kernel::fields`]);
    /// out-of-range reads give zero and raise the out-of-bounds flag.
    Load {
        field: u32,
        index: ExprId,
    },
    /// Whether element `index` of field parameter `field` exists: always for an in-range
    /// index of a dense field, where its cell is active for a sparse one.
    IsActive {
        field: u32,
        index: ExprId,
    },
    /// The extent (u32) of field parameter `field` along `axis`.
    Extent {
        field: u32,
        axis: u32,
    },
    /// Element `index` (i32 or u32, clamped into range) of the shared array `var` of a
    /// block loop.
    SharedLoad {
        var: VarId,
        index: ExprId,
    },
    /// Vector component or matrix column `k`, or tuple member `k`.
    Member(ExprId, u32),
    /// Dynamic index into a local array, vector (component) or matrix (column).
    Index(ExprId, ExprId),
    /// Builds a vector, matrix (from columns), array or tuple of this expression's type from
    /// its parts. A vector or matrix with one scalar part is a splat; an array with one part is
    /// filled with it.
    Construct(Vec<ExprId>),
    /// `if c { a } else { b }` on values.
    Select(ExprId, ExprId, ExprId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Ty,
}

/// The target of an assignment.
#[derive(Clone, Debug, PartialEq)]
pub enum Place {
    Var(VarId),
    Member(Box<Place>, u32),
    Index(Box<Place>, ExprId),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// Declares `var` (its type is in [`Kernel::vars`]), initialised when `init` is given.
    Let {
        var: VarId,
        init: Option<ExprId>,
    },
    Assign {
        place: Place,
        value: ExprId,
    },
    Store {
        field: u32,
        index: ExprId,
        value: ExprId,
    },
    /// `field[index] += value`, atomic; `value` has the field's element type.
    AtomicAdd {
        field: u32,
        index: ExprId,
        value: ExprId,
    },
    /// Declares `var` as the value of `field[index]` before an atomic `+= value` (a one-word
    /// scalar field; zero, and nothing added, out of bounds).
    FetchAdd {
        var: VarId,
        field: u32,
        index: ExprId,
        value: ExprId,
    },
    /// Activates the cell of `field[index]` (a no-op on dense fields).
    Activate {
        field: u32,
        index: ExprId,
    },
    /// Deactivates the cell of `field[index]` when the launch ends (a no-op on dense fields).
    Deactivate {
        field: u32,
        index: ExprId,
    },
    If {
        cond: ExprId,
        then: Block,
        otherwise: Block,
    },
    /// `for var in start..end` with an integer var declared by the loop.
    For {
        var: VarId,
        start: ExprId,
        end: ExprId,
        body: Block,
    },
    /// `while cond { body }`; `cond` is evaluated before each iteration.
    While {
        cond: ExprId,
        body: Block,
    },
    /// Declares the shared array `var` (an array type in [`Kernel::vars`]) of the current
    /// block, every element set to `fill`; the block's lanes see it filled afterwards.
    Shared {
        var: VarId,
        fill: ExprId,
    },
    /// `var[index] = value`, or with `add` an atomic `var[index] += value`, on a shared array
    /// (the index clamped into range).
    SharedStore {
        var: VarId,
        index: ExprId,
        value: ExprId,
        add: bool,
    },
    /// `for var in lanes(start..end)`: the iterations spread over the block's lanes, then a
    /// barrier (every lane waits, and sees the block's shared and field writes).
    Lanes {
        var: VarId,
        start: ExprId,
        end: ExprId,
        body: Block,
    },
    Break,
    Continue,
    /// Return from a func (with a value), or end this invocation of a parallel loop (`None`).
    Return(Option<ExprId>),
}

pub type Block = Vec<Stmt>;

/// A local variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Var {
    pub ty: Ty,
    /// The Rust name, for readable generated code.
    pub name: String,
}

/// A field parameter of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldParam {
    pub name: String,
    pub elem: Ty,
    pub dims: u32,
    pub writable: bool,
}

/// What a parallel loop runs over.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopDomain {
    /// `for i in a..b`: the host computes `a` and the count; `var` is `a + invocation`.
    Range,
    /// `for i in field.indices()`: every index of field parameter `n`, the last axis fastest.
    Indices(u32),
    /// `for i in field.active()`: the active cells of field parameter `n` (every index of a
    /// dense field).
    Active(u32),
    /// `for b in blocks(a..b)`: like a range, but each `b` is a block, run by a group of lanes
    /// (one workgroup on a GPU, one worker on the CPU) that share its `shared` arrays.
    Blocks,
}

/// One top-level `for` of a kernel: one parallel launch, with a barrier after it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParLoop {
    pub domain: LoopDomain,
    /// The loop index variable (i32 or u32 for ranges; u32, IVec2 or IVec3 for indices).
    pub var: VarId,
    pub body: Block,
}

/// A traced `#[func]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// Unique name (module path and function name).
    pub key: String,
    pub params: Vec<VarId>,
    pub ret: Ty,
    pub body: Block,
}

/// A traced kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub fields: Vec<FieldParam>,
    pub scalars: Vec<Ty>,
    /// The scalars marked `#[specialize]` (bool, i32 or u32): a GPU backend compiles their
    /// values into the code, so that branches they decide cost nothing where not taken.
    pub specialized: Vec<u32>,
    /// Shared expression arena for the loops and funcs.
    pub exprs: Vec<Expr>,
    pub vars: Vec<Var>,
    /// Funcs in dependency order: a func only calls funcs before it.
    pub funcs: Vec<Func>,
    pub loops: Vec<ParLoop>,
}

impl Kernel {
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id as usize]
    }
    pub fn var(&self, id: VarId) -> &Var {
        &self.vars[id as usize]
    }
}

impl Scalar {
    pub fn is_int(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::U32)
    }
}
