//! The CPU lowering of a checked body: Rust again, with field accesses through
//! `mpm_core::host` views and operators through `mpm_core::lang` (wrapping integer semantics,
//! the same as on the GPU).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::checked::{
    every_node, is_constant, runs_statements, Binding, Body, Else, ElseValue, End, Expr, If, Place,
    Stmt, Store,
};

/// The statements of a body and its value, without braces.
pub fn stmts(b: &Body) -> TokenStream {
    let mut out = TokenStream::new();
    let mut rest = &b.stmts[..];
    while let Some(first) = rest.first() {
        let run = store_run(rest);
        out.extend(match run {
            1 => stmt(first),
            _ => placed_stores(&rest[..run]),
        });
        rest = &rest[run..];
    }
    let value = b.value.as_deref().map(expr);
    quote!(#out #value)
}

/// How many statements from the first of `stmts` store into fields at one index (1 where
/// the first is not a store or no run of two starts there): the index reads no field and
/// runs no statements, so it has one value throughout the run, and no store's value but
/// the last runs statements (which could change a local the index reads).
fn store_run(stmts: &[Stmt]) -> usize {
    let Some(Stmt::Store { index, value, .. }) = stmts.first() else {
        return 1;
    };
    if !index_without_effects(index) {
        return 1;
    }
    let key = expr(index).to_string();
    let mut run = 1;
    let mut last_value = value;
    for s in &stmts[1..] {
        match s {
            Stmt::Store { index, value, .. }
                if !runs_statements(last_value) && expr(index).to_string() == key =>
            {
                run += 1;
                last_value = value;
            }
            _ => break,
        }
    }
    run
}

/// A run of stores at one index (see [`store_run`]): the index computed once, and the
/// element found by the first store and taken by those into fields numbered alike
/// (`mpm_core::host::Access::place`), not found again. The statements' order is kept: the
/// first value, the first store (which finds the element), then each later value and store.
fn placed_stores(run: &[Stmt]) -> TokenStream {
    let Some(Stmt::Store {
        field,
        index,
        value,
        ..
    }) = run.first()
    else {
        return run.iter().map(stmt).collect();
    };
    let (index, value) = (expr(index), expr(value));
    let stores = run.iter().enumerate().map(|(k, s)| match s {
        Stmt::Store {
            field,
            op,
            value,
            span,
            ..
        } => {
            let value = match k {
                0 => quote!(__value),
                _ => expr(value),
            };
            let f = match op {
                Store::Set => quote!(store),
                Store::Add => quote!(atomic_add),
                Store::Sub => quote!(atomic_sub),
            };
            quote_spanned!(*span=> #field.#f(__placed, #value);)
        }
        other => stmt(other),
    });
    quote!({
        let __index = #index;
        let __value = #value;
        let __placed = #field.place(__index);
        #(#stores)*
    })
}

/// Whether an index expression is free of effects and of field reads (a field the run
/// stores into could change what it reads).
fn index_without_effects(e: &Expr) -> bool {
    every_node(e, &|n| match n {
        Expr::Binary { lazy, .. } => !lazy,
        Expr::Load { .. }
        | Expr::SharedLoad { .. }
        | Expr::Activity { .. }
        | Expr::FetchAdd { .. }
        | Expr::IfValue { .. }
        | Expr::Block(_) => false,
        _ => true,
    })
}

fn block(b: &Body) -> TokenStream {
    let inner = stmts(b);
    quote!({ #inner })
}

pub fn stmt(s: &Stmt) -> TokenStream {
    match s {
        Stmt::Let {
            binding:
                Binding::Name {
                    name,
                    mutability,
                    ty: Some(t),
                },
            value: None,
        } => quote!(let #mutability #name: #t;),
        Stmt::Let { binding, value } => {
            let value = value.as_ref().map(expr).unwrap_or_default();
            match binding {
                Binding::Name {
                    name,
                    mutability,
                    ty,
                } => match ty {
                    None => quote!(let #mutability #name = #value;),
                    Some(t) => quote!(let #mutability #name: #t = #value;),
                },
                Binding::Wild => quote!(let _ = #value;),
                Binding::Tuple(names) => {
                    let names = names.iter().map(|(m, n)| quote!(#m #n));
                    quote!(let (#(#names),*) = #value;)
                }
            }
        }
        Stmt::Assign {
            place,
            op,
            read,
            value,
            span,
        } => {
            if runs_statements(value) {
                if let Some(held) = assign_in_order(place, *op, value, *span) {
                    return held;
                }
            }
            let place = place_of(place, None);
            let value = expr(value);
            match (op, read) {
                (Some(op), Some(read)) => {
                    let f = format_ident!("{}", op, span = *span);
                    let read = expr(read);
                    quote_spanned!(*span=> #place = ::mpm_core::lang::#f(#read, #value);)
                }
                _ => quote_spanned!(*span=> #place = #value;),
            }
        }
        Stmt::Store {
            field,
            index,
            op,
            value,
            span,
        } => {
            let (index, value) = (expr(index), expr(value));
            match op {
                Store::Set => quote_spanned!(*span=> #field.store(#index, #value);),
                Store::Add => quote_spanned!(*span=> #field.atomic_add(#index, #value);),
                Store::Sub => quote_spanned!(*span=> #field.atomic_sub(#index, #value);),
            }
        }
        // A block's shared array is the worker's own array: one worker runs the whole block.
        Stmt::Shared { name, fill, len } => {
            let fill = expr(fill);
            quote!(let mut #name = ::mpm_core::lang::shared_array([#fill; #len]);)
        }
        // The index and value first: they may read the array that the place borrows.
        Stmt::SharedStore {
            name,
            index,
            op,
            value,
            span,
        } => {
            let (index, value) = (expr(index), expr(value));
            let write = match op {
                Store::Set => quote!(*__place = __value;),
                Store::Add => quote!(*__place = ::mpm_core::lang::add(*__place, __value);),
                Store::Sub => quote!(*__place = ::mpm_core::lang::sub(*__place, __value);),
            };
            quote_spanned!(*span=> {
                let (__index, __value) = (#index, #value);
                let __place = ::mpm_core::lang::index_mut(&mut #name, __index);
                #write
            })
        }
        // One worker runs a block's lanes one after another, so the barrier is implied.
        Stmt::Lanes {
            var,
            start,
            end,
            body,
        } => for_loop(var, start, end, block(body)),
        Stmt::If(i) => if_stmt(i),
        Stmt::While { cond, body } => {
            let (cond, body) = (expr(cond), block(body));
            quote!(while #cond #body)
        }
        Stmt::Loop { body } => {
            let body = block(body);
            quote!(loop #body)
        }
        Stmt::For {
            var,
            start,
            end,
            body,
        } => {
            let body = block(body);
            unrolled(var, start, end, &body).unwrap_or_else(|| for_loop(var, start, end, body))
        }
        Stmt::Break => quote!(break;),
        // Directly in a parallel loop, `continue` ends this invocation: the batch's loop
        // (see `items::cpu_loop`) goes on to the next.
        Stmt::Continue { .. } => quote!(continue;),
        Stmt::Return(v) => {
            let v = expr(v);
            quote!(return #v;)
        }
        Stmt::Block(b) => block(b),
        Stmt::Discard(v) => {
            let v = expr(v);
            quote!(let _ = #v;)
        }
    }
}

/// Loops of at most this many iterations between integer literals become copies of their
/// body.
const UNROLL: i64 = 3;

/// A short loop between integer literals (a stencil's `for i in 0..3`) as one copy of its
/// body per iteration, each with the index bound to its literal: LLVM left the outer loops
/// of a stencil nest rolled, so weights and offsets were picked at run time from memory.
/// Loops with `break` or `continue` anywhere in their body stay loops.
fn unrolled(var: &syn::Ident, start: &Expr, end: &End, body: &TokenStream) -> Option<TokenStream> {
    let (Expr::Lit(a), End::Exclusive(Expr::Lit(b))) = (start, end) else {
        return None;
    };
    let (a, b) = (
        syn::parse2::<syn::LitInt>(a.clone()).ok()?,
        syn::parse2::<syn::LitInt>(b.clone()).ok()?,
    );
    let (first, last) = (a.base10_parse::<i64>().ok()?, b.base10_parse::<i64>().ok()?);
    if last - first > UNROLL || jumps(body) {
        return None;
    }
    let copies = (first..last).map(|k| {
        let k = syn::LitInt::new(&format!("{k}{}", a.suffix()), a.span());
        quote!({ let #var = #k; #body })
    });
    Some(quote!(#(#copies)*))
}

/// Whether tokens hold a `break` or `continue`.
fn jumps(tokens: &TokenStream) -> bool {
    has_ident(tokens, &|i| i == "break" || i == "continue")
}

/// Whether tokens, groups searched too, hold an identifier that `wanted` accepts.
pub(crate) fn has_ident(
    tokens: &TokenStream,
    wanted: &dyn Fn(&proc_macro2::Ident) -> bool,
) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => wanted(&i),
        proc_macro2::TokenTree::Group(g) => has_ident(&g.stream(), wanted),
        _ => false,
    })
}

/// `for var in start..end body`, the body already lowered.
fn for_loop(var: &syn::Ident, start: &Expr, end: &End, body: TokenStream) -> TokenStream {
    let a = expr(start);
    match end {
        End::Exclusive(b) => {
            let b = expr(b);
            quote!(for #var in (#a)..(#b) #body)
        }
        End::InclusiveLiteral(b, _) | End::Inclusive(b) => {
            let b = expr(b);
            quote!(for #var in (#a)..=(#b) #body)
        }
    }
}

fn if_stmt(i: &If) -> TokenStream {
    let (cond, then) = (expr(&i.cond), block(&i.then));
    match &i.otherwise {
        None => quote!(if #cond #then),
        Some(Else::If(nested)) => {
            let o = if_stmt(nested);
            quote!(if #cond #then else { #o })
        }
        Some(Else::Block(b)) => {
            let o = block(b);
            quote!(if #cond #then else { #o })
        }
    }
}

/// A place; with `lets`, each index that reads state is bound to a local there first (see
/// [`assign_in_order`]).
fn place_of(p: &Place, mut lets: Option<&mut Vec<TokenStream>>) -> TokenStream {
    match p {
        Place::Local(path) => quote!(#path),
        Place::Member(base, member, _) => {
            let base = place_of(base, lets);
            quote!((#base).#member)
        }
        Place::Index(base, i) => {
            let base = place_of(base, lets.as_deref_mut());
            let i = match lets {
                Some(lets) if !is_constant(i) => {
                    let (name, i) = (format_ident!("__index{}", lets.len()), expr(i));
                    lets.push(quote!(let #name = #i;));
                    quote!(#name)
                }
                _ => expr(i),
            };
            quote!((*::mpm_core::lang::index_mut(&mut #base, #i)))
        }
    }
}

/// `a[i] = value` or `a[i] op= value` whose value runs statements, evaluated left to right
/// as Vulkan does: the indices, then the element (for `op=`), then the value, then the
/// write. Rust's own order (the value before the place) would let the value's statements
/// move the place, or for `op=` read one element and write another. `None` when no index
/// reads state, where the usual form is the same.
fn assign_in_order(
    place: &Place,
    op: Option<&'static str>,
    value: &Expr,
    span: proc_macro2::Span,
) -> Option<TokenStream> {
    let mut lets = Vec::new();
    let place = place_of(place, Some(&mut lets));
    if lets.is_empty() {
        return None;
    }
    let value = expr(value);
    Some(match op {
        None => quote_spanned!(span=> { #(#lets)* let __value = #value; #place = __value; }),
        Some(op) => {
            let f = format_ident!("{}", op, span = span);
            quote_spanned!(span=> {
                #(#lets)*
                let __read = #place;
                let __value = #value;
                #place = ::mpm_core::lang::#f(__read, __value);
            })
        }
    })
}

/// One expression.
pub fn expr(e: &Expr) -> TokenStream {
    let all = |xs: &[Expr]| xs.iter().map(expr).collect::<Vec<_>>();
    match e {
        Expr::Lit(l) => l.clone(),
        Expr::NegLit(l) => quote!((-#l)),
        Expr::Local(id) => quote!(#id),
        Expr::Const(path) => quote!(#path),
        Expr::Paren(x) => {
            let x = expr(x);
            quote!((#x))
        }
        Expr::Neg(x) => {
            let x = expr(x);
            quote!(::mpm_core::lang::neg(#x))
        }
        Expr::Not(x) => {
            let x = expr(x);
            quote!((!#x))
        }
        Expr::Binary {
            op,
            native,
            left,
            right,
            span,
            ..
        } => {
            let (l, r) = (expr(left), expr(right));
            match native {
                Some(native) => quote_spanned!(*span=> (#l #native #r)),
                None => {
                    let f = format_ident!("{}", op, span = *span);
                    quote_spanned!(*span=> ::mpm_core::lang::#f(#l, #r))
                }
            }
        }
        Expr::Load { field, index, span } => {
            let i = expr(index);
            quote_spanned!(*span=> #field.load(#i))
        }
        Expr::Index(base, i) => {
            let (base, i) = (expr(base), expr(i));
            quote!(::mpm_core::lang::index(#base, #i))
        }
        Expr::SharedLoad { name, index } => {
            let i = expr(index);
            quote!(::mpm_core::lang::index_ref(&#name, #i))
        }
        Expr::Member(base, member, _) => {
            let base = expr(base);
            quote!((#base).#member)
        }
        Expr::Call { path, args } => {
            let args = all(args);
            quote_spanned!(path.span()=> #path(#(#args),*))
        }
        Expr::Method { method, args } => {
            let args = all(args);
            quote_spanned!(method.span()=> ::mpm_core::builtins::methods::#method::cpu(#(#args),*))
        }
        // glam's own associated function (keeps the user's imports meaningful).
        Expr::Associated { path, args, .. } => {
            let args = all(args);
            quote!(#path(#(#args),*))
        }
        Expr::Activity {
            op,
            field,
            index,
            span,
        } => {
            let i = expr(index);
            quote_spanned!(*span=> #field.#op(#i))
        }
        Expr::FetchAdd {
            field,
            index,
            value,
            span,
        } => {
            let (i, v) = (expr(index), expr(value));
            quote_spanned!(*span=> #field.fetch_add(#i, #v))
        }
        Expr::Cast { ty, value, span } => {
            let x = expr(value);
            quote_spanned!(*span=> (#x as #ty))
        }
        Expr::IfValue {
            cond,
            then,
            otherwise,
        } => {
            let (cond, then) = (expr(cond), block(then));
            let otherwise = match &**otherwise {
                ElseValue::If(nested) => expr(nested),
                ElseValue::Block(b) => block(b),
            };
            quote!(if #cond #then else { #otherwise })
        }
        Expr::Block(b) => block(b),
        Expr::Array(items) => {
            let items = all(items);
            quote!([#(#items),*])
        }
        Expr::Repeat(x, n) => {
            let x = expr(x);
            quote!([#x; #n])
        }
        Expr::Tuple(items) if items.is_empty() => quote!(()),
        Expr::Tuple(items) => {
            let items = all(items);
            quote!((#(#items),*))
        }
    }
}
