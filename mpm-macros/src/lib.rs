//! `#[kernel]` and `#[func]`: one Rust source, two lowerings.
//!
//! * the CPU lowering is Rust again: top-level loops become rayon loops, field accesses go
//!   through `mpm_core::host` views and operators through `mpm_core::lang` (wrapping integer
//!   semantics, the same as on the GPU);
//! * the GPU lowering is a *trace* function over `mpm_core::trace` handles that records the
//!   kernel IR, so rustc types every value (CubeCL's approach).
//!
//! `signature` reads the parameters, `check` applies the language's rules once and builds the
//! checked form (`checked`), from which `emit_cpu` and `emit_trace` print the two lowerings;
//! `items` wraps them into the items the attributes expand to.

mod builtins;
mod check;
mod checked;
mod emit_cpu;
mod emit_trace;
mod items;
mod signature;

use proc_macro::TokenStream;

/// Turns a function into a kernel: each top-level `for` is one parallel launch.
///
/// Parameters are `&Field<T, D>` (read), `&mut Field<T, D>` (written) or scalars. The
/// function returns `Result<(), mpm_core::Error>` and runs on the backend of its fields.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let err = syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[kernel] takes no arguments",
        );
        return err.to_compile_error().into();
    }
    let func = syn::parse_macro_input!(item as syn::ItemFn);
    items::kernel(func).into()
}

/// Makes a function callable from kernels and other funcs, on both backends.
#[proc_macro_attribute]
pub fn func(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let err = syn::Error::new(proc_macro2::Span::call_site(), "#[func] takes no arguments");
        return err.to_compile_error().into();
    }
    let func = syn::parse_macro_input!(item as syn::ItemFn);
    items::func(func).into()
}
