//! The host side of a kernel call (used by code that `#[kernel]` generates).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use crate::backend::{BackendRef, Buffer, FieldArg, KernelDesc, LaunchArgs, LoopRange, TreeArg};
use crate::error::{Error, Result};

/// A field as a kernel call names it (generated code builds these with `Field::arg`).
pub struct CallField<'a> {
    pub buffer: Arc<dyn Buffer>,
    pub shape: &'a [u32],
    pub tree: Option<Arc<dyn TreeArg>>,
}

thread_local! {
    /// The loop labels [`only_loops`] restricts this thread's launches to.
    static WINDOW: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Runs `launches` with every kernel launch on this thread restricted to its top-level loops
/// from the one labelled `first` to the one labelled `last`, both included, and the
/// `let`s before them: a kernel written as one launch can run in parts, with host work
/// between them (a halo exchange between ranks, say) and its fields kept as they were
/// between the parts. A launch whose kernel has no such label fails with
/// [`Error::NoSuchLoop`].
pub fn only_loops<R>(first: &str, last: &str, launches: impl FnOnce() -> R) -> R {
    let window = Some((first.to_string(), last.to_string()));
    let outer = WINDOW.with(|w| w.replace(window));
    let result = launches();
    WINDOW.with(|w| w.replace(outer));
    result
}

/// The loops a launch of `desc` runs: all, or [`only_loops`]' window.
fn window(desc: &KernelDesc, ranges: usize) -> Result<Range<usize>> {
    let Some((first, last)) = WINDOW.with(|w| w.borrow().clone()) else {
        return Ok(0..ranges);
    };
    let find = |label: &str| {
        desc.loop_names
            .iter()
            .position(|n| *n == label)
            .ok_or_else(|| Error::NoSuchLoop {
                kernel: desc.qualified_name(),
                label: label.to_string(),
                loops: desc
                    .loop_names
                    .iter()
                    .filter(|n| !n.is_empty())
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    };
    let (a, b) = (find(&first)?, find(&last)?);
    if b < a {
        return Err(Error::LoopsReversed {
            kernel: desc.qualified_name(),
            first,
            last,
        });
    }
    Ok(a..b + 1)
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
    let loops = window(desc, ranges.len())?;
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
        loops,
    };
    let report = backend.launch(desc, &args);
    // Every tree, even after a failed launch (a pool that ran out grows for the next).
    let grown = args.trees.iter().enumerate().try_for_each(|(t, tree)| {
        tree.after_launch(report.pools.get(t).and_then(|p| p.as_deref()))
    });
    report.outcome.and(grown)
}
