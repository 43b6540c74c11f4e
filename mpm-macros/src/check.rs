//! The checker: a kernel or func body in Rust syntax to its checked form, applying every rule
//! of the kernel language in one pass. Errors are collected per statement, so one compile
//! reports each statement's first problem.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::spanned::Spanned;
use syn::{BinOp, Error, ExprLit, Ident, Lit, Local, Pat, Result, UnOp};

use crate::builtins;
use crate::checked::{
    Binding, Body, Domain, Else, ElseValue, End, Expr, If, ParLoop, Place, Stmt, Store, Top,
};
use crate::signature::Param;

fn err<T>(node: impl ToTokens, msg: impl std::fmt::Display) -> Result<T> {
    Err(Error::new_spanned(node, msg))
}

/// Checking state for one body.
pub struct Checker {
    fields: HashSet<String>,
    /// The `&Field` parameters: read-only.
    read_only: HashSet<String>,
    in_func: bool,
    in_par_loop: bool,
    /// Sequential loops entered inside the current parallel loop or func.
    loop_depth: usize,
    /// In a block loop (`for b in blocks(..)`).
    in_blocks: bool,
    /// Inside a `lanes` loop: the loop depth of its body (a `break` there is refused).
    lanes_depth: Option<usize>,
    /// The current block loop's shared arrays.
    shared: HashSet<String>,
    errors: Vec<Error>,
}

impl Checker {
    fn new(fields: HashSet<String>, in_func: bool) -> Self {
        Checker {
            fields,
            read_only: HashSet::new(),
            in_func,
            in_par_loop: false,
            loop_depth: 0,
            in_blocks: false,
            lanes_depth: None,
            shared: HashSet::new(),
            errors: Vec::new(),
        }
    }

    /// All errors found, as one.
    fn finish<T>(self, value: T) -> Result<T> {
        let mut errors = self.errors.into_iter();
        match errors.next() {
            None => Ok(value),
            Some(mut first) => {
                errors.for_each(|e| first.combine(e));
                Err(first)
            }
        }
    }

    /// An error when `field` is a read-only (`&Field`) parameter that `what` would write.
    fn check_writable(&self, field: &Ident, what: &str) -> Result<()> {
        if self.read_only.contains(&field.to_string()) {
            return err(
                field,
                format!(
                    "`{field}` is a `&Field` parameter, read-only: {what} needs `{field}: &mut Field<..>`"
                ),
            );
        }
        Ok(())
    }

    /// Outside `lanes` loops, a block loop's statements run on every lane of the block: a
    /// write there would happen once per lane, so writes are refused (`what` says which).
    fn check_not_block_scope(&self, node: impl ToTokens, what: &str) -> Result<()> {
        if self.in_blocks && self.lanes_depth.is_none() {
            return err(
                node,
                format!(
                    "{what} at a block loop's block scope would run once per lane: \
                     write inside `for i in lanes(a..b)`"
                ),
            );
        }
        Ok(())
    }

    /// The shared array that `e` names, if it names one.
    fn is_shared(&self, e: &syn::Expr) -> Option<Ident> {
        match strip_parens(e) {
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .filter(|id| self.shared.contains(&id.to_string()))
                .cloned(),
            _ => None,
        }
    }

    fn is_field(&self, e: &syn::Expr) -> Option<Ident> {
        if let syn::Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if self.fields.contains(&id.to_string()) {
                    return Some(id.clone());
                }
            }
        }
        None
    }

    // ----------------------------------------------------------------------------------- blocks

    /// Checks statements; with `value`, a trailing expression is the block's value. A bad
    /// statement is recorded and skipped.
    fn body(&mut self, stmts: &[syn::Stmt], value: bool) -> Body {
        let mut body = Body {
            stmts: Vec::new(),
            value: None,
        };
        for (k, s) in stmts.iter().enumerate() {
            let last = k + 1 == stmts.len();
            let checked = match s {
                syn::Stmt::Expr(e, None) if last && value => self.expr(e).map(|v| {
                    body.value = Some(Box::new(v));
                }),
                _ => self.stmt(s).map(|s| body.stmts.push(s)),
            };
            if let Err(e) = checked {
                self.errors.push(e);
            }
        }
        body
    }

    fn block(&mut self, b: &syn::Block, value: bool) -> Body {
        self.body(&b.stmts, value)
    }

    fn stmt(&mut self, s: &syn::Stmt) -> Result<Stmt> {
        match s {
            syn::Stmt::Local(l) => self.local(l),
            syn::Stmt::Expr(e, _) => self.stmt_expr(e),
            syn::Stmt::Item(item) => err(
                item,
                "items cannot be declared inside kernels or funcs; move this item outside",
            ),
            syn::Stmt::Macro(m) => err(m, "macros are not part of the kernel language"),
        }
    }

    fn local(&mut self, l: &Local) -> Result<Stmt> {
        if let Some(init) = &l.init {
            if let syn::Expr::Call(c) = strip_parens(&init.expr) {
                if is_named(&c.func, "shared") {
                    return self.shared_decl(l, c);
                }
            }
        }
        let (pat, ty) = match &l.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        if let Some(t) = ty {
            crate::signature::check_value_type(t)?;
        }
        let value = match &l.init {
            Some(init) => {
                if let Some((_, d)) = &init.diverge {
                    return err(d, "`let ... else` is not part of the kernel language");
                }
                Some(match strip_parens(&init.expr) {
                    syn::Expr::Call(c) if is_named(&c.func, "atomic_add") => self.fetch_add(c)?,
                    other => self.expr(other)?,
                })
            }
            None if ty.is_some() && matches!(pat, Pat::Ident(_)) => None,
            None => {
                return err(
                    l,
                    "a `let` without a value names its type, `let x: f32;`, and is assigned before it is read",
                )
            }
        };
        let binding = match pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                let name = &pi.ident;
                if self.fields.contains(&name.to_string()) {
                    return err(
                        name,
                        format!("`{name}` is a field parameter; give this local another name"),
                    );
                }
                if self.shared.contains(&name.to_string()) {
                    return err(
                        name,
                        format!("`{name}` is a shared array of this block; give this local another name"),
                    );
                }
                Binding::Name {
                    name: name.clone(),
                    mutability: pi.mutability,
                    ty: ty.cloned(),
                }
            }
            Pat::Wild(_) => Binding::Wild,
            Pat::Tuple(tp) if ty.is_none() && (tp.elems.len() == 2 || tp.elems.len() == 3) => {
                let mut names = Vec::new();
                for p in &tp.elems {
                    match p {
                        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                            names.push((pi.mutability, pi.ident.clone()));
                        }
                        other => {
                            return err(
                                other,
                                "tuple patterns hold plain names: `let (u, s, v) = svd(m);`",
                            )
                        }
                    }
                }
                Binding::Tuple(names)
            }
            other => return err(other, "`let` binds a name (`let x = ..`, `let x: f32 = ..`) or a tuple of names (`let (a, b) = ..`)"),
        };
        Ok(Stmt::Let { binding, value })
    }

    /// `let tile = shared([fill; len]);`: a block's shared array, at block scope.
    fn shared_decl(&mut self, l: &Local, c: &syn::ExprCall) -> Result<Stmt> {
        if !self.in_blocks {
            return err(
                c,
                "`shared` arrays belong to a block loop: `for b in blocks(a..b) { let tile = shared([0.0; 64]); .. }`",
            );
        }
        if self.lanes_depth.is_some() {
            return err(
                c,
                "a shared array is declared at the block loop's block scope, not in a `lanes` loop",
            );
        }
        let name = match &l.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            other => {
                return err(
                    other,
                    "a shared array is bound to a plain name, its type following from the fill value: `let tile = shared([0.0; 64]);`",
                )
            }
        };
        let fill = match (c.args.first(), c.args.len()) {
            (Some(syn::Expr::Repeat(r)), 1) => r,
            _ => {
                return err(
                    c,
                    "`shared` takes one array of a repeated value, `shared([0.0; 64])`: every element starts as that value",
                )
            }
        };
        if self.fields.contains(&name.to_string()) {
            return err(
                &name,
                format!("`{name}` is a field parameter; give this shared array another name"),
            );
        }
        let value = self.expr(&fill.expr)?;
        self.shared.insert(name.to_string());
        Ok(Stmt::Shared {
            name,
            fill: value,
            len: (*fill.len).clone(),
        })
    }

    /// `for i in lanes(a..b)`: the iterations spread over the block's lanes.
    fn lanes_loop(&mut self, f: &syn::ExprForLoop, c: &syn::ExprCall) -> Result<Stmt> {
        if !self.in_blocks {
            return err(
                c,
                "`lanes(a..b)` spreads a loop over a block's lanes: it belongs to a block loop, `for b in blocks(a..b)`",
            );
        }
        if self.lanes_depth.is_some() {
            return err(
                c,
                "`lanes` loops do not nest: the block's lanes already run the outer one; use `a..b` here",
            );
        }
        let var = loop_var(&f.pat)?;
        let r = match (c.args.first(), c.args.len()) {
            (Some(syn::Expr::Range(r)), 1) => r,
            _ => return err(c, "`lanes` takes a range: `for i in lanes(0..n)`"),
        };
        let (start, end) = self.loop_range(
            r,
            "the range of a `lanes` loop needs both ends: `lanes(a..b)`",
        )?;
        self.loop_depth += 1;
        self.lanes_depth = Some(self.loop_depth);
        let body = self.block(&f.body, false);
        self.lanes_depth = None;
        self.loop_depth -= 1;
        Ok(Stmt::Lanes {
            var,
            start,
            end,
            body,
        })
    }

    fn stmt_expr(&mut self, e: &syn::Expr) -> Result<Stmt> {
        match e {
            syn::Expr::Assign(a) => self.assign(&a.left, None, &a.right),
            syn::Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, Some(&b.op), &b.right)
            }
            syn::Expr::If(i) => Ok(Stmt::If(self.if_stmt(i)?)),
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::While(w) => {
                if let Some(l) = &w.label {
                    return err(
                        l,
                        "only a kernel's top-level loops take a label (it names them in profiles)",
                    );
                }
                let cond = self.expr(&w.cond)?;
                let body = self.loop_body(&w.body);
                Ok(Stmt::While { cond, body })
            }
            syn::Expr::Loop(l) => {
                if let Some(label) = &l.label {
                    return err(
                        label,
                        "only a kernel's top-level loops take a label (it names them in profiles)",
                    );
                }
                let body = self.loop_body(&l.body);
                Ok(Stmt::Loop { body })
            }
            syn::Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return err(b, "`break` takes no label or value in kernels");
                }
                if self.loop_depth == 0 && self.in_par_loop {
                    return err(b, "`break` cannot leave a parallel loop; use `continue` to end this iteration");
                }
                if self.lanes_depth == Some(self.loop_depth) {
                    return err(b, "`break` cannot leave a `lanes` loop (its iterations run on different lanes); use `continue`");
                }
                if self.loop_depth == 0 {
                    return err(b, "`break` is only allowed inside a loop");
                }
                Ok(Stmt::Break)
            }
            syn::Expr::Continue(c) => {
                if c.label.is_some() {
                    return err(c, "`continue` takes no label in kernels");
                }
                if self.loop_depth == 0 && !self.in_par_loop {
                    return err(c, "`continue` is only allowed inside a loop");
                }
                Ok(Stmt::Continue {
                    ends_invocation: self.loop_depth == 0 && self.in_par_loop,
                })
            }
            syn::Expr::Return(r) => {
                if !self.in_func {
                    return err(r, "kernels cannot `return`; use `continue` to end this iteration of a parallel loop");
                }
                let Some(v) = &r.expr else {
                    return err(r, "a func returns a value: `return x;`");
                };
                Ok(Stmt::Return(self.expr(v)?))
            }
            syn::Expr::Block(b) => {
                if let Some(l) = &b.label {
                    return err(l, "block labels are not part of the kernel language");
                }
                Ok(Stmt::Block(self.block(&b.block, false)))
            }
            other => Ok(Stmt::Discard(self.expr(other)?)),
        }
    }

    fn loop_body(&mut self, b: &syn::Block) -> Body {
        self.loop_depth += 1;
        let body = self.block(b, false);
        self.loop_depth -= 1;
        body
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Result<If> {
        let cond = self.expr(&i.cond)?;
        let then = self.block(&i.then_branch, false);
        let otherwise = match &i.else_branch {
            None => None,
            Some((_, e)) => Some(match &**e {
                syn::Expr::If(nested) => Else::If(Box::new(self.if_stmt(nested)?)),
                syn::Expr::Block(b) => Else::Block(self.block(&b.block, false)),
                other => return err(other, "expected a block after `else`"),
            }),
        };
        Ok(If {
            cond,
            then,
            otherwise,
        })
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Result<Stmt> {
        if let Some(l) = &f.label {
            return err(
                l,
                "only a kernel's top-level loops take a label (it names them in profiles)",
            );
        }
        if let syn::Expr::Call(c) = &*f.expr {
            if is_named(&c.func, "lanes") {
                return self.lanes_loop(f, c);
            }
        }
        let var = loop_var(&f.pat)?;
        let syn::Expr::Range(r) = &*f.expr else {
            return err(
                &f.expr,
                "inner `for` loops run over a range `a..b` or `a..=b` (or, in a block loop, `lanes(a..b)`)",
            );
        };
        let (start, end) =
            self.loop_range(r, "the range of a `for` loop needs both ends: `a..b`")?;
        let body = self.loop_body(&f.body);
        Ok(Stmt::For {
            var,
            start,
            end,
            body,
        })
    }

    /// The store that `element op= value` on a field or shared array element is: `=`, an
    /// atomic `+=` / `-=`, or for the other operators (`f[i] *= v` is `f[i] = f[i] * v`) a
    /// read and a write, not atomic. The index is pure, so reading it twice is the same.
    fn element_store(
        &mut self,
        element: &syn::Expr,
        op: Option<&BinOp>,
        value: Expr,
        span: proc_macro2::Span,
    ) -> Result<(Store, Expr)> {
        Ok(match op {
            None => (Store::Set, value),
            Some(BinOp::AddAssign(_)) => (Store::Add, value),
            Some(BinOp::SubAssign(_)) => (Store::Sub, value),
            Some(other) => {
                let value = Expr::Binary {
                    op: compound_op(other).unwrap_or("add"),
                    native: None,
                    left: Box::new(self.expr(element)?),
                    right: Box::new(value),
                    lazy: false,
                    span,
                };
                (Store::Set, value)
            }
        })
    }

    /// The start and end of an inner loop's range (`open` is the error for a missing end).
    fn loop_range(&mut self, r: &syn::ExprRange, open: &str) -> Result<(Expr, End)> {
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            return err(r, open);
        };
        let start = self.expr(start)?;
        let end = match (
            matches!(r.limits, syn::RangeLimits::Closed(_)),
            int_literal(end),
        ) {
            (false, _) => End::Exclusive(self.expr(end)?),
            (true, Some(n)) => End::InclusiveLiteral(self.expr(end)?, n),
            (true, None) => End::Inclusive(self.expr(end)?),
        };
        Ok((start, end))
    }

    /// `left = right` or `left op= right`.
    fn assign(&mut self, left: &syn::Expr, op: Option<&BinOp>, right: &syn::Expr) -> Result<Stmt> {
        let value = self.expr(right)?;
        let span = left
            .span()
            .join(right.span())
            .unwrap_or_else(|| right.span());
        if let syn::Expr::Index(ix) = strip_parens(left) {
            if let Some(name) = self.is_shared(&ix.expr) {
                if self.lanes_depth.is_none() {
                    return err(
                        left,
                        format!("shared array `{name}` is written in a `lanes` loop: at block scope every lane would write it"),
                    );
                }
                let index = self.expr(&ix.index)?;
                let (op, value) = self.element_store(left, op, value, span)?;
                return Ok(Stmt::SharedStore {
                    name,
                    index,
                    op,
                    value,
                    span,
                });
            }
            if let Some(field) = self.is_field(&ix.expr) {
                self.check_writable(&field, "writing an element")?;
                self.check_not_block_scope(left, "a field write")?;
                let index = self.expr(&ix.index)?;
                let (op, value) = self.element_store(left, op, value, span)?;
                return Ok(Stmt::Store {
                    field,
                    index,
                    op,
                    value,
                    span,
                });
            }
        }
        let place = self.place(left)?;
        let (op, read) = match op {
            None => (None, None),
            Some(op) => (
                Some(compound_op(op).unwrap_or("add")),
                Some(self.expr(left)?),
            ),
        };
        Ok(Stmt::Assign {
            place,
            op,
            read,
            value,
            span,
        })
    }

    fn place(&mut self, e: &syn::Expr) -> Result<Place> {
        match e {
            syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                if self.is_field(e).is_some() {
                    return err(e, "assign to an element of the field: `f[i] = v`");
                }
                if let Some(name) = self.is_shared(e) {
                    return err(
                        e,
                        format!("write whole elements of shared array `{name}`: `{name}[i] = v` or `{name}[i] += v`"),
                    );
                }
                Ok(Place::Local(p.path.clone()))
            }
            syn::Expr::Paren(p) => self.place(&p.expr),
            syn::Expr::Field(f) => {
                let base = self.place(&f.base)?;
                let (member, k) = member_of(f)?;
                Ok(Place::Member(Box::new(base), member, k))
            }
            syn::Expr::Index(ix) => {
                let base = self.place(&ix.expr)?;
                let i = self.expr(&ix.index)?;
                Ok(Place::Index(Box::new(base), i))
            }
            other => err(other, "only a local variable, its component or element, or a field element can be assigned"),
        }
    }

    // ------------------------------------------------------------------------------ expressions

    fn expr(&mut self, e: &syn::Expr) -> Result<Expr> {
        match e {
            syn::Expr::Lit(l) => Ok(Expr::Lit(lit(l)?)),
            syn::Expr::Path(p) => {
                if p.qself.is_some() {
                    return err(p, "qualified paths are not part of the kernel language");
                }
                if let Some(id) = p.path.get_ident() {
                    if self.fields.contains(&id.to_string()) {
                        return err(p, format!("field `{id}` must be indexed: `{id}[i]`"));
                    }
                    if self.shared.contains(&id.to_string()) {
                        return err(
                            p,
                            format!("shared array `{id}` is read element by element: `{id}[i]`"),
                        );
                    }
                    return Ok(Expr::Local(id.clone()));
                }
                Ok(Expr::Const(p.path.clone()))
            }
            syn::Expr::Paren(p) => Ok(Expr::Paren(Box::new(self.expr(&p.expr)?))),
            syn::Expr::Group(g) => self.expr(&g.expr),
            syn::Expr::Binary(b) => self.binary(b),
            syn::Expr::Unary(u) => {
                let inner = &*u.expr;
                match &u.op {
                    UnOp::Neg(_) => {
                        if let syn::Expr::Lit(l) = strip_parens(inner) {
                            return Ok(Expr::NegLit(lit(l)?));
                        }
                        Ok(Expr::Neg(Box::new(self.expr(inner)?)))
                    }
                    UnOp::Not(_) => Ok(Expr::Not(Box::new(self.expr(inner)?))),
                    other => err(other, "pointers and references are not part of the kernel language"),
                }
            }
            syn::Expr::Index(ix) => {
                let index = Box::new(self.expr(&ix.index)?);
                if let Some(field) = self.is_field(&ix.expr) {
                    return Ok(Expr::Load {
                        field,
                        index,
                        span: ix.span(),
                    });
                }
                if let Some(name) = self.is_shared(&ix.expr) {
                    return Ok(Expr::SharedLoad { name, index });
                }
                Ok(Expr::Index(Box::new(self.expr(&ix.expr)?), index))
            }
            syn::Expr::Field(f) => {
                let (member, k) = member_of(f)?;
                Ok(Expr::Member(Box::new(self.expr(&f.base)?), member, k))
            }
            syn::Expr::Call(c) => self.call(c),
            syn::Expr::MethodCall(mc) => self.method(mc),
            syn::Expr::Cast(c) => {
                let ty = &c.ty;
                let name = ty.to_token_stream().to_string();
                if !["f32", "i32", "u32"].contains(&name.as_str()) {
                    return err(ty, "`as` converts to f32, i32 or u32; use `as_vec2()` and friends for vectors");
                }
                Ok(Expr::Cast {
                    ty: (**ty).clone(),
                    value: Box::new(self.expr(&c.expr)?),
                    span: c.span(),
                })
            }
            syn::Expr::If(i) => self.if_value(i),
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    return err(b, "block labels are not part of the kernel language");
                }
                Ok(Expr::Block(self.block(&b.block, true)))
            }
            syn::Expr::Array(a) => Ok(Expr::Array(
                a.elems.iter().map(|x| self.expr(x)).collect::<Result<_>>()?,
            )),
            syn::Expr::Repeat(r) => Ok(Expr::Repeat(
                Box::new(self.expr(&r.expr)?),
                (*r.len).clone(),
            )),
            syn::Expr::Tuple(t) => {
                let items = t.elems.iter().map(|x| self.expr(x)).collect::<Result<Vec<_>>>()?;
                if !matches!(items.len(), 0 | 2 | 3) {
                    return err(t, "tuples have 2 or 3 members in kernels");
                }
                Ok(Expr::Tuple(items))
            }
            syn::Expr::Range(r) => err(r, "ranges appear only as the range of a `for` loop"),
            syn::Expr::Closure(c) => err(c, "closures are not part of the kernel language; write a #[func]"),
            syn::Expr::Match(mt) => err(mt, "`match` is not part of the kernel language; use `if` / `else`"),
            syn::Expr::Reference(r) => err(r, "references are not part of the kernel language; pass values"),
            syn::Expr::Macro(mc) => err(mc, "macros are not part of the kernel language"),
            syn::Expr::Struct(s) => err(s, "struct literals are not part of the kernel language; use glam vectors and matrices"),
            syn::Expr::Try(t) => err(t, "`?` is not part of the kernel language"),
            syn::Expr::Assign(a) => err(a, "an assignment is a statement, not a value"),
            syn::Expr::Unsafe(u) => err(u, "`unsafe` is not part of the kernel language"),
            other => err(other, "this expression is not part of the kernel language"),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Result<Expr> {
        if compound_op(&b.op).is_some() {
            return err(b, "compound assignment is a statement, not a value");
        }
        let left = Box::new(self.expr(&b.left)?);
        let right = Box::new(self.expr(&b.right)?);
        let (op, native) = match b.op {
            BinOp::Add(_) => ("add", None),
            BinOp::Sub(_) => ("sub", None),
            BinOp::Mul(_) => ("mul", None),
            BinOp::Div(_) => ("div", None),
            BinOp::Rem(_) => ("rem", None),
            BinOp::BitAnd(_) => ("bitand", None),
            BinOp::BitOr(_) => ("bitor", None),
            BinOp::BitXor(_) => ("bitxor", None),
            BinOp::Shl(_) => ("shl", None),
            BinOp::Shr(_) => ("shr", None),
            BinOp::And(_) => ("and", Some(quote!(&&))),
            BinOp::Or(_) => ("or", Some(quote!(||))),
            BinOp::Eq(_) => ("eq", Some(quote!(==))),
            BinOp::Ne(_) => ("ne", Some(quote!(!=))),
            BinOp::Lt(_) => ("lt", Some(quote!(<))),
            BinOp::Le(_) => ("le", Some(quote!(<=))),
            BinOp::Gt(_) => ("gt", Some(quote!(>))),
            BinOp::Ge(_) => ("ge", Some(quote!(>=))),
            _ => return err(b, "this operator is not part of the kernel language"),
        };
        // A right operand that records statements (an `if` or block value) must only run when
        // the left one does not decide.
        let lazy = matches!(b.op, BinOp::And(_) | BinOp::Or(_)) && has_statements(&b.right);
        Ok(Expr::Binary {
            op,
            native,
            left,
            right,
            lazy,
            span: b.span(),
        })
    }

    fn if_value(&mut self, i: &syn::ExprIf) -> Result<Expr> {
        let Some((_, otherwise)) = &i.else_branch else {
            return err(i, "an `if` used as a value needs an `else` branch");
        };
        let cond = Box::new(self.expr(&i.cond)?);
        let then = self.block(&i.then_branch, true);
        let otherwise = match &**otherwise {
            syn::Expr::If(nested) => ElseValue::If(self.if_value(nested)?),
            syn::Expr::Block(b) => ElseValue::Block(self.block(&b.block, true)),
            other => return err(other, "expected a block after `else`"),
        };
        Ok(Expr::IfValue {
            cond,
            then,
            otherwise: Box::new(otherwise),
        })
    }

    fn call(&mut self, c: &syn::ExprCall) -> Result<Expr> {
        let syn::Expr::Path(p) = &*c.func else {
            return err(&c.func, "only named functions can be called in kernels");
        };
        if p.qself.is_some() {
            return err(p, "qualified paths are not part of the kernel language");
        }
        if let Some(id) = p.path.get_ident() {
            if ["is_active", "activate", "deactivate"].contains(&id.to_string().as_str()) {
                return self.activity(c, id);
            }
            if id == "shared" {
                return err(
                    c,
                    "`shared([fill; n])` is the whole value of a `let` at a block loop's block scope: `let tile = shared([0.0; 64]);`",
                );
            }
            if id == "lanes" || id == "blocks" {
                return err(c, format!("`{id}(a..b)` is only the range of a `for` loop"));
            }
            if id == "atomic_add" {
                return err(
                    c,
                    "`atomic_add(f, i, v)` is the whole value of a `let`: \
                     `let old = atomic_add(f, i, v);` (for the add alone, write `f[i] += v`)",
                );
            }
        }
        for a in &c.args {
            if let Some(field) = self.is_field(strip_parens(a)) {
                return err(
                    a,
                    format!(
                        "`{field}` is a field: a call takes values (`{field}[i]`); kernels run \
                         one after another from the host, not from inside a kernel"
                    ),
                );
            }
        }
        let args = c
            .args
            .iter()
            .map(|a| self.expr(a))
            .collect::<Result<Vec<_>>>()?;
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        let n = segs.len();
        if n >= 2 && segs[n - 2].starts_with(|c: char| c.is_ascii_uppercase()) {
            return associated(p, &segs[n - 2], &segs[n - 1], args);
        }
        Ok(Expr::Call {
            path: p.path.clone(),
            args,
        })
    }

    /// `atomic_add(f, i, v)`, the whole value of a `let`: evaluated exactly once, where the
    /// `let` stands, on both lowerings.
    fn fetch_add(&mut self, c: &syn::ExprCall) -> Result<Expr> {
        let field = match c.args.first() {
            Some(f) if c.args.len() == 3 => self.is_field(f),
            _ => None,
        };
        let Some(field) = field else {
            return err(
                c,
                "`atomic_add` takes a field parameter, an index and a value: \
                 `let old = atomic_add(counts, i, 1);`",
            );
        };
        self.check_writable(&field, "`atomic_add`")?;
        self.check_not_block_scope(c, "`atomic_add`")?;
        Ok(Expr::FetchAdd {
            field,
            index: Box::new(self.expr(&c.args[1])?),
            value: Box::new(self.expr(&c.args[2])?),
            span: c.span(),
        })
    }

    /// `is_active(f, i)`, `activate(f, i)`, `deactivate(f, i)` on a field parameter.
    fn activity(&mut self, c: &syn::ExprCall, op: &Ident) -> Result<Expr> {
        let field = match c.args.first() {
            Some(f) if c.args.len() == 2 => self.is_field(f),
            _ => None,
        };
        let Some(field) = field else {
            return err(
                c,
                format!("`{op}` takes a field parameter and an index: `{op}(grid, cell)`"),
            );
        };
        if op != "is_active" {
            self.check_writable(&field, &format!("`{op}`"))?;
            self.check_not_block_scope(c, &format!("`{op}`"))?;
        }
        Ok(Expr::Activity {
            op: op.clone(),
            field,
            index: Box::new(self.expr(&c.args[1])?),
            span: c.span(),
        })
    }

    fn method(&mut self, mc: &syn::ExprMethodCall) -> Result<Expr> {
        if let Some(t) = &mc.turbofish {
            return err(t, "turbofish is not part of the kernel language");
        }
        let name = mc.method.to_string();
        if name == "indices" || name == "active" {
            return err(
                &mc.method,
                format!("`{name}()` is only the range of a top-level `for` loop"),
            );
        }
        let mut args = vec![self.expr(&mc.receiver)?];
        for a in &mc.args {
            args.push(self.expr(a)?);
        }
        Ok(Expr::Method {
            method: mc.method.clone(),
            args,
        })
    }
}

/// `Type::f(args)`: glam's constructors and `splat` / `from_diagonal`, on a glam type or an
/// alias of one (`Vec::splat(x)` in code written once for 2D and 3D).
fn associated(p: &syn::ExprPath, ty: &str, f: &str, args: Vec<Expr>) -> Result<Expr> {
    let ctor = builtins::constructor(ty, f).filter(|_| builtins::TYPES.contains(&ty));
    if ctor.is_none() && f != "splat" && f != "from_diagonal" {
        return err(
            p,
            format!(
                "`{ty}::{f}` is not part of the kernel language; use `new`, `splat`, `from_cols`, \
                 `from_diagonal` or a constant"
            ),
        );
    }
    Ok(Expr::Associated {
        path: p.path.clone(),
        ctor: ctor.map(|c| format_ident!("{}", c)),
        f: format_ident!("{}", f),
        args,
    })
}

/// Whether tracing an expression records statements (an `if` or block used as a value).
fn has_statements(e: &syn::Expr) -> bool {
    struct Find(bool);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            if matches!(e, syn::Expr::If(_) | syn::Expr::Block(_)) {
                self.0 = true;
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut f = Find(false);
    syn::visit::Visit::visit_expr(&mut f, e);
    f.0
}

/// The value of an unsuffixed integer literal.
fn int_literal(e: &syn::Expr) -> Option<i64> {
    match strip_parens(e) {
        syn::Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) if i.suffix().is_empty() => i.base10_parse().ok(),
        _ => None,
    }
}

/// Whether `e` is the plain name `name`.
fn is_named(e: &syn::Expr, name: &str) -> bool {
    matches!(e, syn::Expr::Path(p) if p.qself.is_none() && p.path.is_ident(name))
}

fn strip_parens(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip_parens(&p.expr),
        syn::Expr::Group(g) => strip_parens(&g.expr),
        other => other,
    }
}

fn loop_var(p: &Pat) -> Result<Ident> {
    match p {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() => {
            Ok(pi.ident.clone())
        }
        Pat::Wild(w) => Ok(Ident::new("_unused_index", w.span())),
        other => err(other, "the variable of a `for` loop is a plain name"),
    }
}

fn member_of(f: &syn::ExprField) -> Result<(syn::Member, u32)> {
    match &f.member {
        syn::Member::Named(n) => match builtins::member(&n.to_string()) {
            Some(k) => Ok((f.member.clone(), k)),
            None => err(n, "components are `x`, `y`, `z`, `w` (vectors) and `x_axis`, `y_axis`, `z_axis` (matrix columns)"),
        },
        syn::Member::Unnamed(u) => err(u, "tuple members are read by destructuring: `let (a, b) = t;`"),
    }
}

fn compound_op(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::AddAssign(_) => "add",
        BinOp::SubAssign(_) => "sub",
        BinOp::MulAssign(_) => "mul",
        BinOp::DivAssign(_) => "div",
        BinOp::RemAssign(_) => "rem",
        BinOp::BitAndAssign(_) => "bitand",
        BinOp::BitOrAssign(_) => "bitor",
        BinOp::BitXorAssign(_) => "bitxor",
        BinOp::ShlAssign(_) => "shl",
        BinOp::ShrAssign(_) => "shr",
        _ => return None,
    })
}

/// Literals: floats are f32 (suffixed so both lowerings agree), integers i32 or u32.
fn lit(l: &ExprLit) -> Result<TokenStream> {
    match &l.lit {
        Lit::Float(f) => match f.suffix() {
            "" => {
                let v = syn::LitFloat::new(&format!("{}f32", f.base10_digits()), f.span());
                Ok(quote!(#v))
            }
            "f32" => Ok(quote!(#f)),
            _ => err(f, "floats in kernels are f32"),
        },
        Lit::Int(i) => match i.suffix() {
            "" | "i32" | "u32" => Ok(quote!(#i)),
            _ => err(i, "integers in kernels are i32 or u32"),
        },
        Lit::Bool(b) => Ok(quote!(#b)),
        other => err(
            other,
            "only number and bool literals are part of the kernel language",
        ),
    }
}

// ------------------------------------------------------------------------- kernels and funcs

/// Checks a func's body (its statements, the last one its value).
pub fn func_body(block: &syn::Block) -> Result<Body> {
    let mut checker = Checker::new(HashSet::new(), true);
    let body = checker.block(block, true);
    checker.finish(body)
}

/// Checks a kernel's body: top-level `let`s and parallel loops.
pub fn kernel_body(f: &syn::ItemFn, params: &[Param]) -> Result<Vec<Top>> {
    let names = |keep: &dyn Fn(&Param) -> bool| -> HashSet<String> {
        params
            .iter()
            .filter(|p| keep(p))
            .map(|p| p.name().to_string())
            .collect()
    };
    let scalars = names(&|p| matches!(p, Param::Scalar { .. }));
    let fields = names(&|p| matches!(p, Param::Field { .. }));
    let field_dims =
        |n: usize| names(&|p| matches!(p, Param::Field { dims, .. } if dims.count() == Some(n)));
    let (zero_dim, one_dim) = (field_dims(0), field_dims(1));

    let mut checker = Checker::new(fields.clone(), false);
    checker.read_only = names(&|p| {
        matches!(
            p,
            Param::Field {
                writable: false,
                ..
            }
        )
    });
    let mut tops = Vec::new();
    let mut loops = 0;
    for s in &f.block.stmts {
        let top = match s {
            syn::Stmt::Local(l) => l
                .init
                .as_ref()
                .map_or(Ok(()), |init| check_no_field(&init.expr, &fields))
                .and_then(|()| checker.local(l))
                .map(Top::Let),
            syn::Stmt::Expr(syn::Expr::ForLoop(fl), _) => {
                loops += 1;
                checker.par_loop(fl, params, &scalars, &zero_dim, &one_dim)
            }
            other => err(
                other,
                "a kernel body holds `let` statements and top-level `for` loops (each one a parallel launch)",
            ),
        };
        match top {
            Ok(top) => tops.push(top),
            Err(e) => checker.errors.push(e),
        }
    }
    if loops == 0 {
        checker.errors.push(Error::new_spanned(
            &f.sig.ident,
            "a kernel needs at least one top-level `for` loop",
        ));
    }
    checker.finish(tops)
}

impl Checker {
    /// A top-level `for`: one parallel launch over a field's indices, its active cells or a
    /// range the host computes.
    fn par_loop(
        &mut self,
        fl: &syn::ExprForLoop,
        params: &[Param],
        scalars: &HashSet<String>,
        zero_dim: &HashSet<String>,
        one_dim: &HashSet<String>,
    ) -> Result<Top> {
        // A label names the loop in profiles (`'p2g: for p in x.indices()`).
        let name = fl.label.as_ref().map(|l| l.name.ident.to_string());
        let var = loop_var(&fl.pat)?;
        self.in_par_loop = true;
        self.in_blocks = matches!(&*fl.expr, syn::Expr::Call(c) if is_named(&c.func, "blocks"));
        let body = self.block(&fl.body, false);
        self.in_par_loop = false;
        self.in_blocks = false;
        self.shared.clear();
        let field_of = |this: &Self, mc: &syn::ExprMethodCall, what: &str| {
            let Some(field) = this.is_field(&mc.receiver) else {
                return err(
                    &mc.receiver,
                    format!("`{what}()` is called on a field parameter"),
                );
            };
            if zero_dim.contains(&field.to_string()) {
                return err(
                    &mc.receiver,
                    format!(
                        "a 0-D field has one element, `f[()]`; it has no `{what}()` to loop over"
                    ),
                );
            }
            Ok(field)
        };
        let (domain, scatter) = match &*fl.expr {
            syn::Expr::MethodCall(mc) if mc.method == "active" && mc.args.is_empty() => {
                (Domain::Active(field_of(self, mc, "active")?), Vec::new())
            }
            syn::Expr::MethodCall(mc) if mc.method == "indices" && mc.args.is_empty() => {
                let field = field_of(self, mc, "indices")?;
                // Only 1-D loops scatter: the copies are split by a flat range.
                let scatter = if one_dim.contains(&field.to_string()) {
                    scatter_only(&fl.body, &self.fields)
                } else {
                    Vec::new()
                };
                (Domain::Indices(field), scatter)
            }
            syn::Expr::MethodCall(mc) if mc.method == "bins" => {
                let grid = field_of(self, mc, "bins")?;
                let [order, starts, block] = [0, 1, 2].map(|k| mc.args.iter().nth(k));
                let (Some(order), Some(starts), Some(block), 3) =
                    (order, starts, block, mc.args.len())
                else {
                    return err(
                        mc,
                        "`bins` takes the particle order, the bins' starts and the block size: \
                         `for p in grid.bins(order, starts, 4)`",
                    );
                };
                let index_field = |e: &syn::Expr, what: &str| match self.is_field(e) {
                    Some(f) if one_dim.contains(&f.to_string()) && elem_is(params, &f, "u32") => {
                        Ok(f)
                    }
                    _ => err(
                        e,
                        format!("the {what} of `bins` is a 1-D `Field<u32>` parameter"),
                    ),
                };
                let (order, starts) = (
                    index_field(order, "particle order")?,
                    index_field(starts, "bins' starts")?,
                );
                check_host_bound(block, scalars, "the block size of `bins` is")?;
                let block = self.expr(block)?;
                let domain = Domain::Bins {
                    grid,
                    order,
                    starts,
                    block,
                };
                (domain, Vec::new())
            }
            syn::Expr::Call(c) if is_named(&c.func, "blocks") => {
                let r = match (c.args.first(), c.args.len()) {
                    (Some(syn::Expr::Range(r)), 1) => r,
                    _ => return err(c, "`blocks` takes a range: `for b in blocks(0..n)`"),
                };
                let (a, b, inclusive) = self.host_range(
                    r,
                    scalars,
                    "the range of a block loop needs both ends: `blocks(a..b)`",
                    "the bounds of a block loop are",
                )?;
                (
                    Domain::Blocks(a, b, inclusive),
                    scatter_only(&fl.body, &self.fields),
                )
            }
            syn::Expr::Range(r) => {
                let (a, b, inclusive) = self.host_range(
                    r,
                    scalars,
                    "a parallel range needs both ends: `a..b` or `a..=b`",
                    "the bounds of a parallel range are",
                )?;
                (
                    Domain::Range(a, b, inclusive),
                    scatter_only(&fl.body, &self.fields),
                )
            }
            other => {
                return err(other, "a top-level loop runs over `field.indices()`, `field.active()`, `grid.bins(order, starts, block)`, a range `a..b` / `a..=b` or `blocks(a..b)`");
            }
        };
        // The domain's own field keeps its tree: the loop visits its active cells, or its
        // bins' windows.
        let domain_field = match &domain {
            Domain::Active(f) | Domain::Bins { grid: f, .. } => Some(f.to_string()),
            _ => None,
        };
        let snapshot = stencil_reads(&fl.body, &self.fields)
            .into_iter()
            .filter(|f| Some(f.to_string()) != domain_field)
            .collect();
        // Each invocation of these domains runs for an index of its own.
        let owned = match &domain {
            Domain::Active(_) | Domain::Indices(_) | Domain::Range(..) => {
                own_index_fields(&fl.body, &self.fields, &var)
                    .into_iter()
                    .filter(|f| !scatter.contains(f))
                    .collect()
            }
            Domain::Blocks(..) | Domain::Bins { .. } => Vec::new(),
        };
        Ok(Top::Loop(ParLoop {
            name,
            var,
            domain,
            body,
            used: used_fields(&fl.body, params),
            scatter,
            snapshot,
            adds: field_adds(&fl.body, &self.fields).0,
            owned,
        }))
    }
}

impl Checker {
    /// A top-level loop's range, whose bounds the host computes: its start, end and whether
    /// it is inclusive (`open` is the error for a missing end, `what` names the bounds).
    fn host_range(
        &mut self,
        r: &syn::ExprRange,
        scalars: &HashSet<String>,
        open: &str,
        what: &str,
    ) -> Result<(Expr, Expr, bool)> {
        let (Some(a), Some(b)) = (&r.start, &r.end) else {
            return err(r, open);
        };
        check_host_bound(a, scalars, what)?;
        check_host_bound(b, scalars, what)?;
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        Ok((self.expr(a)?, self.expr(b)?, inclusive))
    }
}

/// Checks that a parallel range's bounds (or a binned loop's block size: `what` says which)
/// use only scalar parameters, literals and constants: the host computes them before the
/// launch.
fn check_host_bound(e: &syn::Expr, scalars: &HashSet<String>, what: &str) -> Result<()> {
    struct Check<'a> {
        scalars: &'a HashSet<String>,
        what: &'a str,
        error: Option<Error>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Check<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            let bad = match e {
                // A plain name is a scalar parameter or a constant (upper case); a local is
                // not computed yet when the host needs the value.
                syn::Expr::Path(p) => p.path.get_ident().is_some_and(|id| {
                    let name = id.to_string();
                    !self.scalars.contains(&name) && name.chars().any(|c| c.is_lowercase())
                }),
                syn::Expr::Index(_)
                | syn::Expr::MethodCall(_)
                | syn::Expr::Call(_)
                | syn::Expr::Block(_)
                | syn::Expr::If(_) => true,
                _ => false,
            };
            if bad && self.error.is_none() {
                self.error = Some(Error::new_spanned(
                    e,
                    format!(
                        "{} computed before the launch: use scalar parameters, literals and constants",
                        self.what
                    ),
                ));
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut check = Check {
        scalars,
        what,
        error: None,
    };
    syn::visit::Visit::visit_expr(&mut check, e);
    check.error.map_or(Ok(()), Err)
}

/// A top-level `let` is evaluated before each parallel loop, so it may not read fields
/// (an earlier loop could have written them).
fn check_no_field(e: &syn::Expr, fields: &HashSet<String>) -> Result<()> {
    struct Check<'a> {
        fields: &'a HashSet<String>,
        error: Option<Error>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Check<'_> {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                if self.fields.contains(&id.to_string()) && self.error.is_none() {
                    self.error = Some(Error::new_spanned(
                        p,
                        "a top-level `let` runs before each parallel loop and cannot read fields; \
                         read the field inside the loop",
                    ));
                }
            }
        }
    }
    let mut check = Check {
        fields,
        error: None,
    };
    syn::visit::Visit::visit_expr(&mut check, e);
    check.error.map_or(Ok(()), Err)
}

/// The fields a loop body uses only as `f[i] += v` / `f[i] -= v`: the CPU runs such a loop
/// as a scatter into private copies (`mpm_core::scatter`). A field that is also read,
/// stored or passed anywhere in the body keeps the shared atomics.
fn scatter_only(body: &syn::Block, fields: &HashSet<String>) -> Vec<Ident> {
    let (adds, other) = field_adds(body, fields);
    adds.into_iter()
        .filter(|f| !other.contains(&f.to_string()))
        .collect()
}

/// The field parameter an expression names, if it is one (parentheses aside).
fn field_named(e: &syn::Expr, fields: &HashSet<String>) -> Option<Ident> {
    match strip_parens(e) {
        syn::Expr::Path(p) => p
            .path
            .get_ident()
            .filter(|id| fields.contains(&id.to_string()))
            .cloned(),
        _ => None,
    }
}

/// The fields a loop body uses only as `f[i]` in a value, never stored into, passed or
/// asked about, and reads at least once inside a loop of its own: a stencil's reads.
fn stencil_reads(body: &syn::Block, fields: &HashSet<String>) -> Vec<Ident> {
    struct Uses<'a> {
        fields: &'a HashSet<String>,
        depth: usize,
        nested: Vec<Ident>,
        other: HashSet<String>,
    }
    impl Uses<'_> {
        fn field(&self, e: &syn::Expr) -> Option<Ident> {
            field_named(e, self.fields)
        }
        /// `f[i]` as a place: `f` is stored into.
        fn place(&mut self, e: &syn::Expr) -> bool {
            if let syn::Expr::Index(ix) = strip_parens(e) {
                if let Some(f) = self.field(&ix.expr) {
                    self.other.insert(f.to_string());
                    syn::visit::Visit::visit_expr(self, &ix.index);
                    return true;
                }
            }
            false
        }
        fn nested(&mut self, visit: impl FnOnce(&mut Self)) {
            self.depth += 1;
            visit(self);
            self.depth -= 1;
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            match e {
                syn::Expr::Assign(a) if self.place(&a.left) => self.visit_expr(&a.right),
                syn::Expr::Binary(b) if is_compound(&b.op) && self.place(&b.left) => {
                    self.visit_expr(&b.right)
                }
                syn::Expr::Index(ix) if self.field(&ix.expr).is_some() => {
                    if let Some(f) = self.field(&ix.expr) {
                        if self.depth > 0 && !self.nested.contains(&f) {
                            self.nested.push(f);
                        }
                    }
                    self.visit_expr(&ix.index);
                }
                syn::Expr::ForLoop(f) => {
                    self.visit_expr(&f.expr);
                    self.nested(|s| syn::visit::Visit::visit_block(s, &f.body));
                }
                syn::Expr::While(w) => self.nested(|s| syn::visit::visit_expr_while(s, w)),
                syn::Expr::Loop(l) => self.nested(|s| syn::visit::visit_expr_loop(s, l)),
                _ => {
                    if let Some(f) = self.field(e) {
                        self.other.insert(f.to_string());
                    }
                    syn::visit::visit_expr(self, e);
                }
            }
        }
    }
    let mut uses = Uses {
        fields,
        depth: 0,
        nested: Vec::new(),
        other: HashSet::new(),
    };
    syn::visit::Visit::visit_block(&mut uses, body);
    uses.nested
        .into_iter()
        .filter(|f| !uses.other.contains(&f.to_string()))
        .collect()
}

/// The fields a loop body stores into (`f[var] = v`) and names nowhere but as `f[var]`, `var`
/// being the loop's variable, which no binding in the body shadows. In a loop whose
/// invocations run for distinct indices no two of them touch one element of such a field,
/// and a stored field is a `&mut` parameter, which no other parameter aliases: the CPU
/// stores into it with plain writes (`mpm_core::host::Owned`). Atomic stores, which LLVM
/// does not combine, left the arithmetic before them scalar: mpm3d's G2P 4.8-5.3 -> 3.7-3.9
/// ms with plain ones.
pub(crate) fn own_index_fields(
    body: &syn::Block,
    fields: &HashSet<String>,
    var: &Ident,
) -> Vec<Ident> {
    struct Uses<'a> {
        fields: &'a HashSet<String>,
        var: &'a Ident,
        stored: Vec<Ident>,
        /// Fields named otherwise than as `f[var]`.
        other: HashSet<String>,
        shadowed: bool,
    }
    impl Uses<'_> {
        fn field(&self, e: &syn::Expr) -> Option<Ident> {
            field_named(e, self.fields)
        }
        fn own_index(&self, e: &syn::Expr) -> bool {
            matches!(strip_parens(e), syn::Expr::Path(p) if p.path.is_ident(self.var))
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            match e {
                syn::Expr::Index(ix) if self.field(&ix.expr).is_some() => {
                    if !self.own_index(&ix.index) {
                        if let Some(f) = self.field(&ix.expr) {
                            self.other.insert(f.to_string());
                        }
                    }
                    self.visit_expr(&ix.index);
                }
                syn::Expr::Assign(a) => {
                    if let syn::Expr::Index(ix) = strip_parens(&a.left) {
                        if let Some(f) = self.field(&ix.expr) {
                            if !self.stored.contains(&f) {
                                self.stored.push(f);
                            }
                        }
                    }
                    syn::visit::visit_expr_assign(self, a);
                }
                _ => {
                    if let Some(f) = self.field(e) {
                        self.other.insert(f.to_string());
                    }
                    syn::visit::visit_expr(self, e);
                }
            }
        }
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            if p.ident == *self.var {
                self.shadowed = true;
            }
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut uses = Uses {
        fields,
        var,
        stored: Vec::new(),
        other: HashSet::new(),
        shadowed: false,
    };
    syn::visit::Visit::visit_block(&mut uses, body);
    if uses.shadowed {
        return Vec::new();
    }
    uses.stored
        .into_iter()
        .filter(|f| !uses.other.contains(&f.to_string()))
        .collect()
}

/// `a op= b`.
fn is_compound(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// The fields a loop body adds into (`f[i] += v` / `f[i] -= v`), and the fields it uses
/// otherwise.
fn field_adds(body: &syn::Block, fields: &HashSet<String>) -> (Vec<Ident>, HashSet<String>) {
    struct Uses<'a> {
        fields: &'a HashSet<String>,
        adds: Vec<Ident>,
        other: HashSet<String>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast syn::Expr) {
            if let syn::Expr::Binary(b) = e {
                if matches!(b.op, BinOp::AddAssign(_) | BinOp::SubAssign(_)) {
                    if let syn::Expr::Index(ix) = strip_parens(&b.left) {
                        if let syn::Expr::Path(p) = strip_parens(&ix.expr) {
                            if let Some(id) = p.path.get_ident() {
                                if self.fields.contains(&id.to_string()) {
                                    if !self.adds.contains(id) {
                                        self.adds.push(id.clone());
                                    }
                                    self.visit_expr(&ix.index);
                                    self.visit_expr(&b.right);
                                    return;
                                }
                            }
                        }
                    }
                }
            }
            if let syn::Expr::Path(p) = e {
                if let Some(id) = p.path.get_ident() {
                    if self.fields.contains(&id.to_string()) {
                        self.other.insert(id.to_string());
                    }
                }
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut uses = Uses {
        fields,
        adds: Vec::new(),
        other: HashSet::new(),
    };
    syn::visit::Visit::visit_block(&mut uses, body);
    (uses.adds, uses.other)
}

/// Whether field parameter `field` has element type `elem`.
fn elem_is(params: &[Param], field: &Ident, elem: &str) -> bool {
    params.iter().any(|p| match p {
        Param::Field { name, elem: ty, .. } => {
            name == field && quote::quote!(#ty).to_string() == elem
        }
        _ => false,
    })
}

/// The field parameters a loop body names, in parameter order.
fn used_fields(body: &syn::Block, params: &[Param]) -> Vec<Ident> {
    struct Names(HashSet<String>);
    impl<'ast> syn::visit::Visit<'ast> for Names {
        fn visit_path(&mut self, p: &'ast syn::Path) {
            if let Some(id) = p.get_ident() {
                self.0.insert(id.to_string());
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut names = Names(HashSet::new());
    syn::visit::Visit::visit_block(&mut names, body);
    params
        .iter()
        .filter(|p| matches!(p, Param::Field { .. }) && names.0.contains(&p.name().to_string()))
        .map(|p| p.name().clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(body: syn::Block) -> Vec<String> {
        let fields: HashSet<String> = ["v", "c", "g"].iter().map(|s| s.to_string()).collect();
        let var: Ident = syn::parse_quote!(p);
        own_index_fields(&body, &fields, &var)
            .iter()
            .map(|f| f.to_string())
            .collect()
    }

    /// What makes plain stores sound: only fields named nowhere but at the loop's own index,
    /// and not when a binding shadows the index.
    #[test]
    fn own_index_fields_are_those_named_only_at_the_loops_index() {
        assert_eq!(
            owned(syn::parse_quote!({
                let x = v[p] + g[p + 1];
                v[p] = x;
                c[p] = x;
                g[p] = x;
            })),
            ["v", "c"]
        );
        // Read at another index: refused.
        assert_eq!(
            owned(syn::parse_quote!({
                v[p] = c[0];
                c[p] = 1.0;
            })),
            ["v"]
        );
        // Added into at its own index: still the invocation's element alone.
        assert_eq!(
            owned(syn::parse_quote!({
                v[p] = 1.0;
                v[p] += 1.0;
            })),
            ["v"]
        );
        // Passed to a builtin, stored at another index in a nested loop: refused.
        assert!(owned(syn::parse_quote!({
            v[p] = 1.0;
            if is_active(v, p) {}
        }))
        .is_empty());
        assert!(owned(syn::parse_quote!({
            for q in 0..3 {
                v[q] = 1.0;
            }
            v[p] = 1.0;
        }))
        .is_empty());
        // A shadowed index is another index.
        assert!(owned(syn::parse_quote!({
            let p = p + 1;
            v[p] = 1.0;
        }))
        .is_empty());
        assert!(owned(syn::parse_quote!({
            for p in 0..3 {
                v[p] = 1.0;
            }
        }))
        .is_empty());
        // Read only: nothing to store.
        assert!(owned(syn::parse_quote!({
            let x = v[p];
        }))
        .is_empty());
    }
}
