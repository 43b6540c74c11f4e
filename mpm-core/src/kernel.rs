//! The host side of a kernel call (used by code that `#[kernel]` generates).

use crate::backend::{BackendRef, FieldArg, KernelDesc, LaunchArgs, LoopRange};
use crate::error::{Error, Result};

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
