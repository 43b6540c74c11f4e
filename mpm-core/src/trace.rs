//! The tracer: the GPU lowering of `#[kernel]` / `#[func]` bodies.
//!
//! The macro rewrites a kernel body into calls of this module over typed handles
//! ([`Expr<T>`]), so rustc gives every value its type; running that code records the
//! [`ir::Kernel`]. Control flow becomes closures (`if_`, `for_range`, ...) that are traced once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;

use glam::{IVec2, IVec3, Mat2, Mat3, UVec2, UVec3, Vec2, Vec3, Vec4};

use crate::error::{Error, Result};
use crate::ir::{
    self, BinOp, Block, Builtin, ExprId, ExprKind, Place as IrPlace, Stmt, UnOp, VarId,
};
use crate::types::{Elem, Scalar, Ty, Value};

struct Tracer {
    kernel: ir::Kernel,
    /// Statement blocks being filled, innermost last.
    blocks: Vec<Block>,
    /// Statements before the first loop; every loop body starts with them.
    prologue: Block,
    funcs: HashMap<String, u32>,
    /// Funcs being traced (to reject recursion).
    in_progress: Vec<String>,
    error: Option<String>,
}

thread_local! {
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Tracer) -> R) -> R {
    TRACER.with(|t| {
        let mut t = t.borrow_mut();
        let t = t
            .as_mut()
            .expect("kernel-language operations run only inside a kernel trace");
        f(t)
    })
}

fn fail(message: String) {
    with(|t| {
        t.error.get_or_insert(message);
    });
}

fn push_expr(kind: ExprKind, ty: Ty) -> ExprId {
    with(|t| {
        t.kernel.exprs.push(ir::Expr { kind, ty });
        (t.kernel.exprs.len() - 1) as ExprId
    })
}

fn push_stmt(stmt: Stmt) {
    with(|t| {
        t.blocks
            .last_mut()
            .expect("a statement block is open")
            .push(stmt)
    });
}

fn new_var(name: &str, ty: Ty) -> VarId {
    with(|t| {
        t.kernel.vars.push(ir::Var {
            ty,
            name: name.to_string(),
        });
        (t.kernel.vars.len() - 1) as VarId
    })
}

/// Traces `f` into a fresh block and returns it.
fn block(f: impl FnOnce()) -> Block {
    with(|t| t.blocks.push(Vec::new()));
    f();
    with(|t| t.blocks.pop().expect("block stack balanced"))
}

fn expr_ty(id: ExprId) -> Ty {
    with(|t| t.kernel.exprs[id as usize].ty.clone())
}

/// A typed value during tracing: a handle to an expression node.
pub struct Expr<T> {
    id: ExprId,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Expr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Expr<T> {}

impl<T: Value> Expr<T> {
    fn new(kind: ExprKind) -> Self {
        Self::from_id(push_expr(kind, T::ty()))
    }
    fn from_id(id: ExprId) -> Self {
        Expr {
            id,
            _t: PhantomData,
        }
    }
    pub fn id(self) -> ExprId {
        self.id
    }
}

/// Anything usable where an `Expr<T>` is expected: the expression itself or a Rust literal.
pub trait IntoExpr<T> {
    fn into_expr(self) -> Expr<T>;
}
impl<T> IntoExpr<T> for Expr<T> {
    fn into_expr(self) -> Expr<T> {
        self
    }
}
macro_rules! literal_into_expr {
    ($($t:ty),*) => {$(
        impl IntoExpr<$t> for $t {
            fn into_expr(self) -> Expr<$t> {
                constant(self)
            }
        }
    )*};
}
literal_into_expr!(f32, i32, u32, bool);

/// Converts a literal or expression (used by generated code to fix types).
pub fn into_expr<T, A: IntoExpr<T>>(a: A) -> Expr<T> {
    a.into_expr()
}

/// An element value as a constant expression.
pub fn constant<T: Elem>(value: T) -> Expr<T> {
    let mut words = [0u32; 16];
    value.write_words(&mut words[..T::WORDS]);
    let ty = T::ty();
    match ty.clone() {
        Ty::Scalar(_) => Expr::new(ExprKind::Lit(words[0])),
        Ty::Vector(s, n) => {
            let parts = (0..n as usize)
                .map(|k| push_expr(ExprKind::Lit(words[k]), Ty::Scalar(s)))
                .collect();
            Expr::new(ExprKind::Construct(parts))
        }
        Ty::Matrix(n) => {
            let n = n as usize;
            let cols = (0..n)
                .map(|c| {
                    let parts = (0..n)
                        .map(|r| push_expr(ExprKind::Lit(words[c * n + r]), Ty::F32))
                        .collect();
                    push_expr(ExprKind::Construct(parts), Ty::Vector(Scalar::F32, n as u8))
                })
                .collect();
            Expr::new(ExprKind::Construct(cols))
        }
        Ty::Array(..) | Ty::Tuple(_) => unreachable!("elements are scalars, vectors or matrices"),
    }
}

// ---------------------------------------------------------------------------------------------
// Kernel and loop structure

/// A field parameter during tracing.
pub struct FieldRef<T, const D: usize> {
    n: u32,
    _t: PhantomData<fn() -> T>,
}
impl<T, const D: usize> Clone for FieldRef<T, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const D: usize> Copy for FieldRef<T, D> {}

/// Declares field parameter `n` (generated code).
pub fn field<T: Elem, const D: usize>(n: u32) -> FieldRef<T, D> {
    FieldRef { n, _t: PhantomData }
}

/// Declares the scalar parameter with scalar number `n` (generated code).
pub fn scalar<T: Elem>(n: u32) -> Expr<T> {
    Expr::new(ExprKind::Scalar(n))
}

/// Traces a whole kernel (generated code calls this from its `trace` function).
pub fn kernel(
    name: &str,
    fields: Vec<ir::FieldParam>,
    scalars: Vec<Ty>,
    specialized: Vec<u32>,
    body: impl FnOnce(),
) -> Result<ir::Kernel> {
    let tracer = Tracer {
        kernel: ir::Kernel {
            name: name.to_string(),
            fields,
            scalars,
            specialized,
            ..Default::default()
        },
        blocks: vec![Vec::new()],
        prologue: Vec::new(),
        funcs: HashMap::new(),
        in_progress: Vec::new(),
        error: None,
    };
    TRACER.with(|t| {
        let previous = t.borrow_mut().replace(tracer);
        assert!(previous.is_none(), "kernel traces do not nest");
    });
    body();
    let tracer = TRACER
        .with(|t| t.borrow_mut().take())
        .expect("tracer present");
    match tracer.error {
        Some(message) => Err(Error::Trace {
            kernel: name.to_string(),
            message,
        }),
        None => Ok(tracer.kernel),
    }
}

fn par_loop<I: Value>(domain: ir::LoopDomain, name: &str, body: impl FnOnce(Expr<I>)) {
    // Statements recorded so far at the top level belong to every later loop.
    with(|t| {
        let top = std::mem::take(t.blocks.last_mut().expect("top block"));
        t.prologue.extend(top);
    });
    let var = new_var(name, I::ty());
    let prologue = with(|t| t.prologue.clone());
    let mut stmts = block(|| body(Expr::new(ExprKind::Var(var))));
    stmts.splice(0..0, prologue);
    with(|t| {
        t.kernel.loops.push(ir::ParLoop {
            domain,
            var,
            body: stmts,
        })
    });
}

/// A top-level `for i in start..end`: one parallel launch.
pub fn par_range<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
) {
    host_range_loop(ir::LoopDomain::Range, name, start, end, body);
}

/// A top-level loop over a range the host computes: tracing the bounds only fixes the
/// index type.
fn host_range_loop<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    domain: ir::LoopDomain,
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
) {
    let _ = (start.into_expr(), end.into_expr());
    par_loop(domain, name, body);
}

/// A top-level `for i in field.indices()`: one parallel launch over every index.
pub fn par_indices<T, const D: usize>(
    name: &str,
    field: FieldRef<T, D>,
    body: impl FnOnce(Expr<<() as IndexOf<D>>::Index>),
) where
    (): IndexOf<D>,
{
    par_loop(ir::LoopDomain::Indices(field.n), name, body);
}

/// A top-level `for i in field.active()`: one parallel launch over the active cells.
pub fn par_active<T, const D: usize>(
    name: &str,
    field: FieldRef<T, D>,
    body: impl FnOnce(Expr<<() as IndexOf<D>>::Index>),
) where
    (): IndexOf<D>,
{
    par_loop(ir::LoopDomain::Active(field.n), name, body);
}

/// A top-level `for p in grid.bins(order, starts, block)`: one invocation per entry of
/// `order`; those past `starts[bins]`, the end of the last of the grid's `bins` blocks, do
/// nothing, the others run the body with `p = order[k]` (see [`crate::bins`] for the CPU).
pub fn par_bins<G, const D: usize>(
    name: &str,
    grid: FieldRef<G, D>,
    order: FieldRef<u32, 1>,
    starts: FieldRef<u32, 1>,
    block: impl IntoExpr<i32>,
    body: impl FnOnce(Expr<u32>),
) {
    let block = block.into_expr();
    let block = cast::<u32, i32, _>(select(lt(block, 2), 2, block));
    par_loop(ir::LoopDomain::Indices(order.n), name, |k: Expr<u32>| {
        let mut bins = constant(1u32);
        for axis in 0..D as u32 {
            let extent = Expr::<u32>::new(ExprKind::Extent {
                field: grid.n,
                axis,
            });
            bins = mul(bins, div(sub(add(extent, block), 1u32), block));
        }
        let end = load(starts, bins);
        if_(lt(k, end), || body(let_("p", load(order, k))), || {});
    });
}

/// A top-level `for b in blocks(start..end)`: one block of lanes per `b` (see
/// [`ir::LoopDomain::Blocks`]).
pub fn par_blocks<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
) {
    host_range_loop(ir::LoopDomain::Blocks, name, start, end, body);
}

/// `for i in lanes(start..end)` in a block loop: the iterations spread over the block's
/// lanes, with a barrier after them.
pub fn lanes<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
) {
    counted_loop(name, start, end, body, |var, start, end, body| {
        Stmt::Lanes {
            var,
            start,
            end,
            body,
        }
    });
}

/// A loop of `var` over `start..end` traced as `stmt(var, start, end, body)`.
fn counted_loop<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
    stmt: impl FnOnce(VarId, ExprId, ExprId, Block) -> Stmt,
) {
    let (start, end) = (start.into_expr(), end.into_expr());
    let var = new_var(name, T::ty());
    let body = block(|| body(Expr::new(ExprKind::Var(var))));
    push_stmt(stmt(var, start.id, end.id, body));
}

/// A block's shared array of `T` during tracing: used only element by element.
pub struct Shared<T> {
    var: VarId,
    _t: PhantomData<fn() -> T>,
}

/// `let tile = shared([fill; len]);` in a block loop.
pub fn shared<T: Elem, A: IntoExpr<T>>(name: &str, fill: A, len: usize) -> Shared<T> {
    let fill = fill.into_expr();
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    let var = new_var(name, Ty::Array(Box::new(T::ty()), len));
    push_stmt(Stmt::Shared { var, fill: fill.id });
    Shared {
        var,
        _t: PhantomData,
    }
}

/// `tile[i]` on a shared array.
pub fn shared_load<T: Elem>(s: &Shared<T>, i: impl LocalIndex) -> Expr<T> {
    Expr::new(ExprKind::SharedLoad {
        var: s.var,
        index: i.index_expr(),
    })
}

/// `tile[i] = value` on a shared array.
pub fn shared_store<T: Elem, A: IntoExpr<T>>(s: &Shared<T>, i: impl LocalIndex, value: A) {
    shared_write(s, i, value.into_expr(), false);
}

/// `tile[i] += value` on a shared array (atomic among the block's lanes).
pub fn shared_add<T: crate::host::AtomicAdd, A: IntoExpr<T>>(
    s: &Shared<T>,
    i: impl LocalIndex,
    value: A,
) {
    shared_write(s, i, value.into_expr(), true);
}

/// A store into (or with `add`, an add into) element `i` of a shared array.
fn shared_write<T>(s: &Shared<T>, i: impl LocalIndex, value: Expr<T>, add: bool) {
    push_stmt(Stmt::SharedStore {
        var: s.var,
        index: i.index_expr(),
        value: value.id,
        add,
    });
}

/// `tile[i] -= value` on a shared array: the add of the negated value.
pub fn shared_sub<T: crate::host::AtomicAdd, A: IntoExpr<T>>(
    s: &Shared<T>,
    i: impl LocalIndex,
    value: A,
) {
    shared_add(s, i, negate(value.into_expr()));
}

/// Integer types a loop variable can have.
pub trait LoopVar: Value {}
impl LoopVar for i32 {}
impl LoopVar for u32 {}

/// The index type of `indices()` for a field of `D` dimensions.
pub trait IndexOf<const D: usize> {
    type Index: Value;
}
impl IndexOf<1> for () {
    type Index = u32;
}
impl IndexOf<2> for () {
    type Index = IVec2;
}
impl IndexOf<3> for () {
    type Index = IVec3;
}

// ---------------------------------------------------------------------------------------------
// Statements

/// `let name = value;` (also `let mut`).
pub fn let_<T: Value, A: IntoExpr<T>>(name: &str, value: A) -> Expr<T> {
    let value = value.into_expr();
    let var = new_var(name, T::ty());
    push_stmt(Stmt::Let {
        var,
        init: Some(value.id),
    });
    Expr::new(ExprKind::Var(var))
}

/// `let name: T;`, a local assigned later (the CPU lowering keeps the `let` as written, so
/// rustc checks that every path assigns it before a read, as in Rust).
pub fn declare<T: Value>(name: &str) -> Expr<T> {
    let var = new_var(name, T::ty());
    push_stmt(Stmt::Let { var, init: None });
    Expr::new(ExprKind::Var(var))
}

/// An assignable location: a local variable, or a component / element of one.
pub struct Place<T> {
    place: IrPlace,
    _t: PhantomData<fn() -> T>,
}

/// The place of a local variable.
pub fn place<T: Value>(var: Expr<T>) -> Place<T> {
    let kind = with(|t| t.kernel.exprs[var.id as usize].kind.clone());
    match kind {
        ExprKind::Var(v) => Place {
            place: IrPlace::Var(v),
            _t: PhantomData,
        },
        _ => {
            fail("only local variables (and their components) can be assigned".into());
            Place {
                place: IrPlace::Var(0),
                _t: PhantomData,
            }
        }
    }
}

impl<T: Value> Place<T> {
    /// The current value of the place.
    pub fn get(&self) -> Expr<T> {
        fn read(p: &IrPlace) -> ExprId {
            match p {
                IrPlace::Var(v) => {
                    let ty = with(|t| t.kernel.vars[*v as usize].ty.clone());
                    push_expr(ExprKind::Var(*v), ty)
                }
                IrPlace::Member(b, k) => {
                    let base = read(b);
                    let ty = member_ty(&expr_ty(base), *k);
                    push_expr(ExprKind::Member(base, *k), ty)
                }
                IrPlace::Index(b, i) => {
                    let base = read(b);
                    let ty = element_ty(&expr_ty(base));
                    push_expr(ExprKind::Index(base, *i), ty)
                }
            }
        }
        Expr::from_id(read(&self.place))
    }
}

fn member_ty(ty: &Ty, k: u32) -> Ty {
    match ty {
        Ty::Vector(s, _) => Ty::Scalar(*s),
        Ty::Matrix(n) => Ty::Vector(Scalar::F32, *n),
        Ty::Tuple(ts) => ts[k as usize].clone(),
        other => panic!("type {other:?} has no members"),
    }
}

fn element_ty(ty: &Ty) -> Ty {
    match ty {
        Ty::Array(t, _) => (**t).clone(),
        other => member_ty(other, 0),
    }
}

/// Types with numbered components: vectors (scalars), matrices (columns).
pub trait Members: Value {
    type Item: Value;
    const LEN: u32;
}
macro_rules! members {
    ($($t:ty => $i:ty, $n:expr);*) => {$(
        impl Members for $t {
            type Item = $i;
            const LEN: u32 = $n;
        }
    )*};
}
members!(Vec2 => f32, 2; Vec3 => f32, 3; Vec4 => f32, 4; IVec2 => i32, 2; IVec3 => i32, 3;
         UVec2 => u32, 2; UVec3 => u32, 3; Mat2 => Vec2, 2; Mat3 => Vec3, 3);

/// Types that `a[i]` indexes: local arrays, vectors and matrices.
pub trait Indexable: Value {
    type Item: Value;
}
impl<T: Value, const N: usize> Indexable for [T; N] {
    type Item = T;
}
impl<T: Members> Indexable for T {
    type Item = T::Item;
}

/// Index types accepted by local `a[i]`.
pub trait LocalIndex {
    fn index_expr(self) -> ExprId;
}
impl LocalIndex for Expr<i32> {
    fn index_expr(self) -> ExprId {
        self.id
    }
}
impl LocalIndex for Expr<u32> {
    fn index_expr(self) -> ExprId {
        self.id
    }
}
impl LocalIndex for i32 {
    fn index_expr(self) -> ExprId {
        constant(self).id
    }
}
impl LocalIndex for u32 {
    fn index_expr(self) -> ExprId {
        constant(self).id
    }
}

/// Component `k` of a vector or column `k` of a matrix (`v.x`, `m.x_axis`).
pub fn member<T: Members>(e: Expr<T>, k: u32) -> Expr<T::Item> {
    Expr::new(ExprKind::Member(e.id, k))
}

/// The place of component / column `k`.
pub fn place_member<T: Members>(p: Place<T>, k: u32) -> Place<T::Item> {
    Place {
        place: IrPlace::Member(Box::new(p.place), k),
        _t: PhantomData,
    }
}

/// `a[i]` on a local array, vector or matrix (the index is clamped into range).
pub fn index<T: Indexable>(e: Expr<T>, i: impl LocalIndex) -> Expr<T::Item> {
    Expr::new(ExprKind::Index(e.id, i.index_expr()))
}

/// The place `a[i]`.
pub fn place_index<T: Indexable>(p: Place<T>, i: impl LocalIndex) -> Place<T::Item> {
    Place {
        place: IrPlace::Index(Box::new(p.place), i.index_expr()),
        _t: PhantomData,
    }
}

/// `place = value`.
pub fn assign<T: Value, A: IntoExpr<T>>(p: Place<T>, value: A) {
    let value = value.into_expr();
    push_stmt(Stmt::Assign {
        place: p.place,
        value: value.id,
    });
}

/// Index types accepted by a field of `D` dimensions.
#[diagnostic::on_unimplemented(
    message = "this index does not fit a {D}-D field",
    label = "a 1-D field takes a u32 or i32, a 2-D one an IVec2 or UVec2, a 3-D one an IVec3 or UVec3, a 0-D one `()`"
)]
pub trait FieldIndex<const D: usize> {
    fn index_expr(self) -> ExprId;
}
macro_rules! field_index {
    ($d:literal: $($t:ty),*) => {$(
        impl FieldIndex<$d> for Expr<$t> {
            fn index_expr(self) -> ExprId {
                self.id
            }
        }
    )*};
}
field_index!(1: i32, u32);
field_index!(2: IVec2, UVec2);
field_index!(3: IVec3, UVec3);
impl FieldIndex<1> for i32 {
    fn index_expr(self) -> ExprId {
        constant(self).id
    }
}
impl FieldIndex<1> for u32 {
    fn index_expr(self) -> ExprId {
        constant(self).id
    }
}
impl FieldIndex<0> for () {
    fn index_expr(self) -> ExprId {
        constant(0u32).id
    }
}

/// `field[index]`.
pub fn load<T: Elem, const D: usize>(f: FieldRef<T, D>, index: impl FieldIndex<D>) -> Expr<T> {
    let index = index.index_expr();
    Expr::new(ExprKind::Load { field: f.n, index })
}

/// `is_active(field, index)`.
pub fn is_active<T: Elem, const D: usize>(
    f: FieldRef<T, D>,
    index: impl FieldIndex<D>,
) -> Expr<bool> {
    let index = index.index_expr();
    Expr::new(ExprKind::IsActive { field: f.n, index })
}

/// `activate(field, index)`.
pub fn activate<T: Elem, const D: usize>(f: FieldRef<T, D>, index: impl FieldIndex<D>) {
    let index = index.index_expr();
    push_stmt(Stmt::Activate { field: f.n, index });
}

/// `deactivate(field, index)`.
pub fn deactivate<T: Elem, const D: usize>(f: FieldRef<T, D>, index: impl FieldIndex<D>) {
    let index = index.index_expr();
    push_stmt(Stmt::Deactivate { field: f.n, index });
}

/// A field index held in a fresh local (see [`hold_index`]).
#[derive(Clone, Copy)]
pub struct HeldIndex(ExprId);
impl<const D: usize> FieldIndex<D> for HeldIndex {
    fn index_expr(self) -> ExprId {
        self.0
    }
}

/// `index` held in a local before a store's value runs statements: the IR reads a variable
/// where it is used, so the store of `f[at] = { at += d; .. }` would go where the block
/// moved `at`; held, it goes where `at` was, as on the CPU, which computes the index first.
pub fn hold_index<T, const D: usize>(_f: FieldRef<T, D>, index: impl FieldIndex<D>) -> HeldIndex {
    let id = index.index_expr();
    let ty = expr_ty(id);
    let var = new_var("index", ty.clone());
    push_stmt(Stmt::Let {
        var,
        init: Some(id),
    });
    HeldIndex(push_expr(ExprKind::Var(var), ty))
}

/// `field[index] = value`.
pub fn store<T: Elem, const D: usize, A: IntoExpr<T>>(
    f: FieldRef<T, D>,
    index: impl FieldIndex<D>,
    value: A,
) {
    let index = index.index_expr();
    let value = value.into_expr();
    push_stmt(Stmt::Store {
        field: f.n,
        index,
        value: value.id,
    });
}

/// `field[index] += value` (atomic).
pub fn atomic_add<T: crate::host::AtomicAdd, const D: usize, A: IntoExpr<T>>(
    f: FieldRef<T, D>,
    index: impl FieldIndex<D>,
    value: A,
) {
    let index = index.index_expr();
    let value = value.into_expr();
    push_stmt(Stmt::AtomicAdd {
        field: f.n,
        index,
        value: value.id,
    });
}

/// `let old = atomic_add(field, index, value);`: the atomic add, and the value before it.
pub fn fetch_add<T: crate::host::FetchAdd, const D: usize, A: IntoExpr<T>>(
    f: FieldRef<T, D>,
    index: impl FieldIndex<D>,
    value: A,
) -> Expr<T> {
    let index = index.index_expr();
    let value = value.into_expr();
    let var = new_var("old", T::ty());
    push_stmt(Stmt::FetchAdd {
        var,
        field: f.n,
        index,
        value: value.id,
    });
    Expr::new(ExprKind::Var(var))
}

/// `field[index] -= value` (atomic): an atomic add of `-value` (exact for floats, wrapping
/// for integers).
pub fn atomic_sub<T: crate::host::AtomicAdd, const D: usize, A: IntoExpr<T>>(
    f: FieldRef<T, D>,
    index: impl FieldIndex<D>,
    value: A,
) {
    atomic_add(f, index, negate(value.into_expr()));
}

/// `-value` for the add that a `-=` is (integers wrap: `0 - value`).
fn negate<T: crate::host::AtomicAdd>(value: Expr<T>) -> Expr<T> {
    if T::SCALAR == Scalar::F32 {
        Expr::<T>::new(ExprKind::Unary(UnOp::Neg, value.id))
    } else {
        let zero = constant(T::zero());
        binary(BinOp::Sub, zero.id, value.id)
    }
}

/// `if cond { then } else { otherwise }` as a statement.
pub fn if_<C: IntoExpr<bool>>(cond: C, then: impl FnOnce(), otherwise: impl FnOnce()) {
    let cond = cond.into_expr();
    let then = block(then);
    let otherwise = block(otherwise);
    push_stmt(Stmt::If {
        cond: cond.id,
        then,
        otherwise,
    });
}

/// `if cond { a } else { b }` as a value.
pub fn if_value<T: Value, C: IntoExpr<bool>, A: IntoExpr<T>, B: IntoExpr<T>>(
    cond: C,
    then: impl FnOnce() -> A,
    otherwise: impl FnOnce() -> B,
) -> Expr<T> {
    let cond = cond.into_expr();
    let var = new_var("branch", T::ty());
    push_stmt(Stmt::Let { var, init: None });
    let then = block(|| {
        let v = then().into_expr();
        push_stmt(Stmt::Assign {
            place: IrPlace::Var(var),
            value: v.id,
        });
    });
    let otherwise = block(|| {
        let v = otherwise().into_expr();
        push_stmt(Stmt::Assign {
            place: IrPlace::Var(var),
            value: v.id,
        });
    });
    push_stmt(Stmt::If {
        cond: cond.id,
        then,
        otherwise,
    });
    Expr::new(ExprKind::Var(var))
}

/// A sequential `for i in start..end` inside a loop body or func.
pub fn for_range<T: LoopVar, A: IntoExpr<T>, B: IntoExpr<T>>(
    name: &str,
    start: A,
    end: B,
    body: impl FnOnce(Expr<T>),
) {
    counted_loop(name, start, end, body, |var, start, end, body| Stmt::For {
        var,
        start,
        end,
        body,
    });
}

/// `while cond { body }` (and `loop { body }` with a `true` condition).
pub fn while_<C: IntoExpr<bool>>(cond: impl FnOnce() -> C, body: impl FnOnce()) {
    let mut cond_id = 0;
    let cond_stmts = block(|| cond_id = cond().into_expr().id);
    let mut body = block(body);
    if cond_stmts.is_empty() {
        push_stmt(Stmt::While {
            cond: cond_id,
            body,
        });
    } else {
        // The condition needs statements: evaluate it at the top of an endless loop.
        let not = push_expr(ExprKind::Unary(UnOp::Not, cond_id), Ty::BOOL);
        let mut full = cond_stmts;
        full.push(Stmt::If {
            cond: not,
            then: vec![Stmt::Break],
            otherwise: vec![],
        });
        full.append(&mut body);
        let yes = constant(true).id;
        push_stmt(Stmt::While {
            cond: yes,
            body: full,
        });
    }
}

pub fn break_() {
    push_stmt(Stmt::Break);
}

pub fn continue_() {
    push_stmt(Stmt::Continue);
}

/// `return` from the current parallel-loop invocation.
pub fn return_() {
    push_stmt(Stmt::Return(None));
}

/// `return value` from a func.
pub fn return_value<T: Value, A: IntoExpr<T>>(value: A) {
    let value = value.into_expr();
    push_stmt(Stmt::Return(Some(value.id)));
}

/// A call of the `#[func]` identified by `key`: traces its body on first use.
pub fn call<R: Value>(
    key: &str,
    name: &str,
    args: &[(ExprId, Ty)],
    body: impl FnOnce(&[ExprId]),
) -> Expr<R> {
    let known = with(|t| t.funcs.get(key).copied());
    let index = match known {
        Some(i) => i,
        None => {
            if with(|t| t.in_progress.iter().any(|k| k == key)) {
                fail(format!(
                    "func `{name}` calls itself; recursion is not supported in kernels"
                ));
                return Expr::new(ExprKind::Lit(0));
            }
            with(|t| t.in_progress.push(key.to_string()));
            let params: Vec<VarId> = args
                .iter()
                .enumerate()
                .map(|(k, (_, ty))| new_var(&format!("a{k}"), ty.clone()))
                .collect();
            let param_exprs: Vec<ExprId> = params
                .iter()
                .zip(args)
                .map(|(v, (_, ty))| push_expr(ExprKind::Var(*v), ty.clone()))
                .collect();
            let body = block(|| body(&param_exprs));
            with(|t| {
                t.in_progress.pop();
                t.kernel.funcs.push(ir::Func {
                    key: key.to_string(),
                    params,
                    ret: R::ty(),
                    body,
                });
                let i = (t.kernel.funcs.len() - 1) as u32;
                t.funcs.insert(key.to_string(), i);
                i
            })
        }
    };
    Expr::new(ExprKind::Call(
        index,
        args.iter().map(|(e, _)| *e).collect(),
    ))
}

/// Erases an argument's type for [`call`].
pub fn arg<T: Value>(e: Expr<T>) -> (ExprId, Ty) {
    (e.id, T::ty())
}

/// A func parameter inside [`call`]'s body.
pub fn param<T: Value>(params: &[ExprId], k: usize) -> Expr<T> {
    Expr::from_id(params[k])
}

// ---------------------------------------------------------------------------------------------
// Operators: one table of (left, right, result) types, shared with the CPU lowering in
// `crate::lang` through `crate::op_table!`.

use std::ops::Neg;

macro_rules! binary_trait {
    ($tr:ident, $f:ident, $op:ident, $message:literal) => {
        #[doc = concat!("The `", stringify!($f), "` operator on traced values.")]
        #[diagnostic::on_unimplemented(
            message = $message,
            label = "both sides need the same scalar type, or a vector or matrix and its scalar; convert with `as`"
        )]
        pub trait $tr<R> {
            type Output;
            fn apply(self, rhs: R) -> Self::Output;
        }
        #[doc = concat!("Traced `", stringify!($f), "`.")]
        pub fn $f<L: $tr<R>, R>(l: L, r: R) -> L::Output {
            l.apply(r)
        }
    };
}
binary_trait!(
    TAdd,
    add,
    Add,
    "the operands of `+` have types the kernel language does not combine"
);
binary_trait!(
    TSub,
    sub,
    Sub,
    "the operands of `-` have types the kernel language does not combine"
);
binary_trait!(
    TMul,
    mul,
    Mul,
    "the operands of `*` have types the kernel language does not combine"
);
binary_trait!(
    TDiv,
    div,
    Div,
    "the operands of `/` have types the kernel language does not combine"
);
binary_trait!(
    TRem,
    rem,
    Rem,
    "the operands of `%` have types the kernel language does not combine"
);
binary_trait!(
    TBitAnd,
    bitand,
    BitAnd,
    "the operands of `&` have types the kernel language does not combine"
);
binary_trait!(
    TBitOr,
    bitor,
    BitOr,
    "the operands of `|` have types the kernel language does not combine"
);
binary_trait!(
    TBitXor,
    bitxor,
    BitXor,
    "the operands of `^` have types the kernel language does not combine"
);
binary_trait!(
    TShl,
    shl,
    Shl,
    "the operands of `<<` have types the kernel language does not combine"
);
binary_trait!(
    TShr,
    shr,
    Shr,
    "the operands of `>>` have types the kernel language does not combine"
);

fn binary<O: Value>(op: BinOp, l: ExprId, r: ExprId) -> Expr<O> {
    Expr::new(ExprKind::Binary(op, l, r))
}

/// Implements a traced operator for expressions and for a literal on either side.
#[doc(hidden)]
#[macro_export]
macro_rules! __trace_binary {
    ($tr:ident, $op:ident, $l:ty, $r:ty, $o:ty) => {
        impl $crate::trace::$tr<$crate::trace::Expr<$r>> for $crate::trace::Expr<$l> {
            type Output = $crate::trace::Expr<$o>;
            fn apply(self, r: $crate::trace::Expr<$r>) -> Self::Output {
                $crate::trace::__binary($crate::ir::BinOp::$op, self.id(), r.id())
            }
        }
    };
    (lit_r $tr:ident, $op:ident, $l:ty, $r:ty, $o:ty) => {
        impl $crate::trace::$tr<$r> for $crate::trace::Expr<$l> {
            type Output = $crate::trace::Expr<$o>;
            fn apply(self, r: $r) -> Self::Output {
                $crate::trace::__binary(
                    $crate::ir::BinOp::$op,
                    self.id(),
                    $crate::trace::constant(r).id(),
                )
            }
        }
    };
    (lit_both $tr:ident, $op:ident, $l:ty, $r:ty, $o:ty) => {
        impl $crate::trace::$tr<$r> for $l {
            type Output = $crate::trace::Expr<$o>;
            fn apply(self, r: $r) -> Self::Output {
                let l = $crate::trace::constant(self).id();
                $crate::trace::__binary($crate::ir::BinOp::$op, l, $crate::trace::constant(r).id())
            }
        }
    };
    (lit_l $tr:ident, $op:ident, $l:ty, $r:ty, $o:ty) => {
        impl $crate::trace::$tr<$crate::trace::Expr<$r>> for $l {
            type Output = $crate::trace::Expr<$o>;
            fn apply(self, r: $crate::trace::Expr<$r>) -> Self::Output {
                $crate::trace::__binary(
                    $crate::ir::BinOp::$op,
                    $crate::trace::constant(self).id(),
                    r.id(),
                )
            }
        }
    };
}

#[doc(hidden)]
pub fn __binary<O: Value>(op: BinOp, l: ExprId, r: ExprId) -> Expr<O> {
    binary(op, l, r)
}

/// Both lowerings of one operator combination.
macro_rules! op {
    ($tr:ident, $ctr:ident, $op:ident, $l:ty, $r:ty, $o:ty, $cpu:expr) => {
        crate::__trace_binary!($tr, $op, $l, $r, $o);
        impl crate::lang::$ctr<$r> for $l {
            type Output = $o;
            #[inline]
            fn apply(self, r: $r) -> $o {
                let f: fn($l, $r) -> $o = $cpu;
                f(self, r)
            }
        }
    };
}

/// Arithmetic combinations of a scalar type with itself (prim literal on either side too).
macro_rules! scalar_ops {
    ($t:ty, $add:expr, $sub:expr, $mul:expr, $div:expr, $rem:expr) => {
        op!(TAdd, KAdd, Add, $t, $t, $t, $add);
        op!(TSub, KSub, Sub, $t, $t, $t, $sub);
        op!(TMul, KMul, Mul, $t, $t, $t, $mul);
        op!(TDiv, KDiv, Div, $t, $t, $t, $div);
        op!(TRem, KRem, Rem, $t, $t, $t, $rem);
        crate::__trace_binary!(lit_r TAdd, Add, $t, $t, $t);
        crate::__trace_binary!(lit_l TAdd, Add, $t, $t, $t);
        crate::__trace_binary!(lit_r TSub, Sub, $t, $t, $t);
        crate::__trace_binary!(lit_l TSub, Sub, $t, $t, $t);
        crate::__trace_binary!(lit_r TMul, Mul, $t, $t, $t);
        crate::__trace_binary!(lit_l TMul, Mul, $t, $t, $t);
        crate::__trace_binary!(lit_r TDiv, Div, $t, $t, $t);
        crate::__trace_binary!(lit_l TDiv, Div, $t, $t, $t);
        crate::__trace_binary!(lit_r TRem, Rem, $t, $t, $t);
        crate::__trace_binary!(lit_l TRem, Rem, $t, $t, $t);
        crate::__trace_binary!(lit_both TAdd, Add, $t, $t, $t);
        crate::__trace_binary!(lit_both TSub, Sub, $t, $t, $t);
        crate::__trace_binary!(lit_both TMul, Mul, $t, $t, $t);
        crate::__trace_binary!(lit_both TDiv, Div, $t, $t, $t);
        crate::__trace_binary!(lit_both TRem, Rem, $t, $t, $t);
    };
}
scalar_ops!(
    f32,
    |a, b| a + b,
    |a, b| a - b,
    |a, b| a * b,
    |a, b| a / b,
    |a, b| a % b
);
scalar_ops!(
    i32,
    |a: i32, b| a.wrapping_add(b),
    |a: i32, b| a.wrapping_sub(b),
    |a: i32, b| a.wrapping_mul(b),
    |a: i32, b| if b == 0 { 0 } else { a.wrapping_div(b) },
    |a: i32, b| if b == 0 { 0 } else { a.wrapping_rem(b) }
);
scalar_ops!(
    u32,
    |a: u32, b| a.wrapping_add(b),
    |a: u32, b| a.wrapping_sub(b),
    |a: u32, b| a.wrapping_mul(b),
    |a: u32, b| a.checked_div(b).unwrap_or(0),
    |a: u32, b| if b == 0 { 0 } else { a % b }
);

macro_rules! int_bit_ops {
    ($t:ty) => {
        op!(TBitAnd, KBitAnd, BitAnd, $t, $t, $t, |a, b| a & b);
        op!(TBitOr, KBitOr, BitOr, $t, $t, $t, |a, b| a | b);
        op!(TBitXor, KBitXor, BitXor, $t, $t, $t, |a, b| a ^ b);
        op!(TShl, KShl, Shl, $t, $t, $t, |a: $t, b: $t| a.wrapping_shl(b as u32));
        op!(TShr, KShr, Shr, $t, $t, $t, |a: $t, b: $t| a.wrapping_shr(b as u32));
        crate::__trace_binary!(lit_r TBitAnd, BitAnd, $t, $t, $t);
        crate::__trace_binary!(lit_r TBitOr, BitOr, $t, $t, $t);
        crate::__trace_binary!(lit_r TBitXor, BitXor, $t, $t, $t);
        crate::__trace_binary!(lit_r TShl, Shl, $t, $t, $t);
        crate::__trace_binary!(lit_r TShr, Shr, $t, $t, $t);
        crate::__trace_binary!(lit_l TBitAnd, BitAnd, $t, $t, $t);
        crate::__trace_binary!(lit_l TBitOr, BitOr, $t, $t, $t);
        crate::__trace_binary!(lit_l TBitXor, BitXor, $t, $t, $t);
        crate::__trace_binary!(lit_l TShl, Shl, $t, $t, $t);
        crate::__trace_binary!(lit_l TShr, Shr, $t, $t, $t);
        crate::__trace_binary!(lit_both TBitAnd, BitAnd, $t, $t, $t);
        crate::__trace_binary!(lit_both TBitOr, BitOr, $t, $t, $t);
        crate::__trace_binary!(lit_both TBitXor, BitXor, $t, $t, $t);
        crate::__trace_binary!(lit_both TShl, Shl, $t, $t, $t);
        crate::__trace_binary!(lit_both TShr, Shr, $t, $t, $t);
    };
}
int_bit_ops!(i32);
int_bit_ops!(u32);
op!(TBitAnd, KBitAnd, BitAnd, bool, bool, bool, |a, b| a & b);
op!(TBitOr, KBitOr, BitOr, bool, bool, bool, |a, b| a | b);
op!(TBitXor, KBitXor, BitXor, bool, bool, bool, |a, b| a ^ b);

/// Vector ops: with the same vector type and with its scalar on either side.
macro_rules! vector_ops {
    ($v:ty, $s:ty, [$($c:ident),*], $add:expr, $sub:expr, $mul:expr, $div:expr, $rem:expr) => {
        vector_ops!(@each $v, $s, [$($c),*], TAdd, KAdd, Add, $add);
        vector_ops!(@each $v, $s, [$($c),*], TSub, KSub, Sub, $sub);
        vector_ops!(@each $v, $s, [$($c),*], TMul, KMul, Mul, $mul);
        vector_ops!(@each $v, $s, [$($c),*], TDiv, KDiv, Div, $div);
        vector_ops!(@each $v, $s, [$($c),*], TRem, KRem, Rem, $rem);
    };
    (@each $v:ty, $s:ty, [$($c:ident),*], $tr:ident, $ctr:ident, $op:ident, $f:expr) => {
        op!($tr, $ctr, $op, $v, $v, $v, |a: $v, b: $v| {
            let f: fn($s, $s) -> $s = $f;
            <$v>::new($(f(a.$c, b.$c)),*)
        });
        op!($tr, $ctr, $op, $v, $s, $v, |a: $v, b: $s| {
            let f: fn($s, $s) -> $s = $f;
            <$v>::new($(f(a.$c, b)),*)
        });
        op!($tr, $ctr, $op, $s, $v, $v, |a: $s, b: $v| {
            let f: fn($s, $s) -> $s = $f;
            <$v>::new($(f(a, b.$c)),*)
        });
        crate::__trace_binary!(lit_r $tr, $op, $v, $s, $v);
        crate::__trace_binary!(lit_l $tr, $op, $s, $v, $v);
    };
}
macro_rules! float_vector_ops {
    ($v:ty, [$($c:ident),*]) => {
        vector_ops!($v, f32, [$($c),*], |a, b| a + b, |a, b| a - b, |a, b| a * b, |a, b| a / b, |a, b| a % b);
    };
}
float_vector_ops!(Vec2, [x, y]);
float_vector_ops!(Vec3, [x, y, z]);
float_vector_ops!(Vec4, [x, y, z, w]);
macro_rules! int_vector_ops {
    ($v:ty, $s:ty, [$($c:ident),*]) => {
        vector_ops!(
            $v, $s, [$($c),*],
            |a: $s, b| a.wrapping_add(b),
            |a: $s, b| a.wrapping_sub(b),
            |a: $s, b| a.wrapping_mul(b),
            |a: $s, b| if b == 0 { 0 } else { a.wrapping_div(b) },
            |a: $s, b| if b == 0 { 0 } else { a.wrapping_rem(b) }
        );
    };
}
int_vector_ops!(IVec2, i32, [x, y]);
int_vector_ops!(IVec3, i32, [x, y, z]);
int_vector_ops!(UVec2, u32, [x, y]);
int_vector_ops!(UVec3, u32, [x, y, z]);

macro_rules! matrix_ops {
    ($m:ty, $v:ty) => {
        op!(TAdd, KAdd, Add, $m, $m, $m, |a, b| a + b);
        op!(TSub, KSub, Sub, $m, $m, $m, |a, b| a - b);
        op!(TMul, KMul, Mul, $m, $m, $m, |a, b| a * b);
        op!(TMul, KMul, Mul, $m, $v, $v, |a, b| a * b);
        op!(TMul, KMul, Mul, $m, f32, $m, |a, b| a * b);
        op!(TMul, KMul, Mul, f32, $m, $m, |a, b| b * a);
        op!(TDiv, KDiv, Div, $m, f32, $m, |a: $m, b: f32| <$m>::from_cols_array(&a.to_cols_array().map(|x| x / b)));
        crate::__trace_binary!(lit_r TMul, Mul, $m, f32, $m);
        crate::__trace_binary!(lit_l TMul, Mul, f32, $m, $m);
        crate::__trace_binary!(lit_r TDiv, Div, $m, f32, $m);
    };
}
matrix_ops!(Mat2, Vec2);
matrix_ops!(Mat3, Vec3);

/// Comparisons of two values of one scalar type.
pub trait TCmp<R> {
    fn ids(self, r: R) -> (ExprId, ExprId);
}
macro_rules! cmp_impls {
    ($($t:ty),*) => {$(
        impl TCmp<Expr<$t>> for Expr<$t> {
            fn ids(self, r: Expr<$t>) -> (ExprId, ExprId) { (self.id, r.id) }
        }
        impl TCmp<$t> for Expr<$t> {
            fn ids(self, r: $t) -> (ExprId, ExprId) { (self.id, constant(r).id) }
        }
        impl TCmp<Expr<$t>> for $t {
            fn ids(self, r: Expr<$t>) -> (ExprId, ExprId) { (constant(self).id, r.id) }
        }
        // Two constants (`DIM == 2` in code written once for both dimensions).
        impl TCmp<$t> for $t {
            fn ids(self, r: $t) -> (ExprId, ExprId) { (constant(self).id, constant(r).id) }
        }
    )*};
}
cmp_impls!(f32, i32, u32, bool);

macro_rules! cmp_fn {
    ($($f:ident => $op:ident),*) => {$(
        #[doc = concat!("Traced `", stringify!($f), "` comparison.")]
        pub fn $f<L: TCmp<R>, R>(l: L, r: R) -> Expr<bool> {
            let (a, b) = l.ids(r);
            binary(BinOp::$op, a, b)
        }
    )*};
}
cmp_fn!(lt => Lt, le => Le, gt => Gt, ge => Ge);

/// Equality of two values of one element type (vectors and matrices compare whole).
pub trait TEq<R> {
    fn ids(self, r: R) -> (ExprId, ExprId);
}
macro_rules! eq_impls {
    ($($t:ty),*) => {$(
        impl TEq<Expr<$t>> for Expr<$t> {
            fn ids(self, r: Expr<$t>) -> (ExprId, ExprId) { (self.id, r.id) }
        }
    )*};
}
eq_impls!(Vec2, Vec3, Vec4, IVec2, IVec3, UVec2, UVec3, Mat2, Mat3);
impl<L: TCmp<R>, R> TEq<R> for L {
    fn ids(self, r: R) -> (ExprId, ExprId) {
        TCmp::ids(self, r)
    }
}
/// Traced `==`.
pub fn eq<L: TEq<R>, R>(l: L, r: R) -> Expr<bool> {
    let (a, b) = l.ids(r);
    binary(BinOp::Eq, a, b)
}
/// Traced `!=`.
pub fn ne<L: TEq<R>, R>(l: L, r: R) -> Expr<bool> {
    let (a, b) = l.ids(r);
    binary(BinOp::Ne, a, b)
}

/// Short-circuit `a && b`.
pub fn and<A: IntoExpr<bool>, B: IntoExpr<bool>>(a: A, b: B) -> Expr<bool> {
    binary(BinOp::And, a.into_expr().id, b.into_expr().id)
}

/// Short-circuit `a || b`.
pub fn or<A: IntoExpr<bool>, B: IntoExpr<bool>>(a: A, b: B) -> Expr<bool> {
    binary(BinOp::Or, a.into_expr().id, b.into_expr().id)
}

/// `!a`: logical not on bool, bitwise not on integers.
pub fn not<T: NotTy, A: IntoExpr<T>>(a: A) -> Expr<T> {
    Expr::new(ExprKind::Unary(UnOp::Not, a.into_expr().id))
}
pub trait NotTy: Value {}
impl NotTy for bool {}
impl NotTy for i32 {}
impl NotTy for u32 {}

/// `-a`.
pub fn neg<T: Value, A: IntoExpr<T>>(a: A) -> Expr<T>
where
    Expr<T>: Neg<Output = Expr<T>>,
{
    -a.into_expr()
}
macro_rules! neg_impls {
    ($($t:ty),*) => {$(
        impl Neg for Expr<$t> {
            type Output = Expr<$t>;
            fn neg(self) -> Self::Output {
                Expr::new(ExprKind::Unary(UnOp::Neg, self.id))
            }
        }
    )*};
}
neg_impls!(f32, i32, Vec2, Vec3, Vec4, IVec2, IVec3, Mat2, Mat3);

/// Numeric conversion `a as T`: of a value of the language, or of a host integer constant
/// of a type outside it (a `usize` length, a `u64`), converted where it stands as Rust's
/// `as` converts it, which is what the CPU lowering does with the same code.
pub fn cast<T: Value, S, A: CastSource<T, S>>(a: A) -> Expr<T> {
    a.cast()
}

/// What `a as T` converts from: `S` the language's type of `a`, or `a`'s own host type.
pub trait CastSource<T: Value, S> {
    fn cast(self) -> Expr<T>;
}
impl<T: CastFrom<S>, S: Value, A: IntoExpr<S>> CastSource<T, S> for A {
    fn cast(self) -> Expr<T> {
        Expr::new(ExprKind::Cast(self.into_expr().id))
    }
}
macro_rules! host_casts {
    ($($s:ty),*) => {$(
        impl CastSource<i32, $s> for $s {
            fn cast(self) -> Expr<i32> {
                (self as i32).into_expr()
            }
        }
        impl CastSource<u32, $s> for $s {
            fn cast(self) -> Expr<u32> {
                (self as u32).into_expr()
            }
        }
        impl CastSource<f32, $s> for $s {
            fn cast(self) -> Expr<f32> {
                (self as f32).into_expr()
            }
        }
    )*};
}
host_casts!(usize, isize, u64, i64, u16, i16, u8, i8);
/// The `as` conversions Rust allows between the language's scalars.
pub trait CastFrom<S>: Value {}
macro_rules! cast_from {
    ($($t:ty: $($s:ty),*);*) => {$($(impl CastFrom<$s> for $t {})*)*};
}
cast_from!(f32: f32, i32, u32; i32: f32, i32, u32, bool; u32: f32, i32, u32, bool);

/// Vector conversions (`as_vec2()` and friends).
macro_rules! vector_casts {
    ($($f:ident -> $t:ty : $($from:ty),*);*) => {$(
        #[doc = concat!("Component-wise conversion to `", stringify!($t), "`.")]
        pub fn $f<S: VectorCast<$t>>(a: Expr<S>) -> Expr<$t> {
            Expr::new(ExprKind::Cast(a.id))
        }
        $(impl VectorCast<$t> for $from {})*
    )*};
}
/// Vector types convertible to `T` component-wise.
pub trait VectorCast<T>: Value {}
vector_casts!(
    as_vec2 -> Vec2: IVec2, UVec2, Vec2;
    as_ivec2 -> IVec2: Vec2, UVec2, IVec2;
    as_uvec2 -> UVec2: Vec2, IVec2, UVec2;
    as_vec3 -> Vec3: IVec3, UVec3, Vec3;
    as_ivec3 -> IVec3: Vec3, UVec3, IVec3;
    as_uvec3 -> UVec3: Vec3, IVec3, UVec3
);

// ---------------------------------------------------------------------------------------------
// Builtin functions

/// A call of builtin `b` (see [`crate::builtins`], whose table generates the typed tracers).
pub(crate) fn builtin<T: Value>(b: Builtin, args: Vec<ExprId>) -> Expr<T> {
    Expr::new(ExprKind::Builtin(b, args))
}

/// f32 and float vectors.
pub trait Float: Value {}
impl Float for f32 {}
impl Float for Vec2 {}
impl Float for Vec3 {}
impl Float for Vec4 {}
/// Scalars and vectors that `abs`, `min`, `max`, `clamp` and `sign` take.
pub trait Num: Value {}
macro_rules! num {
    ($($t:ty),*) => {$(impl Num for $t {})*};
}
num!(f32, i32, u32, Vec2, Vec3, Vec4, IVec2, IVec3, UVec2, UVec3);
/// Float vectors.
pub trait FloatVec: Float {}
impl FloatVec for Vec2 {}
impl FloatVec for Vec3 {}
impl FloatVec for Vec4 {}
/// 2- and 3-vectors, with the matrix type of their outer product.
pub trait Outer: Value {
    type M: Value;
}
impl Outer for Vec2 {
    type M = Mat2;
}
impl Outer for Vec3 {
    type M = Mat3;
}
/// Mat2 and Mat3.
pub trait Matrix: Value {}
impl Matrix for Mat2 {}
impl Matrix for Mat3 {}

/// `cond ? a : b` without branches in the source.
pub fn select<T: Value, C: IntoExpr<bool>, A: IntoExpr<T>, B: IntoExpr<T>>(
    c: C,
    a: A,
    b: B,
) -> Expr<T> {
    Expr::new(ExprKind::Select(
        c.into_expr().id,
        a.into_expr().id,
        b.into_expr().id,
    ))
}

// Constructors

fn construct<T: Value>(parts: Vec<ExprId>) -> Expr<T> {
    Expr::new(ExprKind::Construct(parts))
}
pub fn vec2(x: impl IntoExpr<f32>, y: impl IntoExpr<f32>) -> Expr<Vec2> {
    construct(vec![x.into_expr().id, y.into_expr().id])
}
pub fn vec3(x: impl IntoExpr<f32>, y: impl IntoExpr<f32>, z: impl IntoExpr<f32>) -> Expr<Vec3> {
    construct(vec![x.into_expr().id, y.into_expr().id, z.into_expr().id])
}
pub fn vec4(
    x: impl IntoExpr<f32>,
    y: impl IntoExpr<f32>,
    z: impl IntoExpr<f32>,
    w: impl IntoExpr<f32>,
) -> Expr<Vec4> {
    construct(vec![
        x.into_expr().id,
        y.into_expr().id,
        z.into_expr().id,
        w.into_expr().id,
    ])
}
pub fn ivec2(x: impl IntoExpr<i32>, y: impl IntoExpr<i32>) -> Expr<IVec2> {
    construct(vec![x.into_expr().id, y.into_expr().id])
}
pub fn ivec3(x: impl IntoExpr<i32>, y: impl IntoExpr<i32>, z: impl IntoExpr<i32>) -> Expr<IVec3> {
    construct(vec![x.into_expr().id, y.into_expr().id, z.into_expr().id])
}
pub fn uvec2(x: impl IntoExpr<u32>, y: impl IntoExpr<u32>) -> Expr<UVec2> {
    construct(vec![x.into_expr().id, y.into_expr().id])
}
pub fn uvec3(x: impl IntoExpr<u32>, y: impl IntoExpr<u32>, z: impl IntoExpr<u32>) -> Expr<UVec3> {
    construct(vec![x.into_expr().id, y.into_expr().id, z.into_expr().id])
}
/// A matrix from its columns.
pub fn mat2(c0: Expr<Vec2>, c1: Expr<Vec2>) -> Expr<Mat2> {
    construct(vec![c0.id, c1.id])
}
pub fn mat3(c0: Expr<Vec3>, c1: Expr<Vec3>, c2: Expr<Vec3>) -> Expr<Mat3> {
    construct(vec![c0.id, c1.id, c2.id])
}
/// A vector with every component `s`.
pub fn splat<T: Members>(s: impl IntoExpr<T::Item>) -> Expr<T>
where
    T::Item: Value,
{
    construct(vec![s.into_expr().id])
}
/// A diagonal matrix.
pub fn from_diagonal<M: Matrix + Members>(d: Expr<M::Item>) -> Expr<M> {
    let n = M::LEN;
    let zero = constant(0.0f32).id;
    let cols = (0..n)
        .map(|c| {
            let parts = (0..n)
                .map(|r| {
                    if r == c {
                        push_expr(ExprKind::Member(d.id, r), Ty::F32)
                    } else {
                        zero
                    }
                })
                .collect();
            push_expr(ExprKind::Construct(parts), Ty::Vector(Scalar::F32, n as u8))
        })
        .collect();
    construct(cols)
}
/// A local array `[a, b, ...]`.
pub fn array<T: Value, const N: usize>(items: [Expr<T>; N]) -> Expr<[T; N]> {
    construct(items.iter().map(|e| e.id).collect())
}
/// A local array `[x; N]`.
pub fn array_splat<T: Value, const N: usize>(x: impl IntoExpr<T>) -> Expr<[T; N]> {
    construct(vec![x.into_expr().id])
}
/// A tuple `(a, b)`.
pub fn tuple2<A: Value, B: Value>(a: impl IntoExpr<A>, b: impl IntoExpr<B>) -> Expr<(A, B)> {
    construct(vec![a.into_expr().id, b.into_expr().id])
}
/// A tuple `(a, b, c)`.
pub fn tuple3<A: Value, B: Value, C: Value>(
    a: impl IntoExpr<A>,
    b: impl IntoExpr<B>,
    c: impl IntoExpr<C>,
) -> Expr<(A, B, C)> {
    construct(vec![a.into_expr().id, b.into_expr().id, c.into_expr().id])
}
/// The members of a pair.
pub fn untuple2<A: Value, B: Value>(t: Expr<(A, B)>) -> (Expr<A>, Expr<B>) {
    (
        Expr::new(ExprKind::Member(t.id, 0)),
        Expr::new(ExprKind::Member(t.id, 1)),
    )
}
/// The members of a triple.
pub fn untuple3<A: Value, B: Value, C: Value>(t: Expr<(A, B, C)>) -> (Expr<A>, Expr<B>, Expr<C>) {
    (
        Expr::new(ExprKind::Member(t.id, 0)),
        Expr::new(ExprKind::Member(t.id, 1)),
        Expr::new(ExprKind::Member(t.id, 2)),
    )
}

/// Matrices with a traced SVD and polar decomposition.
pub trait TraceSvd: Value {
    type Vector: Value;
    fn svd_(m: Expr<Self>) -> Expr<(Self, Self::Vector, Self)>;
    fn polar_(m: Expr<Self>) -> Expr<(Self, Self)>;
}
impl TraceSvd for Mat2 {
    type Vector = Vec2;
    fn svd_(m: Expr<Self>) -> Expr<(Self, Vec2, Self)> {
        crate::linalg::svd2::expand(m)
    }
    fn polar_(m: Expr<Self>) -> Expr<(Self, Self)> {
        crate::linalg::polar2::expand(m)
    }
}
impl TraceSvd for Mat3 {
    type Vector = Vec3;
    fn svd_(m: Expr<Self>) -> Expr<(Self, Vec3, Self)> {
        crate::linalg::svd3::expand(m)
    }
    fn polar_(m: Expr<Self>) -> Expr<(Self, Self)> {
        crate::linalg::polar3::expand(m)
    }
}
/// Traced `svd(m)`: `(U, sigma, V)`.
pub fn svd<M: TraceSvd>(m: Expr<M>) -> Expr<(M, M::Vector, M)> {
    M::svd_(m)
}
/// Traced `polar(m)`: `(R, S)`.
pub fn polar<M: TraceSvd>(m: Expr<M>) -> Expr<(M, M)> {
    M::polar_(m)
}
