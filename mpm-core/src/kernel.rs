//! The host side of a kernel call (used by code that `#[kernel]` generates).

use crate::backend::{BackendRef, FieldArg, KernelDesc, LaunchArgs, LoopRange};
use crate::error::{Error, Result};
use crate::types::Elem;

/// Appends a scalar parameter's words.
pub fn push_scalar<T: Elem>(out: &mut Vec<u32>, value: &T) {
    let start = out.len();
    out.resize(start + T::WORDS, 0);
    value.write_words(&mut out[start..]);
}

/// The index space of `field.indices()`.
pub fn indices_range<const D: usize>(shape: &[u32; D]) -> LoopRange {
    LoopRange {
        start: 0,
        count: shape.iter().map(|&s| s as u64).product(),
    }
}

/// The index space of `field.active()`: every element a sparse field can hold (inactive ones
/// are skipped by the loop), every index of a dense one.
pub fn active_range<T: crate::Elem, const D: usize>(field: &crate::Field<T, D>) -> LoopRange {
    match field.tree() {
        Some(t) => LoopRange {
            start: 0,
            count: t.elements(),
        },
        None => indices_range(&field.shape()),
    }
}

/// Runs a kernel on the backend its fields live on.
pub fn launch(
    desc: &KernelDesc,
    backends: &[&BackendRef],
    fields: Vec<FieldArg<'_>>,
    scalars: &[u32],
    ranges: &[LoopRange],
) -> Result<()> {
    let backend = backends[0];
    if backends.iter().any(|b| !std::sync::Arc::ptr_eq(b, backend)) {
        return Err(Error::MixedBackends {
            kernel: desc.qualified_name(),
        });
    }
    let args = LaunchArgs {
        fields,
        scalars,
        ranges,
    };
    let launched = backend.launch(desc, &args);
    // Each tree once, even when the launch failed (a pool that ran out grows for the next).
    let mut trees: Vec<&dyn crate::backend::TreeArg> = Vec::new();
    for tree in args.fields.iter().filter_map(|f| f.tree.as_deref()) {
        if !trees.iter().any(|t| std::ptr::addr_eq(*t, tree)) {
            trees.push(tree);
        }
    }
    let grown = trees.iter().try_for_each(|t| t.after_launch());
    launched.and(grown)
}
