//! The host side of a kernel call (used by code that `#[kernel]` generates).

use std::sync::Arc;

use crate::backend::{BackendRef, Buffer, FieldArg, KernelDesc, LaunchArgs, LoopRange, TreeArg};
use crate::error::{Error, Result};

/// A field as a kernel call names it (generated code builds these with `Field::arg`).
pub struct CallField<'a> {
    pub buffer: Arc<dyn Buffer>,
    pub shape: &'a [u32],
    pub tree: Option<Arc<dyn TreeArg>>,
}

/// Runs a kernel on the backend its fields live on, then lets each tree it used grow its
/// pools from the pool use the launch reports.
pub fn launch(
    desc: &KernelDesc,
    backends: &[&BackendRef],
    fields: Vec<CallField<'_>>,
    scalars: &[u32],
    ranges: &[LoopRange],
) -> Result<()> {
    let backend = backends[0];
    if backends.iter().any(|b| !Arc::ptr_eq(b, backend)) {
        return Err(Error::MixedBackends {
            kernel: desc.qualified_name(),
        });
    }
    // Each tree once (fields on one tree share its storage).
    let mut trees: Vec<Arc<dyn TreeArg>> = Vec::new();
    let fields = fields
        .into_iter()
        .map(|f| FieldArg {
            buffer: f.buffer,
            shape: f.shape,
            tree: f.tree.map(|t| {
                trees
                    .iter()
                    .position(|u| Arc::ptr_eq(u, &t))
                    .unwrap_or_else(|| {
                        trees.push(t);
                        trees.len() - 1
                    })
            }),
        })
        .collect();
    let args = LaunchArgs {
        fields,
        trees,
        scalars,
        ranges,
    };
    let report = backend.launch(desc, &args);
    // Every tree, even after a failed launch (a pool that ran out grows for the next).
    let grown = args.trees.iter().enumerate().try_for_each(|(t, tree)| {
        tree.after_launch(report.pools.get(t).and_then(|p| p.as_deref()))
    });
    report.outcome.and(grown)
}
