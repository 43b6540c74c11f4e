//! The items `#[kernel]` and `#[func]` expand to: the checked body printed by both emitters,
//! wrapped in the launcher (kernels) or the function and its trace module (funcs).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{Error, Ident, ItemFn, Pat, Result};

use crate::check;
use crate::checked::{Domain, ParLoop, Stmt, Top};
use crate::emit_cpu;
use crate::emit_trace::Trace;
use crate::signature::{arg_name, kernel_params, Param};

fn check_fn(f: &ItemFn, what: &str) -> Result<()> {
    let sig = &f.sig;
    let bad = |node: &dyn quote::ToTokens, msg: String| Err(Error::new_spanned(node, msg));
    if let Some(a) = &sig.asyncness {
        return bad(a, format!("{what}s cannot be async"));
    }
    if let Some(u) = &sig.unsafety {
        return bad(u, format!("{what}s cannot be unsafe"));
    }
    if let Some(c) = &sig.constness {
        return bad(c, format!("{what}s cannot be const"));
    }
    if let Some(v) = &sig.variadic {
        return bad(v, format!("{what}s cannot be variadic"));
    }
    if !sig.generics.params.is_empty() {
        return bad(&sig.generics, format!("{what}s cannot be generic"));
    }
    Ok(())
}

/// `#[kernel]`.
pub fn kernel(f: ItemFn) -> TokenStream {
    let params = match check_fn(&f, "kernel").and_then(|()| kernel_params(&f.sig)) {
        Ok(p) => p,
        Err(e) => return e.to_compile_error(),
    };
    match check::kernel_body(&f, &params) {
        Ok(tops) => kernel_item(&f, &params, &tops),
        Err(e) => {
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
        }
    }
}

/// The parameters with `mut` and `#[specialize]` removed (the wrapper only forwards them).
fn plain_inputs(sig: &syn::Signature) -> TokenStream {
    let args = sig.inputs.iter().map(|a| match a {
        syn::FnArg::Typed(pt) => {
            let mut pt = pt.clone();
            if let Pat::Ident(pi) = &mut *pt.pat {
                pi.mutability = None;
            }
            pt.attrs.retain(|a| !crate::signature::is_specialize(a));
            quote!(#pt)
        }
        other => quote!(#other),
    });
    quote!(#(#args),*)
}

/// One parallel loop on the CPU: each worker makes its `Local` views of the fields the body
/// uses once, and each batch of invocations copies them into `Access` values that shadow the
/// fields (in registers: see `mpm_core::host::Access`), wrapped for `scatter` fields in
/// `ScatterView`s on the worker's private copies (`__copies`). The accesses take the
/// narrowest path the fields allow (`mpm_core::host::ANY`), a copy of the body per path.
///
/// `outer` names the kernel-level values in scope (scalar parameters, top-level `let`s):
/// each batch copies them into locals first. The closure captures them by reference,
/// and the compiler treats every field access (an atomic) as a possible write to any
/// memory, so without the copies it loads `dt` or a flag again after each access.
///
/// `flags` names the kernel's `#[specialize]` bools: the batch's loop is compiled once per
/// value of those its body tests inside a loop of its own (see [`specialized`]).
fn cpu_loop(l: &ParLoop, outer: &[Ident], flags: &[Ident]) -> TokenStream {
    let (var, used, scatter, snapshot) = (&l.var, &l.used, &l.scatter, &l.snapshot);
    let outer = outer.iter().filter(|name| *name != var);
    let copies_of_outer = quote!(#(let #outer = #outer;)*);
    let body = emit_cpu::stmts(&l.body);
    let tested = tested_in_loops(&l.body.stmts, flags);
    // Fields each invocation stores into only at its own index take plain stores (see
    // `check::own_index_fields`).
    let owned = &l.owned;
    let body = specialized(
        &tested,
        quote! {
            #(let #owned = ::mpm_core::host::Owned::new(&#owned);)*
            for &#var in __batch { #body }
        },
    );
    let init = quote!(|| (#(#used.local(),)*));
    // Each scattered field's chunk copy, by position (a list: the body's three paths
    // each repeat over it).
    let k: Vec<usize> = (0..scatter.len()).collect();
    let copies = (!scatter.is_empty()).then(|| quote!(__copies,));
    let cells: Vec<Ident> = (0..scatter.len())
        .map(|k| format_ident!("__cells{}", k))
        .collect();
    let general = quote! {
        #(let #used = #used.access();)*
        #(let #scatter = ::mpm_core::scatter::ScatterView::new(&#scatter, __copies[#k]);)*
        #copies_of_outer
        #body
    };
    // The body three times: for batches whose fields are all dense, or dense and sparse
    // with the block cache, their scattered fields all privatised, with accesses free of the
    // other paths (see `mpm_core::host::ANY`), and for the rest.
    let on_path = |access: Ident| {
        // A sparse field the loop only adds into takes the dense path where its copy is
        // grid-shaped, and the cached one where it is not (see `mpm_core::scatter`).
        let for_copy = format_ident!("{}_for_copy", access);
        let accesses = used
            .iter()
            .map(|f| match scatter.iter().position(|s| s == f) {
                Some(k) => quote!(#f.#for_copy(__copies[#k].grid_shaped())),
                None => quote!(#f.#access()),
            });
        quote! {
            if let (#(Some(#used),)* #(Some(#cells),)*) =
                (#(#accesses,)* #(__copies[#k].cells(),)*)
            {
                #(let #scatter = ::mpm_core::scatter::PrivateView::new(&#scatter, #cells);)*
                #copies_of_outer
                #body
            }
        }
    };
    let batch = match used.is_empty() {
        true => general,
        false => {
            let dense = on_path(format_ident!("dense_access"));
            let cached = on_path(format_ident!("cached_access"));
            quote!(#dense else #cached else { #general })
        }
    };
    // One call runs a batch of invocations (see `mpm_core::host::BATCH`): the views and the
    // copies are made once per batch; `continue` at the invocation's level goes to the next.
    let worker = quote! {
        |__worker, #copies __batch: &[_]| {
            #[allow(unused_imports)]
            use ::mpm_core::scatter::AddView as _;
            let (#(#used,)*) = __worker;
            #batch
        }
    };
    // The loop's other fields: a sparse field on one of their trees keeps a pool-shaped copy.
    let others: Vec<&Ident> = used.iter().filter(|f| !scatter.contains(f)).collect();
    let scatter_range = |start: TokenStream, end: TokenStream, inclusive: bool| {
        quote! {
            ::mpm_core::scatter::par_scatter(
                __args.reproducible,
                #start,
                #end,
                #inclusive,
                &[#(&#scatter as &dyn ::mpm_core::scatter::ScatterField),*],
                &[#(&#others as &dyn ::mpm_core::scatter::ScatterField),*],
                #init,
                #worker,
            );
        }
    };
    let run = match &l.domain {
        Domain::Bins {
            grid,
            order,
            starts,
            block,
        } => {
            let (block, adds) = (emit_cpu::expr(block), &l.adds);
            quote! {
                ::mpm_core::bins::par_bins(&#grid, &#order, &#starts, #block, #init,
                    |__worker, __block, __batch: &[u32]| {
                        #[allow(unused_imports)]
                        use ::mpm_core::scatter::AddView as _;
                        let (#(#used,)*) = __worker;
                        #(let #used = #used.access();)*
                        #(let #adds = ::mpm_core::bins::BinView::new(&#adds, __block);)*
                        #copies_of_outer
                        #body
                    });
            }
        }
        Domain::Active(field) => quote!(::mpm_core::host::par_active(&#field, #init, #worker);),
        Domain::Indices(field) if scatter.is_empty() => {
            quote!(::mpm_core::host::par_indices(&#field, #init, #worker);)
        }
        Domain::Indices(field) => scatter_range(quote!(0u32), quote!(#field.shape()[0]), false),
        Domain::Range(a, b, inclusive) | Domain::Blocks(a, b, inclusive) => {
            let (a, b) = (emit_cpu::expr(a), emit_cpu::expr(b));
            let f = match l.domain {
                Domain::Blocks(..) => quote!(par_blocks),
                _ => quote!(par_for),
            };
            if scatter.is_empty() {
                quote!(::mpm_core::host::#f(#a, #b, #inclusive, #init, #worker);)
            } else {
                scatter_range(a, b, *inclusive)
            }
        }
    };
    if snapshot.is_empty() {
        return run;
    }
    // A stencil's sparse fields, read through dense snapshots that live as long as the loop.
    let snaps: Vec<Ident> = (0..snapshot.len())
        .map(|k| format_ident!("__snapshot{}", k))
        .collect();
    quote! {{
        #(let #snaps = ::mpm_core::snapshot::Snapshot::of(&#snapshot);)*
        #(let #snapshot = #snaps.view(&#snapshot);)*
        #run
    }}
}

/// At most this many flags are compiled in per loop: `2^n` copies of its body per access path.
const SPECIALIZED_FLAGS: usize = 2;

/// `code` once per combination of the `flags`' values, each copy with the flags bound to
/// literals, so that the compiler drops the branches they rule out, as the GPU's
/// specialisation constants do. A flag tested per stencil node is otherwise a branch in
/// each of the unrolled node bodies and keeps the values of both sides live across them:
/// mpm3d.toml's P2G, whose FLIP scatter was off, took 7.9-8.9 ms with it and 6.5-8.1 ms
/// without.
fn specialized(flags: &[Ident], code: TokenStream) -> TokenStream {
    match flags.split_first() {
        None => code,
        Some((flag, rest)) => {
            let inner = specialized(rest, code);
            quote!(if #flag { let #flag = true; #inner } else { let #flag = false; #inner })
        }
    }
}

/// The `flags` (at most [`SPECIALIZED_FLAGS`], first come first) that `stmts` test inside a
/// loop of their own, where a test runs per iteration; one test per invocation costs
/// little and is left as it is.
fn tested_in_loops(stmts: &[Stmt], flags: &[Ident]) -> Vec<Ident> {
    fn visit(stmts: &[Stmt], flags: &[Ident], found: &mut Vec<Ident>) {
        for s in stmts {
            let looped = match s {
                Stmt::For { body, .. }
                | Stmt::Loop { body }
                | Stmt::Lanes { body, .. }
                | Stmt::While { body, .. } => emit_cpu::stmts(body),
                Stmt::If(i) => {
                    visit_if(i, flags, found);
                    continue;
                }
                Stmt::Block(b) => {
                    visit(&b.stmts, flags, found);
                    continue;
                }
                _ => continue,
            };
            let cond = match s {
                Stmt::While { cond, .. } => emit_cpu::expr(cond),
                _ => TokenStream::new(),
            };
            for flag in flags {
                if !found.contains(flag)
                    && [&looped, &cond]
                        .iter()
                        .any(|t| emit_cpu::has_ident(t, &|i| i == flag))
                {
                    found.push(flag.clone());
                }
            }
        }
    }
    fn visit_if(i: &crate::checked::If, flags: &[Ident], found: &mut Vec<Ident>) {
        visit(&i.then.stmts, flags, found);
        match &i.otherwise {
            Some(crate::checked::Else::If(nested)) => visit_if(nested, flags, found),
            Some(crate::checked::Else::Block(b)) => visit(&b.stmts, flags, found),
            None => {}
        }
    }
    let mut found = Vec::new();
    visit(stmts, flags, &mut found);
    found.truncate(SPECIALIZED_FLAGS);
    found
}

/// One parallel loop traced, and the loop's index range as the launcher computes it.
fn trace_loop(l: &ParLoop, trace: &Trace) -> (TokenStream, TokenStream) {
    let var = &l.var;
    let label = var.to_string();
    let body = trace.stmts(&l.body);
    match &l.domain {
        Domain::Active(field) => (
            quote!(::mpm_core::trace::par_active(#label, #field, |#var| { #body });),
            quote!(::mpm_core::abi::active_range(#field)),
        ),
        Domain::Indices(field) => (
            quote!(::mpm_core::trace::par_indices(#label, #field, |#var| { #body });),
            quote!(::mpm_core::abi::indices_range(&#field.shape())),
        ),
        Domain::Bins {
            grid,
            order,
            starts,
            block,
        } => {
            let block = trace.expr(block);
            (
                quote!(::mpm_core::trace::par_bins(#label, #grid, #order, #starts, #block, |#var| { #body });),
                quote!(::mpm_core::abi::indices_range(&#order.shape())),
            )
        }
        Domain::Range(a, b, inclusive) | Domain::Blocks(a, b, inclusive) => {
            let (ta, tb) = (trace.expr(a), trace.expr(b));
            let (ha, hb) = (emit_cpu::expr(a), emit_cpu::expr(b));
            let f = match l.domain {
                Domain::Blocks(..) => quote!(par_blocks),
                _ => quote!(par_range),
            };
            (
                quote!(::mpm_core::trace::#f(#label, #ta, #tb, |#var| { #body });),
                quote!(::mpm_core::host::loop_range(#ha, #hb, #inclusive)),
            )
        }
    }
}

fn kernel_item(f: &ItemFn, params: &[Param], tops: &[Top]) -> TokenStream {
    let trace = Trace { in_func: false };
    let (mut cpu_body, mut trace_body, mut ranges, mut loop_names) = (
        TokenStream::new(),
        TokenStream::new(),
        Vec::new(),
        Vec::new(),
    );
    // The kernel-level values in scope (see `cpu_loop`), each name once: scalar parameters,
    // then initialised top-level `let`s as they come.
    let mut outer: Vec<Ident> = params
        .iter()
        .filter_map(|p| match p {
            Param::Scalar { name, .. } => Some(name.clone()),
            Param::Field { .. } => None,
        })
        .collect();
    let flags: Vec<Ident> = params
        .iter()
        .filter_map(|p| match p {
            Param::Scalar {
                name,
                ty: syn::Type::Path(ty),
                specialized: true,
                ..
            } if ty.path.is_ident("bool") => Some(name.clone()),
            _ => None,
        })
        .collect();
    for top in tops {
        match top {
            Top::Let(s) => {
                cpu_body.extend(emit_cpu::stmt(s));
                trace_body.extend(trace.stmt(s));
                if let Stmt::Let {
                    binding,
                    value: Some(_),
                } = s
                {
                    for name in binding.names() {
                        if !outer.contains(name) {
                            outer.push(name.clone());
                        }
                    }
                }
            }
            Top::Loop(l) => {
                let k = loop_names.len();
                let run = cpu_loop(l, &outer, &flags);
                cpu_body.extend(quote!(if __args.runs(#k) { #run }));
                cpu_body.extend(quote!(__args.lap(#k);));
                loop_names.push(l.name.clone().unwrap_or_default());
                let (traced, range) = trace_loop(l, &trace);
                trace_body.extend(traced);
                ranges.push(range);
            }
        }
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
    let mut specialized_scalars: Vec<u32> = Vec::new();
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
                specialized,
            } => {
                let k = *index as u32;
                if *specialized {
                    specialized_scalars.push(k);
                }
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
    quote! {
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
                    ::std::vec![#(#specialized_scalars),*],
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
                loop_names: &[#(#loop_names),*],
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
    }
}

/// `#[func]`.
/// A func that calls itself by name: the GPU has no call stack, so recursion is refused here,
/// where the macro sees it (recursion through other funcs fails on every backend when the
/// kernel is first launched, from its trace).
fn check_not_recursive(f: &ItemFn) -> Result<()> {
    struct Find<'a> {
        name: &'a syn::Ident,
        call: Option<syn::ExprCall>,
    }
    impl<'ast> syn::visit::Visit<'ast> for Find<'_> {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let syn::Expr::Path(p) = &*c.func {
                if p.path.is_ident(self.name) && self.call.is_none() {
                    self.call = Some(c.clone());
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
    }
    let mut find = Find {
        name: &f.sig.ident,
        call: None,
    };
    syn::visit::Visit::visit_block(&mut find, &f.block);
    match find.call {
        Some(c) => Err(Error::new_spanned(
            c,
            format!(
                "`{}` calls itself: recursion is not part of the kernel language (GPUs have no \
                 call stack); write it as a loop",
                f.sig.ident
            ),
        )),
        None => Ok(()),
    }
}

pub fn func(f: ItemFn) -> TokenStream {
    func_item(&f).unwrap_or_else(|e| e.to_compile_error())
}

fn func_item(f: &ItemFn) -> Result<TokenStream> {
    check_fn(f, "func")?;
    let ret = match &f.sig.output {
        syn::ReturnType::Type(_, t) => {
            crate::signature::check_value_type(t)?;
            (**t).clone()
        }
        syn::ReturnType::Default => {
            return Err(Error::new_spanned(
                &f.sig,
                "a func returns a value (`-> T`); funcs cannot write fields",
            ));
        }
    };
    let mut names = Vec::new();
    let mut tys = Vec::new();
    for arg in &f.sig.inputs {
        let (name, _, ty) = arg_name(arg)?;
        if let syn::FnArg::Typed(pt) = arg {
            if let Some(a) = pt.attrs.iter().find(|a| crate::signature::is_specialize(a)) {
                return Err(Error::new_spanned(
                    a,
                    "`#[specialize]` marks kernel parameters; a func is compiled into its kernel's \
                     code, specialised with it",
                ));
            }
        }
        if let syn::Type::Reference(r) = ty {
            return Err(Error::new_spanned(
                r,
                "funcs take values, not references or fields: pass `x[i]`",
            ));
        }
        crate::signature::check_value_type(ty)?;
        names.push(name);
        tys.push(ty.clone());
    }
    check_not_recursive(f)?;
    let body = check::func_body(&f.block)?;
    let cpu_body = emit_cpu::stmts(&body);
    let trace_body = Trace { in_func: true }.stmts(&body);
    let trace_body = if body.value.is_some() {
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
    // A func is `#[inline]` unless it says otherwise (`#[inline(always)]` where LLVM would
    // leave a large func a call in a hot loop).
    let inline = if attrs.iter().any(|a| a.path().is_ident("inline")) {
        quote!()
    } else {
        quote!(#[inline])
    };
    Ok(quote! {
        #(#attrs)*
        #inline
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
