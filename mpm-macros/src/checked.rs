//! The checked form of a kernel or func body: what the checker (`check.rs`) accepts, in the
//! shape both emitters (`emit_cpu.rs`, `emit_trace.rs`) print from. Every language rule has
//! been applied by the time a value of these types exists, so printing cannot fail.

// Trees built once per body at compile time: boxing variants would buy nothing.
#![allow(clippy::large_enum_variant)]

use proc_macro2::{Span, TokenStream};
use syn::{Ident, Path, Type};

/// Statements and, for a block used as a value, its value.
pub struct Body {
    pub stmts: Vec<Stmt>,
    pub value: Option<Box<Expr>>,
}

pub enum Stmt {
    /// `let binding = value;`, or `let name: T;` without a value (assigned later).
    Let {
        binding: Binding,
        value: Option<Expr>,
    },
    /// `place = value` or `place op= value` on a local (`read` is the place as a value, for
    /// compound operators).
    Assign {
        place: Place,
        op: Option<&'static str>,
        read: Option<Expr>,
        value: Expr,
        span: Span,
    },
    /// `field[index] = value`, `+=` or `-=` (atomic).
    Store {
        field: Ident,
        index: Expr,
        op: Store,
        value: Expr,
        span: Span,
    },
    /// `let name = shared([fill; len]);` at a block loop's block scope.
    Shared {
        name: Ident,
        fill: Expr,
        len: syn::Expr,
    },
    /// `name[index] = value`, `+=` or `-=` (atomic among the lanes) on a shared array, in a
    /// `lanes` loop.
    SharedStore {
        name: Ident,
        index: Expr,
        op: Store,
        value: Expr,
        span: Span,
    },
    /// `for var in lanes(start..end)` at a block loop's block scope.
    Lanes {
        var: Ident,
        start: Expr,
        end: End,
        body: Body,
    },
    If(If),
    While {
        cond: Expr,
        body: Body,
    },
    Loop {
        body: Body,
    },
    /// A sequential `for` over `start..end` (`end` is exclusive).
    For {
        var: Ident,
        start: Expr,
        end: End,
        body: Body,
    },
    Break,
    /// `continue`; directly in a parallel loop it ends the invocation.
    Continue {
        ends_invocation: bool,
    },
    Return(Expr),
    Block(Body),
    /// An expression whose value is dropped.
    Discard(Expr),
}

pub enum Binding {
    Name {
        name: Ident,
        mutability: Option<syn::Token![mut]>,
        ty: Option<Type>,
    },
    Wild,
    /// `let (a, mut b) = ..` with 2 or 3 names.
    Tuple(Vec<(Option<syn::Token![mut]>, Ident)>),
}

impl Binding {
    /// The names the binding introduces.
    pub fn names(&self) -> Vec<&Ident> {
        match self {
            Binding::Name { name, .. } => vec![name],
            Binding::Wild => Vec::new(),
            Binding::Tuple(names) => names.iter().map(|(_, name)| name).collect(),
        }
    }
}

pub enum Place {
    Local(Path),
    Member(Box<Place>, syn::Member, u32),
    Index(Box<Place>, Expr),
}

#[derive(Clone, Copy)]
pub enum Store {
    Set,
    Add,
    Sub,
}

pub struct If {
    pub cond: Expr,
    pub then: Body,
    pub otherwise: Option<Else>,
}

pub enum Else {
    If(Box<If>),
    Block(Body),
}

/// The end of a sequential `for` range.
pub enum End {
    Exclusive(Expr),
    /// `..=n` with an integer literal: the trace can use `n + 1` directly.
    InclusiveLiteral(Expr, i64),
    Inclusive(Expr),
}

pub enum Expr {
    /// A literal, already in its kernel form (floats suffixed `f32`).
    Lit(TokenStream),
    /// `-literal`.
    NegLit(TokenStream),
    Local(Ident),
    /// A constant such as `Vec2::ZERO` or `core::f32::consts::PI`.
    Const(Path),
    Paren(Box<Expr>),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary {
        /// The operator's name in `mpm_core::lang` / `mpm_core::trace`.
        op: &'static str,
        /// Rust's own operator, used as is on the CPU (comparisons and `&&` / `||`).
        native: Option<TokenStream>,
        left: Box<Expr>,
        right: Box<Expr>,
        /// `&&` / `||` whose right operand records statements: traced as a branch.
        lazy: bool,
        span: Span,
    },
    Load {
        field: Ident,
        index: Box<Expr>,
        span: Span,
    },
    Index(Box<Expr>, Box<Expr>),
    /// `name[index]` on a shared array.
    SharedLoad {
        name: Ident,
        index: Box<Expr>,
    },
    Member(Box<Expr>, syn::Member, u32),
    /// A builtin or a user func: a function and a module of the same name whose `expand`
    /// traces the call.
    Call {
        path: Path,
        args: Vec<Expr>,
    },
    /// `x.name(args)`: the builtin `mpm_core::builtins::methods::name`, whose module holds
    /// both lowerings (`cpu` and `expand`), so that an unknown method is one error.
    Method {
        method: Ident,
        args: Vec<Expr>,
    },
    /// `Type::f(args)` on a glam type or an alias of one.
    Associated {
        path: Path,
        /// The trace constructor for `new` / `from_cols` (`vec2`, `mat3`, ...).
        ctor: Option<Ident>,
        f: Ident,
        args: Vec<Expr>,
    },
    /// `is_active` / `activate` / `deactivate` on a field.
    Activity {
        op: Ident,
        field: Ident,
        index: Box<Expr>,
        span: Span,
    },
    /// `atomic_add(field, index, value)` as the value of a `let`: the value before the add.
    FetchAdd {
        field: Ident,
        index: Box<Expr>,
        value: Box<Expr>,
        span: Span,
    },
    Cast {
        ty: Type,
        value: Box<Expr>,
        span: Span,
    },
    IfValue {
        cond: Box<Expr>,
        then: Body,
        otherwise: Box<ElseValue>,
    },
    Block(Body),
    Array(Vec<Expr>),
    Repeat(Box<Expr>, syn::Expr),
    Tuple(Vec<Expr>),
}

pub enum ElseValue {
    If(Expr),
    Block(Body),
}

/// A kernel body: top-level `let`s and parallel loops, in order.
pub enum Top {
    Let(Stmt),
    Loop(ParLoop),
}

pub struct ParLoop {
    /// The loop's label, if it has one (without the `'`).
    pub name: Option<String>,
    pub var: Ident,
    pub domain: Domain,
    pub body: Body,
    /// The field parameters the body names, in parameter order.
    pub used: Vec<Ident>,
    /// Fields the body only adds into: the CPU scatters them into private copies.
    pub scatter: Vec<Ident>,
    /// Fields the body only reads, some inside a loop of its own (a stencil): the CPU reads
    /// a sparse one through a dense snapshot (`mpm_core::snapshot`).
    pub snapshot: Vec<Ident>,
    /// Fields the body adds into (`+=` / `-=`): in a binned loop, the CPU adds into them
    /// without atomics inside a block's window.
    pub adds: Vec<Ident>,
    /// Fields the body stores into and names only at the loop's own index: the CPU stores
    /// into them without atomics (see `own_index_fields` in `check.rs`).
    pub owned: Vec<Ident>,
}

pub enum Domain {
    Active(Ident),
    Indices(Ident),
    /// `a..b`, or `a..=b` when the flag is set.
    Range(Expr, Expr, bool),
    /// `blocks(a..b)` (or `a..=b`): one block of lanes per index.
    Blocks(Expr, Expr, bool),
    /// `grid.bins(order, starts, block)`.
    Bins {
        grid: Ident,
        order: Ident,
        starts: Ident,
        block: Expr,
    },
}

/// Whether an expression holds statements (a block, or an `if` with a value), which may
/// assign locals.
pub fn runs_statements(e: &Expr) -> bool {
    !every_node(e, &|n| !matches!(n, Expr::IfValue { .. } | Expr::Block(_)))
}

/// Whether an expression's value is fixed by its text (literals, constants and operations
/// on them): it reads no local, field or shared array, so evaluating it earlier or later
/// gives the same value.
pub fn is_constant(e: &Expr) -> bool {
    every_node(e, &|n| {
        !matches!(
            n,
            Expr::Local(_)
                | Expr::Load { .. }
                | Expr::SharedLoad { .. }
                | Expr::Activity { .. }
                | Expr::FetchAdd { .. }
                | Expr::IfValue { .. }
                | Expr::Block(_)
        )
    })
}

/// Whether `ok` holds for `e` and every expression in it, down to blocks and `if`s with a
/// value, whose statements are not visited (`ok` must reject those nodes themselves).
pub fn every_node(e: &Expr, ok: &dyn Fn(&Expr) -> bool) -> bool {
    let all = |xs: &[Expr]| xs.iter().all(|x| every_node(x, ok));
    ok(e)
        && match e {
            Expr::Lit(_)
            | Expr::NegLit(_)
            | Expr::Local(_)
            | Expr::Const(_)
            | Expr::IfValue { .. }
            | Expr::Block(_) => true,
            Expr::Paren(x)
            | Expr::Neg(x)
            | Expr::Not(x)
            | Expr::Member(x, ..)
            | Expr::Repeat(x, _)
            | Expr::Cast { value: x, .. }
            | Expr::Load { index: x, .. }
            | Expr::SharedLoad { index: x, .. }
            | Expr::Activity { index: x, .. } => every_node(x, ok),
            Expr::Binary { left, right, .. } => every_node(left, ok) && every_node(right, ok),
            Expr::Index(a, b)
            | Expr::FetchAdd {
                index: a, value: b, ..
            } => every_node(a, ok) && every_node(b, ok),
            Expr::Call { args, .. }
            | Expr::Method { args, .. }
            | Expr::Associated { args, .. }
            | Expr::Array(args)
            | Expr::Tuple(args) => all(args),
        }
}
