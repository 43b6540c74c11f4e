//! Kernel and func signatures.

use syn::{
    spanned::Spanned, Error, FnArg, GenericArgument, Ident, Pat, PathArguments, Result, Type,
};

/// A kernel parameter.
pub enum Param {
    Field {
        name: Ident,
        elem: Type,
        dims: Dims,
        writable: bool,
        index: usize,
    },
    Scalar {
        name: Ident,
        ty: Type,
        index: usize,
        /// Declared `mut`: the body assigns it.
        mutable: bool,
        /// Marked `#[specialize]`: GPU code is compiled for each value it takes (and CPU
        /// code for each value of a `bool` tested in an inner loop, see `items::specialized`).
        specialized: bool,
    },
}

/// Whether an attribute is the parameter marker `#[specialize]`.
pub fn is_specialize(a: &syn::Attribute) -> bool {
    a.path().is_ident("specialize")
}

/// A field's dimension count: a literal, or a constant (`Field<Vec, D>` in code written once
/// for 2D and 3D, where `D` is 2 or 3 and Rust checks the rest).
pub enum Dims {
    Count(usize),
    Const(syn::Path),
}

impl Dims {
    /// The count, when the signature spells it.
    pub fn count(&self) -> Option<usize> {
        match self {
            Dims::Count(n) => Some(*n),
            Dims::Const(_) => None,
        }
    }
}

impl quote::ToTokens for Dims {
    /// As a const generic argument.
    fn to_tokens(&self, out: &mut proc_macro2::TokenStream) {
        match self {
            Dims::Count(n) => out.extend(quote::quote!(#n)),
            Dims::Const(p) => out.extend(quote::quote!({ #p })),
        }
    }
}

impl Param {
    pub fn name(&self) -> &Ident {
        match self {
            Param::Field { name, .. } | Param::Scalar { name, .. } => name,
        }
    }
}

pub fn arg_name(arg: &FnArg) -> Result<(Ident, bool, &Type)> {
    match arg {
        FnArg::Receiver(r) => Err(Error::new_spanned(
            r,
            "kernels and funcs take no `self`; write a free function",
        )),
        FnArg::Typed(pt) => match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                Ok((pi.ident.clone(), pi.mutability.is_some(), &pt.ty))
            }
            other => Err(Error::new_spanned(
                other,
                "parameters must be plain names (`x: f32`), not patterns",
            )),
        },
    }
}

/// `Field<T>` / `Field<T, D>`: the element type and dimension count.
fn field_type(ty: &Type) -> Option<Result<(Type, Dims)>> {
    let Type::Path(tp) = ty else { return None };
    let last = tp.path.segments.last()?;
    if last.ident != "Field" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Some(Err(Error::new_spanned(
            last,
            "write `Field<T>` or `Field<T, D>` with D in 0..=3",
        )));
    };
    let mut it = args.args.iter();
    let elem = match it.next() {
        Some(GenericArgument::Type(t)) => t.clone(),
        _ => {
            return Some(Err(Error::new_spanned(
                args,
                "the first argument of `Field` is the element type",
            )))
        }
    };
    let dims = match it.next() {
        None => Dims::Count(1),
        Some(GenericArgument::Const(syn::Expr::Lit(l))) if l_int(l).is_some() => {
            Dims::Count(l_int(l).unwrap_or(1))
        }
        // A constant's name parses as a type.
        Some(GenericArgument::Type(Type::Path(tp))) if tp.qself.is_none() => {
            Dims::Const(tp.path.clone())
        }
        Some(GenericArgument::Const(syn::Expr::Path(p))) if p.qself.is_none() => {
            Dims::Const(p.path.clone())
        }
        Some(other) => {
            return Some(Err(Error::new_spanned(
                other,
                "the dimension count must be a literal 0, 1, 2 or 3, or a constant",
            )))
        }
    };
    if dims.count().is_some_and(|d| d > 3) {
        return Some(Err(Error::new_spanned(
            args,
            "fields have 0 to 3 dimensions",
        )));
    }
    Some(Ok((elem, dims)))
}

fn l_int(l: &syn::ExprLit) -> Option<usize> {
    match &l.lit {
        syn::Lit::Int(i) => i.base10_parse().ok(),
        _ => None,
    }
}

/// The parameters of a kernel.
pub fn kernel_params(sig: &syn::Signature) -> Result<Vec<Param>> {
    if !sig.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &sig.generics,
            "kernels cannot be generic",
        ));
    }
    if let syn::ReturnType::Type(_, t) = &sig.output {
        return Err(Error::new_spanned(
            t,
            "kernels return nothing; their results are written into fields",
        ));
    }
    let mut params = Vec::new();
    let (mut fields, mut scalars) = (0, 0);
    for arg in &sig.inputs {
        let (name, mutable, ty) = arg_name(arg)?;
        let marker = match arg {
            FnArg::Typed(pt) => pt.attrs.iter().find(|a| is_specialize(a)),
            FnArg::Receiver(_) => None,
        };
        if let Some(a) = marker {
            if a.meta.require_path_only().is_err() {
                return Err(Error::new_spanned(a, "`#[specialize]` takes no arguments"));
            }
            let flag_or_count = matches!(ty, Type::Path(tp) if ["bool", "i32", "u32"]
                .iter()
                .any(|t| tp.path.is_ident(t)));
            if !flag_or_count {
                return Err(Error::new_spanned(
                    ty,
                    "`#[specialize]` takes a bool, i32 or u32 scalar (a flag or a small count): \
                     GPU code is compiled for each value it takes",
                ));
            }
            if mutable {
                return Err(Error::new_spanned(
                    a,
                    "a `#[specialize]` parameter is a constant of the launch: it cannot be `mut`",
                ));
            }
        }
        match ty {
            Type::Reference(r) => {
                match field_type(&r.elem) {
                    Some(parsed) => {
                        let (elem, dims) = parsed?;
                        params.push(Param::Field {
                            name,
                            elem,
                            dims,
                            writable: r.mutability.is_some(),
                            index: fields,
                        });
                        fields += 1;
                    }
                    None => return Err(Error::new_spanned(
                        r,
                        "reference parameters must be fields: `&Field<T, D>` or `&mut Field<T, D>`",
                    )),
                }
            }
            other => {
                if field_type(other).is_some() {
                    return Err(Error::new_spanned(
                        other,
                        "pass fields by reference: `&Field<..>` or `&mut Field<..>`",
                    ));
                }
                if !is_elem_type(other) {
                    return Err(Error::new_spanned(
                        other,
                        "scalar parameters are f32, i32, u32, bool or a glam Vec2/3/4, IVec2/3, UVec2/3, Mat2/3",
                    ));
                }
                params.push(Param::Scalar {
                    name,
                    ty: other.clone(),
                    index: scalars,
                    mutable,
                    specialized: marker.is_some(),
                });
                scalars += 1;
            }
        }
    }
    if fields == 0 {
        return Err(Error::new(
            if sig.inputs.is_empty() {
                sig.ident.span()
            } else {
                sig.inputs.span()
            },
            "a kernel needs at least one field parameter (it runs on its fields' backend)",
        ));
    }
    Ok(params)
}

/// Refuses, at its span, a type that names a Rust primitive outside the language (`f64`,
/// `i64`, `usize`, `char`, ...), anywhere inside it (`[f64; 3]`, `(f32, u64)`): without this
/// rustc reports each use as a missing trait implementation.
pub fn check_value_type(ty: &Type) -> Result<()> {
    match ty {
        Type::Path(tp) => {
            if let Some(seg) = tp.path.segments.last() {
                let message = match seg.ident.to_string().as_str() {
                    "f16" | "f64" | "f128" => Some("floats in kernels are f32"),
                    "i8" | "i16" | "i64" | "i128" | "isize" | "u8" | "u16" | "u64" | "u128"
                    | "usize" => Some("integers in kernels are i32 or u32"),
                    "char" | "str" | "String" => {
                        Some("kernels have no characters or strings; their values are numbers")
                    }
                    _ => None,
                };
                if let Some(m) = message {
                    return Err(Error::new_spanned(seg, m));
                }
            }
            Ok(())
        }
        Type::Array(a) => check_value_type(&a.elem),
        Type::Tuple(t) => t.elems.iter().try_for_each(check_value_type),
        Type::Paren(p) => check_value_type(&p.elem),
        Type::Group(g) => check_value_type(&g.elem),
        _ => Ok(()),
    }
}

/// Whether a type can name one of the language's element types: f32, i32, u32, bool, a glam
/// vector or matrix, or a type alias of one (`Vec` in code written once for 2D and 3D; Rust
/// checks that it is an element type). Other primitives (f64, i64, ...) are refused here.
fn is_elem_type(ty: &Type) -> bool {
    let Type::Path(tp) = ty else { return false };
    tp.qself.is_none()
        && tp.path.segments.last().is_some_and(|s| {
            let name = s.ident.to_string();
            s.arguments.is_empty()
                && (["f32", "i32", "u32", "bool"].contains(&name.as_str())
                    || name.starts_with(|c: char| c.is_ascii_uppercase()))
        })
}
