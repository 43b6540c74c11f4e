//! Lowering of kernel and func bodies to CPU Rust and to trace calls.

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{BinOp, Block, Error, Expr, ExprLit, ItemFn, Lit, Local, Pat, Result, Stmt, UnOp};

use crate::builtins;
use crate::signature::{arg_name, kernel_params, Param};

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Cpu,
    Trace,
}

/// Lowering state for one body and one target.
struct Lower {
    target: Target,
    fields: HashSet<String>,
    in_func: bool,
    in_par_loop: bool,
    /// Sequential loops entered inside the current parallel loop or func.
    loop_depth: usize,
}

fn err<T>(node: impl ToTokens, msg: impl std::fmt::Display) -> Result<T> {
    Err(Error::new_spanned(node, msg))
}

impl Lower {
    fn new(target: Target, fields: HashSet<String>, in_func: bool) -> Self {
        Lower {
            target,
            fields,
            in_func,
            in_par_loop: false,
            loop_depth: 0,
        }
    }

    /// The module holding this target's operators and builtins.
    fn m(&self) -> TokenStream {
        match self.target {
            Target::Cpu => quote!(::mpm_core::lang),
            Target::Trace => quote!(::mpm_core::trace),
        }
    }

    fn is_field(&self, e: &Expr) -> Option<syn::Ident> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if self.fields.contains(&id.to_string()) {
                    return Some(id.clone());
                }
            }
        }
        None
    }

    // ----------------------------------------------------------------------------------- blocks

    /// Lowers statements; with `value`, a trailing expression is the block's value.
    fn stmts(&mut self, stmts: &[Stmt], value: bool) -> Result<TokenStream> {
        let mut out = TokenStream::new();
        for (k, s) in stmts.iter().enumerate() {
            let last = k + 1 == stmts.len();
            match s {
                Stmt::Expr(e, None) if last && value => {
                    let v = self.expr(e)?;
                    out.extend(v);
                }
                _ => out.extend(self.stmt(s)?),
            }
        }
        Ok(out)
    }

    fn block(&mut self, b: &Block, value: bool) -> Result<TokenStream> {
        let inner = self.stmts(&b.stmts, value)?;
        Ok(quote!({ #inner }))
    }

    fn stmt(&mut self, s: &Stmt) -> Result<TokenStream> {
        match s {
            Stmt::Local(l) => self.local(l),
            Stmt::Expr(e, _) => self.stmt_expr(e),
            Stmt::Item(item) => err(
                item,
                "items cannot be declared inside kernels or funcs; move this item outside",
            ),
            Stmt::Macro(m) => err(m, "macros are not part of the kernel language"),
        }
    }

    fn local(&mut self, l: &Local) -> Result<TokenStream> {
        let Some(init) = &l.init else {
            return err(l, "`let` needs an initial value, e.g. `let mut x = 0.0;`");
        };
        if let Some((_, d)) = &init.diverge {
            return err(d, "`let ... else` is not part of the kernel language");
        }
        let value = self.expr(&init.expr)?;
        let (pat, ty) = match &l.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        match pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                let name = &pi.ident;
                if self.fields.contains(&name.to_string()) {
                    return err(name, format!("`{name}` is a field parameter; give this local another name"));
                }
                let mutability = &pi.mutability;
                let label = name.to_string();
                Ok(match (self.target, ty) {
                    (Target::Cpu, None) => quote!(let #mutability #name = #value;),
                    (Target::Cpu, Some(t)) => quote!(let #mutability #name: #t = #value;),
                    (Target::Trace, None) => quote!(let #name = ::mpm_core::trace::let_(#label, #value);),
                    (Target::Trace, Some(t)) => quote!(
                        let #name: ::mpm_core::trace::Expr<#t> = ::mpm_core::trace::let_::<#t, _>(#label, #value);
                    ),
                })
            }
            Pat::Wild(_) => Ok(quote!(let _ = #value;)),
            Pat::Tuple(tp) if ty.is_none() && (tp.elems.len() == 2 || tp.elems.len() == 3) => {
                let mut names = Vec::new();
                let mut muts = Vec::new();
                for p in &tp.elems {
                    match p {
                        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                            names.push(pi.ident.clone());
                            muts.push(pi.mutability);
                        }
                        other => return err(other, "tuple patterns hold plain names: `let (u, s, v) = svd(m);`"),
                    }
                }
                Ok(match self.target {
                    Target::Cpu => quote!(let (#(#muts #names),*) = #value;),
                    Target::Trace => {
                        let untuple = format_ident!("untuple{}", names.len());
                        let labels = names.iter().map(|n| n.to_string());
                        quote!(
                            let __tuple = ::mpm_core::trace::let_("tuple", #value);
                            let (#(#names),*) = ::mpm_core::trace::#untuple(__tuple);
                            #(let #names = ::mpm_core::trace::let_(#labels, #names);)*
                        )
                    }
                })
            }
            other => err(other, "`let` binds a name (`let x = ..`, `let x: f32 = ..`) or a tuple of names (`let (a, b) = ..`)"),
        }
    }

    fn stmt_expr(&mut self, e: &Expr) -> Result<TokenStream> {
        match e {
            Expr::Assign(a) => self.assign(&a.left, None, &a.right),
            Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, Some(&b.op), &b.right)
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => {
                if let Some(l) = &w.label {
                    return err(l, "loop labels are not part of the kernel language");
                }
                let cond = self.expr(&w.cond)?;
                let body = self.loop_body(&w.body)?;
                Ok(match self.target {
                    Target::Cpu => quote!(while #cond #body),
                    Target::Trace => quote!(::mpm_core::trace::while_(|| #cond, || #body);),
                })
            }
            Expr::Loop(l) => {
                if let Some(label) = &l.label {
                    return err(label, "loop labels are not part of the kernel language");
                }
                let body = self.loop_body(&l.body)?;
                Ok(match self.target {
                    Target::Cpu => quote!(loop #body),
                    Target::Trace => quote!(::mpm_core::trace::while_(|| true, || #body);),
                })
            }
            Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return err(b, "`break` takes no label or value in kernels");
                }
                if self.loop_depth == 0 && self.in_par_loop {
                    return err(b, "`break` cannot leave a parallel loop; use `continue` to end this iteration");
                }
                if self.loop_depth == 0 {
                    return err(b, "`break` is only allowed inside a loop");
                }
                Ok(match self.target {
                    Target::Cpu => quote!(break;),
                    Target::Trace => quote!(::mpm_core::trace::break_();),
                })
            }
            Expr::Continue(c) => {
                if c.label.is_some() {
                    return err(c, "loop labels are not part of the kernel language");
                }
                if self.loop_depth == 0 && !self.in_par_loop {
                    return err(c, "`continue` is only allowed inside a loop");
                }
                Ok(
                    match (self.target, self.loop_depth == 0 && self.in_par_loop) {
                        // Directly in a parallel loop, `continue` ends this invocation.
                        (Target::Cpu, true) => quote!(return;),
                        (Target::Trace, true) => quote!(::mpm_core::trace::return_();),
                        (Target::Cpu, false) => quote!(continue;),
                        (Target::Trace, false) => quote!(::mpm_core::trace::continue_();),
                    },
                )
            }
            Expr::Return(r) => {
                if !self.in_func {
                    return err(r, "kernels cannot `return`; use `continue` to end this iteration of a parallel loop");
                }
                let Some(v) = &r.expr else {
                    return err(r, "a func returns a value: `return x;`");
                };
                let v = self.expr(v)?;
                Ok(match self.target {
                    Target::Cpu => quote!(return #v;),
                    Target::Trace => quote!(::mpm_core::trace::return_value(#v);),
                })
            }
            Expr::Block(b) => {
                if let Some(l) = &b.label {
                    return err(l, "block labels are not part of the kernel language");
                }
                self.block(&b.block, false)
            }
            other => {
                let v = self.expr(other)?;
                Ok(quote!(let _ = #v;))
            }
        }
    }

    fn loop_body(&mut self, b: &Block) -> Result<TokenStream> {
        self.loop_depth += 1;
        let body = self.block(b, false);
        self.loop_depth -= 1;
        body
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> Result<TokenStream> {
        let cond = self.expr(&i.cond)?;
        let then = self.block(&i.then_branch, false)?;
        let otherwise = match &i.else_branch {
            None => None,
            Some((_, e)) => Some(match &**e {
                Expr::If(nested) => self.if_stmt(nested)?,
                Expr::Block(b) => self.block(&b.block, false)?,
                other => return err(other, "expected a block after `else`"),
            }),
        };
        Ok(match self.target {
            Target::Cpu => match otherwise {
                Some(o) => quote!(if #cond #then else { #o }),
                None => quote!(if #cond #then),
            },
            Target::Trace => {
                let o = otherwise.unwrap_or_default();
                quote!(::mpm_core::trace::if_(#cond, || #then, || { #o });)
            }
        })
    }

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> Result<TokenStream> {
        if let Some(l) = &f.label {
            return err(l, "loop labels are not part of the kernel language");
        }
        let var = loop_var(&f.pat)?;
        let Expr::Range(r) = &*f.expr else {
            return err(
                &f.expr,
                "inner `for` loops run over a range `a..b` or `a..=b`",
            );
        };
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            return err(r, "the range of a `for` loop needs both ends: `a..b`");
        };
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let a = self.expr(start)?;
        let b = self.expr(end)?;
        let body = self.loop_body(&f.body)?;
        Ok(match self.target {
            Target::Cpu if inclusive => quote!(for #var in (#a)..=(#b) #body),
            Target::Cpu => quote!(for #var in (#a)..(#b) #body),
            Target::Trace => {
                let label = var.to_string();
                let end = match (inclusive, int_literal(end)) {
                    (false, _) => b,
                    (true, Some(n)) => {
                        let n = proc_macro2::Literal::i64_unsuffixed(n + 1);
                        quote!(#n)
                    }
                    (true, None) => quote!(::mpm_core::trace::add(#b, 1)),
                };
                quote!(::mpm_core::trace::for_range(#label, #a, #end, |#var| #body);)
            }
        })
    }

    /// `left = right` or `left op= right`.
    fn assign(&mut self, left: &Expr, op: Option<&BinOp>, right: &Expr) -> Result<TokenStream> {
        let value = self.expr(right)?;
        let span = left
            .span()
            .join(right.span())
            .unwrap_or_else(|| right.span());
        if let Expr::Index(ix) = strip_parens(left) {
            if let Some(f) = self.is_field(&ix.expr) {
                let index = self.expr(&ix.index)?;
                return match (op, self.target) {
                    (None, Target::Cpu) => Ok(quote_spanned!(span=> #f.store(#index, #value);)),
                    (None, Target::Trace) => Ok(quote_spanned!(span=> ::mpm_core::trace::store(#f, #index, #value);)),
                    (Some(BinOp::AddAssign(_)), Target::Cpu) => Ok(quote_spanned!(span=> #f.atomic_add(#index, #value);)),
                    (Some(BinOp::AddAssign(_)), Target::Trace) => {
                        Ok(quote_spanned!(span=> ::mpm_core::trace::atomic_add(#f, #index, #value);))
                    }
                    (Some(BinOp::SubAssign(_)), Target::Cpu) => {
                        Ok(quote_spanned!(span=> #f.atomic_sub(#index, #value);))
                    }
                    (Some(BinOp::SubAssign(_)), Target::Trace) => {
                        Ok(quote_spanned!(span=> ::mpm_core::trace::atomic_sub(#f, #index, #value);))
                    }
                    (Some(other), _) => err(
                        other,
                        "on a field only `=`, `+=` and `-=` (atomic) are allowed; write `f[i] = f[i] * v`",
                    ),
                };
            }
        }
        match self.target {
            Target::Cpu => {
                let place = self.place_cpu(left)?;
                match op {
                    None => Ok(quote_spanned!(span=> #place = #value;)),
                    Some(op) => {
                        let f = format_ident!("{}", compound_op(op).unwrap_or("add"));
                        let read = self.expr(left)?;
                        Ok(quote_spanned!(span=> #place = ::mpm_core::lang::#f(#read, #value);))
                    }
                }
            }
            Target::Trace => {
                let place = self.place_trace(left)?;
                match op {
                    None => Ok(quote_spanned!(span=> ::mpm_core::trace::assign(#place, #value);)),
                    Some(op) => {
                        let f = format_ident!("{}", compound_op(op).unwrap_or("add"));
                        Ok(quote!({
                            let __place = #place;
                            let __value = ::mpm_core::trace::#f(__place.get(), #value);
                            ::mpm_core::trace::assign(__place, __value);
                        }))
                    }
                }
            }
        }
    }

    fn place_cpu(&mut self, e: &Expr) -> Result<TokenStream> {
        match e {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                if self.is_field(e).is_some() {
                    return err(e, "assign to an element of the field: `f[i] = v`");
                }
                Ok(quote!(#p))
            }
            Expr::Paren(p) => self.place_cpu(&p.expr),
            Expr::Field(f) => {
                let base = self.place_cpu(&f.base)?;
                let member = member_of(f)?.0;
                Ok(quote!((#base).#member))
            }
            Expr::Index(ix) => {
                let base = self.place_cpu(&ix.expr)?;
                let i = self.expr(&ix.index)?;
                Ok(quote!((*::mpm_core::lang::index_mut(&mut #base, #i))))
            }
            other => err(other, "only a local variable, its component or element, or a field element can be assigned"),
        }
    }

    fn place_trace(&mut self, e: &Expr) -> Result<TokenStream> {
        match e {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                if self.is_field(e).is_some() {
                    return err(e, "assign to an element of the field: `f[i] = v`");
                }
                Ok(quote!(::mpm_core::trace::place(#p)))
            }
            Expr::Paren(p) => self.place_trace(&p.expr),
            Expr::Field(f) => {
                let base = self.place_trace(&f.base)?;
                let k = member_of(f)?.1;
                Ok(quote!(::mpm_core::trace::place_member(#base, #k)))
            }
            Expr::Index(ix) => {
                let base = self.place_trace(&ix.expr)?;
                let i = self.expr(&ix.index)?;
                Ok(quote!(::mpm_core::trace::place_index(#base, #i)))
            }
            other => err(other, "only a local variable, its component or element, or a field element can be assigned"),
        }
    }

    // ------------------------------------------------------------------------------ expressions

    fn expr(&mut self, e: &Expr) -> Result<TokenStream> {
        let m = self.m();
        match e {
            Expr::Lit(l) => lit(l),
            Expr::Path(p) => {
                if p.qself.is_some() {
                    return err(p, "qualified paths are not part of the kernel language");
                }
                if let Some(id) = p.path.get_ident() {
                    if self.fields.contains(&id.to_string()) {
                        return err(p, format!("field `{id}` must be indexed: `{id}[i]`"));
                    }
                    return Ok(quote!(#id));
                }
                // A constant such as `Vec2::ZERO` or `core::f32::consts::PI`.
                let path = self.traced_path(&p.path);
                Ok(match self.target {
                    Target::Cpu => quote!(#p),
                    Target::Trace => quote!(::mpm_core::trace::constant(#path)),
                })
            }
            Expr::Paren(p) => {
                let inner = self.expr(&p.expr)?;
                Ok(quote!((#inner)))
            }
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Binary(b) => self.binary(b),
            Expr::Unary(u) => {
                let inner = &*u.expr;
                match &u.op {
                    UnOp::Neg(_) => {
                        if let Expr::Lit(l) = strip_parens(inner) {
                            let l = lit(l)?;
                            return Ok(quote!((-#l)));
                        }
                        let x = self.expr(inner)?;
                        Ok(quote!(#m::neg(#x)))
                    }
                    UnOp::Not(_) => {
                        let x = self.expr(inner)?;
                        Ok(match self.target {
                            Target::Cpu => quote!((!#x)),
                            Target::Trace => quote!(::mpm_core::trace::not(#x)),
                        })
                    }
                    other => err(other, "pointers and references are not part of the kernel language"),
                }
            }
            Expr::Index(ix) => {
                let i = self.expr(&ix.index)?;
                if let Some(f) = self.is_field(&ix.expr) {
                    return Ok(match self.target {
                        Target::Cpu => quote_spanned!(ix.span()=> #f.load(#i)),
                        Target::Trace => quote_spanned!(ix.span()=> ::mpm_core::trace::load(#f, #i)),
                    });
                }
                let base = self.expr(&ix.expr)?;
                Ok(quote!(#m::index(#base, #i)))
            }
            Expr::Field(f) => {
                let (member, k) = member_of(f)?;
                let base = self.expr(&f.base)?;
                Ok(match self.target {
                    Target::Cpu => quote!((#base).#member),
                    Target::Trace => quote!(::mpm_core::trace::member(#base, #k)),
                })
            }
            Expr::Call(c) => self.call(c),
            Expr::MethodCall(mc) => self.method(mc),
            Expr::Cast(c) => {
                let ty = &c.ty;
                let name = ty.to_token_stream().to_string();
                if !["f32", "i32", "u32"].contains(&name.as_str()) {
                    return err(ty, "`as` converts to f32, i32 or u32; use `as_vec2()` and friends for vectors");
                }
                let x = self.expr(&c.expr)?;
                Ok(match self.target {
                    Target::Cpu => quote_spanned!(c.span()=> (#x as #ty)),
                    Target::Trace => quote_spanned!(c.span()=> ::mpm_core::trace::cast::<#ty, _, _>(#x)),
                })
            }
            Expr::If(i) => self.if_value(i),
            Expr::Block(b) => {
                if b.label.is_some() {
                    return err(b, "block labels are not part of the kernel language");
                }
                self.block(&b.block, true)
            }
            Expr::Array(a) => {
                let items = a.elems.iter().map(|x| self.expr(x)).collect::<Result<Vec<_>>>()?;
                Ok(match self.target {
                    Target::Cpu => quote!([#(#items),*]),
                    Target::Trace => quote!(::mpm_core::trace::array([#(::mpm_core::trace::into_expr(#items)),*])),
                })
            }
            Expr::Repeat(r) => {
                let x = self.expr(&r.expr)?;
                let n = &r.len;
                Ok(match self.target {
                    Target::Cpu => quote!([#x; #n]),
                    Target::Trace => quote!(::mpm_core::trace::array_splat::<_, { #n }>(#x)),
                })
            }
            Expr::Tuple(t) => {
                let items = t.elems.iter().map(|x| self.expr(x)).collect::<Result<Vec<_>>>()?;
                match (items.len(), self.target) {
                    (0, _) => Ok(quote!(())),
                    (2 | 3, Target::Cpu) => Ok(quote!((#(#items),*))),
                    (2, Target::Trace) => Ok(quote!(::mpm_core::trace::tuple2(#(#items),*))),
                    (3, Target::Trace) => Ok(quote!(::mpm_core::trace::tuple3(#(#items),*))),
                    _ => err(t, "tuples have 2 or 3 members in kernels"),
                }
            }
            Expr::Range(r) => err(r, "ranges appear only as the range of a `for` loop"),
            Expr::Closure(c) => err(c, "closures are not part of the kernel language; write a #[func]"),
            Expr::Match(mt) => err(mt, "`match` is not part of the kernel language; use `if` / `else`"),
            Expr::Reference(r) => err(r, "references are not part of the kernel language; pass values"),
            Expr::Macro(mc) => err(mc, "macros are not part of the kernel language"),
            Expr::Struct(s) => err(s, "struct literals are not part of the kernel language; use glam vectors and matrices"),
            Expr::Try(t) => err(t, "`?` is not part of the kernel language"),
            Expr::Assign(a) => err(a, "an assignment is a statement, not a value"),
            Expr::Unsafe(u) => err(u, "`unsafe` is not part of the kernel language"),
            other => err(other, "this expression is not part of the kernel language"),
        }
    }

    fn binary(&mut self, b: &syn::ExprBinary) -> Result<TokenStream> {
        if compound_op(&b.op).is_some() {
            return err(b, "compound assignment is a statement, not a value");
        }
        let l = self.expr(&b.left)?;
        let r = self.expr(&b.right)?;
        // A right operand that records statements (an `if` or block value) must only run when
        // the left one does not decide: trace it as a branch.
        if self.target == Target::Trace && has_statements(&b.right) {
            match b.op {
                BinOp::And(_) => {
                    return Ok(quote!(::mpm_core::trace::if_value(#l, || #r, || false)))
                }
                BinOp::Or(_) => return Ok(quote!(::mpm_core::trace::if_value(#l, || true, || #r))),
                _ => {}
            }
        }
        let (f, native) = match b.op {
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
        let f = format_ident!("{}", f);
        let span = b.span();
        Ok(match (self.target, native) {
            (Target::Cpu, Some(op)) => quote_spanned!(span=> (#l #op #r)),
            (Target::Cpu, None) => quote_spanned!(span=> ::mpm_core::lang::#f(#l, #r)),
            (Target::Trace, _) => quote_spanned!(span=> ::mpm_core::trace::#f(#l, #r)),
        })
    }

    fn if_value(&mut self, i: &syn::ExprIf) -> Result<TokenStream> {
        let Some((_, otherwise)) = &i.else_branch else {
            return err(i, "an `if` used as a value needs an `else` branch");
        };
        let cond = self.expr(&i.cond)?;
        let then = self.block(&i.then_branch, true)?;
        let otherwise = match &**otherwise {
            Expr::If(nested) => self.if_value(nested)?,
            Expr::Block(b) => self.block(&b.block, true)?,
            other => return err(other, "expected a block after `else`"),
        };
        Ok(match self.target {
            Target::Cpu => quote!(if #cond #then else { #otherwise }),
            Target::Trace => quote!(::mpm_core::trace::if_value(#cond, || #then, || #otherwise)),
        })
    }

    fn call(&mut self, c: &syn::ExprCall) -> Result<TokenStream> {
        let Expr::Path(p) = &*c.func else {
            return err(&c.func, "only named functions can be called in kernels");
        };
        if p.qself.is_some() {
            return err(p, "qualified paths are not part of the kernel language");
        }
        if let Some(id) = p.path.get_ident() {
            let name = id.to_string();
            if ["is_active", "activate", "deactivate"].contains(&name.as_str()) {
                return self.activity(c, id);
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
            return self.associated(p, &segs[n - 2], &segs[n - 1], &args);
        }
        // A builtin or a user #[func]: both are a function and a module of the same name whose
        // `expand` traces the call (builtins are in scope through the body's glob import).
        let path = self.traced_path(&p.path);
        Ok(self.call_path(&path, &args))
    }

    /// A call of a func-shaped item: `f(args)` on the CPU, `f::expand(args)` traced.
    fn call_path(&self, path: &syn::Path, args: &[TokenStream]) -> TokenStream {
        match self.target {
            Target::Cpu => quote_spanned!(path.span()=> #path(#(#args),*)),
            Target::Trace => quote_spanned!(path.span()=> #path::expand(#(#args),*)),
        }
    }

    /// `Type::f(args)`: glam's constructors and `splat` / `from_diagonal`, on a glam type or
    /// an alias of one (`Vec::splat(x)` in code written once for 2D and 3D).
    fn associated(
        &self,
        p: &syn::ExprPath,
        ty: &str,
        f: &str,
        args: &[TokenStream],
    ) -> Result<TokenStream> {
        let path = &p.path;
        let ctor = builtins::constructor(ty, f).filter(|_| builtins::TYPES.contains(&ty));
        let known = ctor.is_some() || f == "splat" || f == "from_diagonal";
        if !known {
            return err(
                p,
                format!(
                    "`{ty}::{f}` is not part of the kernel language; use `new`, `splat`, `from_cols`, \
                     `from_diagonal` or a constant"
                ),
            );
        }
        if self.target == Target::Cpu {
            // glam's own associated function (keeps the user's imports meaningful).
            return Ok(quote!(#path(#(#args),*)));
        }
        let m = self.m();
        if let Some(ctor) = ctor {
            let ctor = format_ident!("{}", ctor);
            return Ok(quote!(#m::#ctor(#(#args),*)));
        }
        let mut ty_path = self.traced_path(path);
        ty_path.segments.pop();
        ty_path.segments.pop_punct();
        let f = format_ident!("{}", f);
        Ok(quote!(#m::#f::<#ty_path>(#(#args),*)))
    }

    /// The traced body of a func lives in a module named after the func, one level below the
    /// func's own: a path starting with `super` needs one more.
    fn traced_path(&self, path: &syn::Path) -> syn::Path {
        let mut path = path.clone();
        if self.target == Target::Trace
            && self.in_func
            && path.segments.first().is_some_and(|s| s.ident == "super")
        {
            path.segments.insert(0, syn::parse_quote!(super));
        }
        path
    }

    /// `is_active(f, i)`, `activate(f, i)`, `deactivate(f, i)` on a field parameter.
    fn activity(&mut self, c: &syn::ExprCall, op: &syn::Ident) -> Result<TokenStream> {
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
        let index = self.expr(&c.args[1])?;
        Ok(match self.target {
            Target::Cpu => quote_spanned!(c.span()=> #field.#op(#index)),
            Target::Trace => quote_spanned!(c.span()=> ::mpm_core::trace::#op(#field, #index)),
        })
    }

    fn method(&mut self, mc: &syn::ExprMethodCall) -> Result<TokenStream> {
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
        let method = &mc.method;
        let path: syn::Path =
            syn::parse_quote_spanned!(method.span()=> ::mpm_core::builtins::methods::#method);
        Ok(self.call_path(&path, &args))
    }
}

/// Whether tracing an expression records statements (an `if` or block used as a value).
fn has_statements(e: &Expr) -> bool {
    struct Find(bool);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if matches!(e, Expr::If(_) | Expr::Block(_)) {
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
fn int_literal(e: &Expr) -> Option<i64> {
    match strip_parens(e) {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) if i.suffix().is_empty() => i.base10_parse().ok(),
        _ => None,
    }
}

fn strip_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_parens(&p.expr),
        Expr::Group(g) => strip_parens(&g.expr),
        other => other,
    }
}

fn loop_var(p: &Pat) -> Result<syn::Ident> {
    match p {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() && pi.mutability.is_none() => {
            Ok(pi.ident.clone())
        }
        Pat::Wild(w) => Ok(syn::Ident::new("_unused_index", w.span())),
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

// ----------------------------------------------------------------------------------- kernels

fn check_fn(f: &ItemFn, what: &str) -> Result<()> {
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        return err(a, format!("{what}s cannot be async"));
    }
    if let Some(u) = &sig.unsafety {
        return err(u, format!("{what}s cannot be unsafe"));
    }
    if let Some(c) = &sig.constness {
        return err(c, format!("{what}s cannot be const"));
    }
    if let Some(v) = &sig.variadic {
        return err(v, format!("{what}s cannot be variadic"));
    }
    if !sig.generics.params.is_empty() {
        return err(&sig.generics, format!("{what}s cannot be generic"));
    }
    Ok(())
}

/// `#[kernel]`.
pub fn kernel(f: ItemFn) -> TokenStream {
    let params = match check_fn(&f, "kernel").and_then(|()| kernel_params(&f.sig)) {
        Ok(p) => p,
        Err(e) => return e.to_compile_error(),
    };
    kernel_body(&f, &params).unwrap_or_else(|e| {
        // Keep the kernel's name defined so that callers do not add unrelated errors.
        let error = e.to_compile_error();
        let (vis, name, inputs) = (&f.vis, &f.sig.ident, plain_inputs(&f.sig));
        quote!(
            #error
            #[allow(unused_variables, clippy::all)]
            #vis fn #name(#inputs) -> ::core::result::Result<(), ::mpm_core::Error> {
                ::core::unreachable!("this kernel did not compile")
            }
        )
    })
}

/// The parameters with `mut` removed (the wrapper only forwards them).
fn plain_inputs(sig: &syn::Signature) -> TokenStream {
    let args = sig.inputs.iter().map(|a| match a {
        syn::FnArg::Typed(pt) => {
            let mut pt = pt.clone();
            if let Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
            }
            quote!(#pt)
        }
        other => quote!(#other),
    });
    quote!(#(#args),*)
}

/// Checks that a parallel range's bounds use only scalar parameters, literals and constants:
/// the host computes them before the launch.
fn check_host_bound(e: &Expr, scalars: &HashSet<String>) -> Result<()> {
    struct Check<'a> {
        scalars: &'a HashSet<String>,
        error: Option<Error>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Check<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            let bad = match e {
                Expr::Path(p) => p
                    .path
                    .get_ident()
                    .is_some_and(|id| !self.scalars.contains(&id.to_string())),
                Expr::Index(_)
                | Expr::MethodCall(_)
                | Expr::Call(_)
                | Expr::Block(_)
                | Expr::If(_) => true,
                _ => false,
            };
            if bad && self.error.is_none() {
                self.error = Some(Error::new_spanned(
                    e,
                    "the bounds of a parallel range are computed before the launch: use scalar parameters, \
                     literals and constants",
                ));
            }
            syn::visit::visit_expr(self, e);
        }
    }
    let mut check = Check {
        scalars,
        error: None,
    };
    syn::visit::Visit::visit_expr(&mut check, e);
    check.error.map_or(Ok(()), Err)
}

/// A top-level `let` is evaluated before each parallel loop, so it may not read fields
/// (an earlier loop could have written them).
fn check_no_field(e: &Expr, fields: &HashSet<String>) -> Result<()> {
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
fn scatter_only(body: &syn::Block, fields: &HashSet<String>) -> Vec<syn::Ident> {
    struct Uses<'a> {
        fields: &'a HashSet<String>,
        scatter: Vec<syn::Ident>,
        other: HashSet<String>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Uses<'_> {
        fn visit_expr(&mut self, e: &'ast Expr) {
            if let Expr::Binary(b) = e {
                if matches!(b.op, BinOp::AddAssign(_) | BinOp::SubAssign(_)) {
                    if let Expr::Index(ix) = strip_parens(&b.left) {
                        if let Expr::Path(p) = strip_parens(&ix.expr) {
                            if let Some(id) = p.path.get_ident() {
                                if self.fields.contains(&id.to_string()) {
                                    if !self.scatter.contains(id) {
                                        self.scatter.push(id.clone());
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
            if let Expr::Path(p) = e {
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
        scatter: Vec::new(),
        other: HashSet::new(),
    };
    syn::visit::Visit::visit_block(&mut uses, body);
    uses.scatter
        .into_iter()
        .filter(|f| !uses.other.contains(&f.to_string()))
        .collect()
}

/// A parallel loop over `start..end` whose `scatter` fields add into private copies.
fn scatter_loop(
    start: &TokenStream,
    end: &TokenStream,
    var: &syn::Ident,
    body: &TokenStream,
    used: &[syn::Ident],
    scatter: &[syn::Ident],
) -> TokenStream {
    let (init, body) = worker_closures(var, body, used, scatter);
    quote! {
        ::mpm_core::scatter::par_scatter(
            __args.reproducible,
            #start,
            #end,
            &[#(&#scatter as &dyn ::mpm_core::scatter::ScatterField),*],
            #init,
            #body,
        );
    }
}

/// The field parameters a loop body names, in parameter order.
fn used_fields(body: &syn::Block, params: &[Param]) -> Vec<syn::Ident> {
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

/// The state each worker of a parallel loop makes once (`init`: the `Local` views of the
/// fields the body uses) and the body that takes it, with the fields shadowed by those views,
/// or for `scatter` fields by `ScatterView`s on the worker's private copies (`__copies`).
fn worker_closures(
    var: &syn::Ident,
    body: &TokenStream,
    used: &[syn::Ident],
    scatter: &[syn::Ident],
) -> (TokenStream, TokenStream) {
    let init = quote!(|| (#(#used.local(),)*));
    let k = 0..scatter.len();
    let copies = (!scatter.is_empty()).then(|| quote!(__copies,));
    let body = quote! {
        |__worker, #copies #var| {
            let (#(#used,)*) = __worker;
            #(let #scatter = ::mpm_core::scatter::ScatterView::new(#scatter, __copies[#k]);)*
            #body
        }
    };
    (init, body)
}

fn kernel_body(f: &ItemFn, params: &[Param]) -> Result<TokenStream> {
    let scalars: HashSet<String> = params
        .iter()
        .filter(|p| matches!(p, Param::Scalar { .. }))
        .map(|p| p.name().to_string())
        .collect();
    let fields: HashSet<String> = params
        .iter()
        .filter(|p| matches!(p, Param::Field { .. }))
        .map(|p| p.name().to_string())
        .collect();

    let zero_dim: HashSet<String> = params
        .iter()
        .filter(|p| matches!(p, Param::Field { dims, .. } if dims.count() == Some(0)))
        .map(|p| p.name().to_string())
        .collect();
    let one_dim: HashSet<String> = params
        .iter()
        .filter(|p| matches!(p, Param::Field { dims, .. } if dims.count() == Some(1)))
        .map(|p| p.name().to_string())
        .collect();
    let mut cpu = Lower::new(Target::Cpu, fields.clone(), false);
    let mut tr = Lower::new(Target::Trace, fields.clone(), false);
    let mut host = Lower::new(Target::Cpu, fields.clone(), false);
    let (mut cpu_body, mut trace_body, mut ranges) =
        (TokenStream::new(), TokenStream::new(), Vec::new());
    let mut loops = 0;
    for s in &f.block.stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(init) = &l.init {
                    check_no_field(&init.expr, &fields)?;
                }
                cpu_body.extend(cpu.stmt(s)?);
                trace_body.extend(tr.stmt(s)?);
            }
            Stmt::Expr(Expr::ForLoop(fl), _) => {
                loops += 1;
                if let Some(l) = &fl.label {
                    return err(l, "loop labels are not part of the kernel language");
                }
                let var = loop_var(&fl.pat)?;
                let label = var.to_string();
                cpu.in_par_loop = true;
                tr.in_par_loop = true;
                let cb = cpu.block(&fl.body, false)?;
                let tb = tr.block(&fl.body, false)?;
                cpu.in_par_loop = false;
                tr.in_par_loop = false;
                match &*fl.expr {
                    Expr::MethodCall(mc) if mc.method == "active" && mc.args.is_empty() => {
                        let Some(field) = cpu.is_field(&mc.receiver) else {
                            return err(&mc.receiver, "`active()` is called on a field parameter");
                        };
                        if zero_dim.contains(&field.to_string()) {
                            return err(&mc.receiver, "a 0-D field has one element, `f[()]`; it has no `active()` to loop over");
                        }
                        let (init, body) = worker_closures(&var, &cb, &used_fields(&fl.body, params), &[]);
                        cpu_body.extend(quote!(::mpm_core::host::par_active(&#field, #init, #body);));
                        trace_body.extend(quote!(::mpm_core::trace::par_active(#label, #field, |#var| #tb);));
                        ranges.push(quote!(::mpm_core::abi::active_range(#field)));
                    }
                    Expr::MethodCall(mc) if mc.method == "indices" && mc.args.is_empty() => {
                        let Some(field) = cpu.is_field(&mc.receiver) else {
                            return err(&mc.receiver, "`indices()` is called on a field parameter");
                        };
                        if zero_dim.contains(&field.to_string()) {
                            return err(&mc.receiver, "a 0-D field has one element, `f[()]`; it has no `indices()` to loop over");
                        }
                        let used = used_fields(&fl.body, params);
                        let scatter = scatter_only(&fl.body, &fields);
                        if scatter.is_empty() || !one_dim.contains(&field.to_string()) {
                            let (init, body) = worker_closures(&var, &cb, &used, &[]);
                            cpu_body.extend(quote!(::mpm_core::host::par_indices(&#field, #init, #body);));
                        } else {
                            let (start, end) = (quote!(0u32), quote!(#field.shape()[0]));
                            cpu_body.extend(scatter_loop(&start, &end, &var, &cb, &used, &scatter));
                        }
                        trace_body.extend(quote!(::mpm_core::trace::par_indices(#label, #field, |#var| #tb);));
                        ranges.push(quote!(::mpm_core::abi::indices_range(&#field.shape())));
                    }
                    Expr::Range(r) if matches!(r.limits, syn::RangeLimits::HalfOpen(_)) => {
                        let (Some(a), Some(b)) = (&r.start, &r.end) else {
                            return err(r, "a parallel range needs both ends: `a..b`");
                        };
                        check_host_bound(a, &scalars)?;
                        check_host_bound(b, &scalars)?;
                        let (ca, cb_) = (cpu.expr(a)?, cpu.expr(b)?);
                        let (ta, tb_) = (tr.expr(a)?, tr.expr(b)?);
                        let (ha, hb) = (host.expr(a)?, host.expr(b)?);
                        let used = used_fields(&fl.body, params);
                        let scatter = scatter_only(&fl.body, &fields);
                        if scatter.is_empty() {
                            let (init, body) = worker_closures(&var, &cb, &used, &[]);
                            cpu_body.extend(quote!(::mpm_core::host::par_for(#ca, #cb_, #init, #body);));
                        } else {
                            cpu_body.extend(scatter_loop(&ca, &cb_, &var, &cb, &used, &scatter));
                        }
                        trace_body.extend(quote!(::mpm_core::trace::par_range(#label, #ta, #tb_, |#var| #tb);));
                        ranges.push(quote!(::mpm_core::host::loop_range(#ha, #hb)));
                    }
                    other => {
                        return err(other, "a top-level loop runs over `field.indices()`, `field.active()` or a range `a..b`");
                    }
                }
            }
            other => {
                return err(
                    other,
                    "a kernel body holds `let` statements and top-level `for` loops (each one a parallel launch)",
                )
            }
        }
    }
    if loops == 0 {
        return err(
            &f.sig.ident,
            "a kernel needs at least one top-level `for` loop",
        );
    }

    let name = &f.sig.ident;
    let name_str = name.to_string();
    let vis = &f.vis;
    let attrs = &f.attrs;
    let inputs = plain_inputs(&f.sig);
    let mut field_params = Vec::new();
    let mut field_names = Vec::new();
    let mut scalar_tys = Vec::new();
    let mut trace_decls = Vec::new();
    let mut cpu_decls = Vec::new();
    let mut push_scalars = Vec::new();
    let mut field_idents = Vec::new();
    for p in params {
        match p {
            Param::Field {
                name,
                elem,
                dims,
                writable,
                index,
            } => {
                let n = name.to_string();
                let (k, d) = (*index as u32, dims);
                field_params.push(quote!(::mpm_core::ir::FieldParam {
                    name: #n.to_string(),
                    elem: <#elem as ::mpm_core::Value>::ty(),
                    dims: #d as u32,
                    writable: #writable,
                }));
                field_names.push(n);
                trace_decls.push(quote!(let #name = ::mpm_core::trace::field::<#elem, #d>(#k);));
                let ki = *index;
                cpu_decls.push(quote!(let #name = __args.view::<#elem, #d>(#ki);));
                field_idents.push(name.clone());
            }
            Param::Scalar {
                name,
                ty,
                index,
                mutable,
            } => {
                let k = *index as u32;
                if *mutable {
                    // A parameter the body assigns becomes a local variable.
                    let label = name.to_string();
                    trace_decls.push(quote!(
                        let #name = ::mpm_core::trace::let_(#label, ::mpm_core::trace::scalar::<#ty>(#k));
                    ));
                } else {
                    trace_decls.push(quote!(let #name = ::mpm_core::trace::scalar::<#ty>(#k);));
                }
                let mutability = mutable.then(|| quote!(mut));
                cpu_decls.push(quote!(let #mutability #name: #ty = __scalars.read::<#ty>();));
                scalar_tys.push(ty.clone());
                push_scalars.push(quote!(::mpm_core::abi::push_scalar(&mut __scalars, &#name);));
            }
        }
    }
    Ok(quote! {
        #(#attrs)*
        // A kernel takes every field and constant it uses, as Taichi kernels do.
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#inputs) -> ::core::result::Result<(), ::mpm_core::Error> {
            #[allow(unused_imports)]
            use ::mpm_core::builtins::*;
            #[allow(unused_variables, unused_braces, unused_parens, clippy::all)]
            fn __trace() -> ::mpm_core::Result<::mpm_core::ir::Kernel> {
                ::mpm_core::trace::kernel(
                    #name_str,
                    ::std::vec![#(#field_params),*],
                    ::std::vec![#(<#scalar_tys as ::mpm_core::Value>::ty()),*],
                    || {
                        #(#trace_decls)*
                        #trace_body
                    },
                )
            }
            #[allow(unused_variables, unused_mut, unused_braces, unused_parens, clippy::all)]
            fn __cpu(__args: &::mpm_core::host::HostArgs<'_>) {
                let mut __scalars = __args.scalars();
                #(#cpu_decls)*
                #cpu_body
            }
            static __DESC: ::mpm_core::KernelDesc = ::mpm_core::KernelDesc {
                name: #name_str,
                module: ::core::module_path!(),
                field_names: &[#(#field_names),*],
                trace: __trace,
                cpu: __cpu,
            };
            #[allow(unused_mut)]
            let mut __scalars: ::std::vec::Vec<u32> = ::std::vec::Vec::new();
            #(#push_scalars)*
            #[allow(unused_parens, clippy::all)]
            let __ranges = [#(#ranges),*];
            ::mpm_core::kernel::launch(
                &__DESC,
                &[#(#field_idents.backend()),*],
                ::std::vec![#(#field_idents.arg()),*],
                &__scalars,
                &__ranges,
            )
        }
    })
}

/// `#[func]`.
pub fn func(f: ItemFn) -> TokenStream {
    func_body(&f).unwrap_or_else(|e| e.to_compile_error())
}

fn func_body(f: &ItemFn) -> Result<TokenStream> {
    check_fn(f, "func")?;
    let ret = match &f.sig.output {
        syn::ReturnType::Type(_, t) => (**t).clone(),
        syn::ReturnType::Default => {
            return err(
                &f.sig,
                "a func returns a value (`-> T`); funcs cannot write fields",
            );
        }
    };
    let mut names = Vec::new();
    let mut tys = Vec::new();
    for arg in &f.sig.inputs {
        let (name, _, ty) = arg_name(arg)?;
        if let syn::Type::Reference(r) = ty {
            return err(
                r,
                "funcs take values, not references or fields: pass `x[i]`",
            );
        }
        names.push(name);
        tys.push(ty.clone());
    }
    let mut cpu = Lower::new(Target::Cpu, HashSet::new(), true);
    let mut tr = Lower::new(Target::Trace, HashSet::new(), true);
    let cpu_body = cpu.stmts(&f.block.stmts, true)?;
    let has_tail = matches!(f.block.stmts.last(), Some(Stmt::Expr(_, None)));
    let trace_body = tr.stmts(&f.block.stmts, true)?;
    let trace_body = if has_tail {
        quote!(let __ret = { #trace_body }; ::mpm_core::trace::return_value::<#ret, _>(__ret);)
    } else {
        trace_body
    };

    let vis = &f.vis;
    let attrs = &f.attrs;
    let name = &f.sig.ident;
    let name_str = name.to_string();
    let inputs = &f.sig.inputs;
    let ks = 0..names.len();
    Ok(quote! {
        #(#attrs)*
        #[inline]
        #[allow(unused_parens, unused_braces, clippy::all)]
        #vis fn #name(#inputs) -> #ret {
            #[allow(unused_imports)]
            use ::mpm_core::builtins::*;
            #cpu_body
        }

        #[doc(hidden)]
        #[allow(non_snake_case)]
        #vis mod #name {
            #[allow(unused_imports)]
            use super::*;
            /// Traces a call of the func (the GPU lowering).
            #[allow(unused_variables, unused_mut, unused_braces, unused_parens, clippy::all)]
            pub fn expand(
                #(#names: impl ::mpm_core::trace::IntoExpr<#tys>),*
            ) -> ::mpm_core::trace::Expr<#ret> {
                #[allow(unused_imports)]
                use ::mpm_core::builtins::*;
                ::mpm_core::trace::call::<#ret>(
                    ::core::concat!(::core::module_path!(), "::", #name_str),
                    #name_str,
                    &[#(::mpm_core::trace::arg(::mpm_core::trace::into_expr::<#tys, _>(#names))),*],
                    |__params| {
                        #(let #names: ::mpm_core::trace::Expr<#tys> = ::mpm_core::trace::param(__params, #ks);)*
                        #trace_body
                    },
                )
            }
        }
    })
}
