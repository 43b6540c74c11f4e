//! The GPU lowering of a checked body: a trace function over `mpm_core::trace` handles that
//! records the kernel IR when run, so that rustc types every value (CubeCL's approach).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::checked::{
    is_constant, runs_statements, Binding, Body, Else, ElseValue, End, Expr, If, Place, Stmt, Store,
};

/// The trace printer; `in_func` for a func's body, whose traced form lives one module down.
pub struct Trace {
    pub in_func: bool,
}

impl Trace {
    /// The statements of a body and its value, without braces.
    pub fn stmts(&self, b: &Body) -> TokenStream {
        let stmts = b.stmts.iter().map(|s| self.stmt(s));
        let value = b.value.as_deref().map(|v| self.expr(v));
        quote!(#(#stmts)* #value)
    }

    fn block(&self, b: &Body) -> TokenStream {
        let inner = self.stmts(b);
        quote!({ #inner })
    }

    pub fn stmt(&self, s: &Stmt) -> TokenStream {
        match s {
            Stmt::Let {
                binding: Binding::Name {
                    name, ty: Some(t), ..
                },
                value: None,
            } => {
                let label = name.to_string();
                quote!(let #name: ::mpm_core::trace::Expr<#t> = ::mpm_core::trace::declare::<#t>(#label);)
            }
            Stmt::Let { binding, value } => {
                let value = value.as_ref().map(|v| self.expr(v)).unwrap_or_default();
                match binding {
                    Binding::Name { name, ty, .. } => {
                        let label = name.to_string();
                        match ty {
                            None => quote!(let #name = ::mpm_core::trace::let_(#label, #value);),
                            Some(t) => quote!(
                                let #name: ::mpm_core::trace::Expr<#t> = ::mpm_core::trace::let_::<#t, _>(#label, #value);
                            ),
                        }
                    }
                    Binding::Wild => quote!(let _ = #value;),
                    Binding::Tuple(names) => {
                        let names: Vec<_> = names.iter().map(|(_, n)| n).collect();
                        let untuple = format_ident!("untuple{}", names.len());
                        let labels = names.iter().map(|n| n.to_string());
                        quote!(
                            let __tuple = ::mpm_core::trace::let_("tuple", #value);
                            let (#(#names),*) = ::mpm_core::trace::#untuple(__tuple);
                            #(let #names = ::mpm_core::trace::let_(#labels, #names);)*
                        )
                    }
                }
            }
            Stmt::Assign {
                place,
                op,
                value,
                span,
                ..
            } => {
                // Left to right, as on the CPU: the place's indices and (for `op=`) its
                // value before statements in the value could change them.
                let place = self.place(place, value);
                let holds = runs_statements(value);
                let value = self.expr(value);
                match op {
                    None => quote_spanned!(*span=> ::mpm_core::trace::assign(#place, #value);),
                    Some(op) => {
                        let f = format_ident!("{}", op, span = *span);
                        let read = match holds {
                            true => quote!(::mpm_core::trace::let_("read", __place.get())),
                            false => quote!(__place.get()),
                        };
                        quote!({
                            let __place = #place;
                            let __value = ::mpm_core::trace::#f(#read, #value);
                            ::mpm_core::trace::assign(__place, __value);
                        })
                    }
                }
            }
            Stmt::Store {
                field,
                index,
                op,
                value,
                span,
            } => {
                let holds = runs_statements(value);
                let (index, value) = (self.expr(index), self.expr(value));
                let f = match op {
                    Store::Set => quote_spanned!(*span=> store),
                    Store::Add => quote_spanned!(*span=> atomic_add),
                    Store::Sub => quote_spanned!(*span=> atomic_sub),
                };
                // The index before the value's statements (see `trace::hold_index`).
                match holds {
                    true => quote_spanned!(*span=> {
                        let __index = ::mpm_core::trace::hold_index(#field, #index);
                        ::mpm_core::trace::#f(#field, __index, #value);
                    }),
                    false => quote_spanned!(*span=> ::mpm_core::trace::#f(#field, #index, #value);),
                }
            }
            Stmt::Shared { name, fill, len } => {
                let (label, fill) = (name.to_string(), self.expr(fill));
                quote!(let #name = ::mpm_core::trace::shared(#label, #fill, #len);)
            }
            Stmt::SharedStore {
                name,
                index,
                op,
                value,
                span,
            } => {
                let [index, value] = self.in_order([index, value]);
                let f = match op {
                    Store::Set => quote!(shared_store),
                    Store::Add => quote!(shared_add),
                    Store::Sub => quote!(shared_sub),
                };
                quote_spanned!(*span=> ::mpm_core::trace::#f(&#name, #index, #value);)
            }
            Stmt::Lanes {
                var,
                start,
                end,
                body,
            } => self.counted(quote!(lanes), var, start, end, body),
            Stmt::If(i) => self.if_stmt(i),
            Stmt::While { cond, body } => {
                let (cond, body) = (self.expr(cond), self.block(body));
                quote!(::mpm_core::trace::while_(|| #cond, || #body);)
            }
            Stmt::Loop { body } => {
                let body = self.block(body);
                quote!(::mpm_core::trace::while_(|| true, || #body);)
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.counted(quote!(for_range), var, start, end, body),
            Stmt::Break => quote!(::mpm_core::trace::break_();),
            // Directly in a parallel loop, `continue` ends this invocation.
            Stmt::Continue {
                ends_invocation: true,
            } => quote!(::mpm_core::trace::return_();),
            Stmt::Continue {
                ends_invocation: false,
            } => quote!(::mpm_core::trace::continue_();),
            Stmt::Return(v) => {
                let v = self.expr(v);
                quote!(::mpm_core::trace::return_value(#v);)
            }
            Stmt::Block(b) => self.block(b),
            Stmt::Discard(v) => {
                let v = self.expr(v);
                quote!(let _ = #v;)
            }
        }
    }

    /// A sequential or `lanes` loop, traced by `trace::f`.
    fn counted(
        &self,
        f: TokenStream,
        var: &syn::Ident,
        start: &Expr,
        end: &End,
        body: &Body,
    ) -> TokenStream {
        let label = var.to_string();
        let a = match end {
            End::Exclusive(b) | End::Inclusive(b) => self.before(start, &[b]),
            End::InclusiveLiteral(..) => self.expr(start),
        };
        let (end, body) = (self.end(end), self.block(body));
        quote!(::mpm_core::trace::#f(#label, #a, #end, |#var| #body);)
    }

    /// The exclusive end of a sequential or `lanes` range.
    fn end(&self, end: &End) -> TokenStream {
        match end {
            End::Exclusive(b) => self.expr(b),
            End::InclusiveLiteral(_, n) => {
                let n = proc_macro2::Literal::i64_unsuffixed(n + 1);
                quote!(#n)
            }
            End::Inclusive(b) => {
                let b = self.expr(b);
                quote!(::mpm_core::trace::add(#b, 1))
            }
        }
    }

    fn if_stmt(&self, i: &If) -> TokenStream {
        let (cond, then) = (self.expr(&i.cond), self.block(&i.then));
        let o = match &i.otherwise {
            None => TokenStream::new(),
            Some(Else::If(nested)) => self.if_stmt(nested),
            Some(Else::Block(b)) => self.block(b),
        };
        quote!(::mpm_core::trace::if_(#cond, || #then, || { #o });)
    }

    /// The place an assignment of `value` writes, its indices evaluated before the value
    /// (see [`Trace::ordered`]).
    fn place(&self, p: &Place, value: &Expr) -> TokenStream {
        match p {
            Place::Local(path) => quote!(::mpm_core::trace::place(#path)),
            Place::Member(base, _, k) => {
                let base = self.place(base, value);
                quote!(::mpm_core::trace::place_member(#base, #k))
            }
            Place::Index(base, i) => {
                let base = self.place(base, value);
                let i = self.before(i, &[value]);
                quote!(::mpm_core::trace::place_index(#base, #i))
            }
        }
    }

    /// Operands in the order Rust evaluates them, left to right. A traced read is lazy (it
    /// reads a local or memory where the statement that uses it stands), so an operand that
    /// reads state is held in a local when a later one runs statements that could change
    /// what it reads: `a + { a += 1; a }` adds the old `a`, as the CPU does.
    fn ordered(&self, xs: &[&Expr]) -> Vec<TokenStream> {
        (0..xs.len())
            .map(|k| self.before(xs[k], &xs[k + 1..]))
            .collect()
    }

    /// An operand evaluated before `later` ones: held when it reads state that their
    /// statements could change.
    fn before(&self, e: &Expr, later: &[&Expr]) -> TokenStream {
        match !is_constant(e) && later.iter().any(|x| runs_statements(x)) {
            true => self.held(e),
            false => self.expr(e),
        }
    }

    /// [`Trace::ordered`] for a fixed number of operands.
    fn in_order<const N: usize>(&self, xs: [&Expr; N]) -> [TokenStream; N] {
        let mut ordered = self.ordered(&xs).into_iter();
        std::array::from_fn(|_| ordered.next().unwrap_or_default())
    }

    /// An expression's value held in a local, read where it stands.
    fn held(&self, e: &Expr) -> TokenStream {
        let e = self.expr(e);
        quote!(::mpm_core::trace::let_("held", #e))
    }

    /// One expression.
    pub fn expr(&self, e: &Expr) -> TokenStream {
        let all = |xs: &[Expr]| self.ordered(&xs.iter().collect::<Vec<_>>());
        match e {
            Expr::Lit(l) => l.clone(),
            Expr::NegLit(l) => quote!((-#l)),
            Expr::Local(id) => quote!(#id),
            Expr::Const(path) => {
                let path = self.traced_path(path);
                quote!(::mpm_core::trace::constant(#path))
            }
            Expr::Paren(x) => {
                let x = self.expr(x);
                quote!((#x))
            }
            Expr::Neg(x) => {
                let x = self.expr(x);
                quote!(::mpm_core::trace::neg(#x))
            }
            Expr::Not(x) => {
                let x = self.expr(x);
                quote!(::mpm_core::trace::not(#x))
            }
            Expr::Binary {
                op,
                left,
                right,
                lazy,
                span,
                ..
            } => {
                // `&&` and `||` test their left operand before the right one's branch.
                let [l, r] = match lazy {
                    true => [self.expr(left), self.expr(right)],
                    false => self.in_order([left, right]),
                };
                match (*lazy, *op) {
                    (true, "and") => quote!(::mpm_core::trace::if_value(#l, || #r, || false)),
                    (true, "or") => quote!(::mpm_core::trace::if_value(#l, || true, || #r)),
                    _ => {
                        let f = format_ident!("{}", op, span = *span);
                        quote_spanned!(*span=> ::mpm_core::trace::#f(#l, #r))
                    }
                }
            }
            Expr::Load { field, index, span } => {
                let i = self.expr(index);
                quote_spanned!(*span=> ::mpm_core::trace::load(#field, #i))
            }
            Expr::Index(base, i) => {
                let [base, i] = self.in_order([base, i]);
                quote!(::mpm_core::trace::index(#base, #i))
            }
            Expr::SharedLoad { name, index } => {
                let i = self.expr(index);
                quote!(::mpm_core::trace::shared_load(&#name, #i))
            }
            Expr::Member(base, _, k) => {
                let base = self.expr(base);
                quote!(::mpm_core::trace::member(#base, #k))
            }
            Expr::Call { path, args } => {
                let args = all(args);
                let path = self.traced_path(path);
                quote_spanned!(path.span()=> #path::expand(#(#args),*))
            }
            Expr::Method { method, args } => {
                let args = all(args);
                quote_spanned!(method.span()=> ::mpm_core::builtins::methods::#method::expand(#(#args),*))
            }
            Expr::Associated {
                path,
                ctor,
                f,
                args,
            } => {
                let args = all(args);
                if let Some(ctor) = ctor {
                    return quote!(::mpm_core::trace::#ctor(#(#args),*));
                }
                let mut ty_path = self.traced_path(path);
                ty_path.segments.pop();
                ty_path.segments.pop_punct();
                quote!(::mpm_core::trace::#f::<#ty_path>(#(#args),*))
            }
            Expr::Activity {
                op,
                field,
                index,
                span,
            } => {
                let i = self.expr(index);
                quote_spanned!(*span=> ::mpm_core::trace::#op(#field, #i))
            }
            Expr::FetchAdd {
                field,
                index,
                value,
                span,
            } => {
                let [i, v] = self.in_order([index, value]);
                quote_spanned!(*span=> ::mpm_core::trace::fetch_add(#field, #i, #v))
            }
            Expr::Cast { ty, value, span } => {
                let x = self.expr(value);
                quote_spanned!(*span=> ::mpm_core::trace::cast::<#ty, _, _>(#x))
            }
            Expr::IfValue {
                cond,
                then,
                otherwise,
            } => {
                let (cond, then) = (self.expr(cond), self.block(then));
                let otherwise = match &**otherwise {
                    ElseValue::If(nested) => self.expr(nested),
                    ElseValue::Block(b) => self.block(b),
                };
                quote!(::mpm_core::trace::if_value(#cond, || #then, || #otherwise))
            }
            Expr::Block(b) => self.block(b),
            Expr::Array(items) => {
                let items = all(items);
                quote!(::mpm_core::trace::array([#(::mpm_core::trace::into_expr(#items)),*]))
            }
            Expr::Repeat(x, n) => {
                let x = self.expr(x);
                quote!(::mpm_core::trace::array_splat::<_, { #n }>(#x))
            }
            Expr::Tuple(items) => {
                let items = all(items);
                match items.len() {
                    2 => quote!(::mpm_core::trace::tuple2(#(#items),*)),
                    3 => quote!(::mpm_core::trace::tuple3(#(#items),*)),
                    _ => quote!(()),
                }
            }
        }
    }

    /// The traced body of a func lives in a module named after the func, one level below the
    /// func's own: a path starting with `super` needs one more.
    fn traced_path(&self, path: &syn::Path) -> syn::Path {
        let mut path = path.clone();
        if self.in_func && path.segments.first().is_some_and(|s| s.ident == "super") {
            path.segments.insert(0, syn::parse_quote!(super));
        }
        path
    }
}
