//! The CPU backend: fields in host memory, kernels run by their native (rayon) lowering.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mpm_core::backend::{Buffer, LaunchArgs, LaunchReport, LoopTiming};
use mpm_core::host::{HostArgs, HostField, Laps};
use mpm_core::sparse::{FieldWords, PoolUse, Sparse};
use mpm_core::{Backend, BackendKind, Error, KernelDesc, Result};
use rayon::prelude::*;

/// Words one thread writes at a time when filling buffers.
const CHUNK: usize = 1 << 14;

/// Host memory of one field.
struct HostBuffer {
    words: Box<[AtomicU32]>,
}

impl Buffer for HostBuffer {
    fn words(&self) -> usize {
        self.words.len()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Runs kernels on all cores with rayon (from a program's main thread, see
/// [`CpuBackend::on_main_thread`]), or on a pool of its own.
#[derive(Default)]
pub struct CpuBackend {
    /// Per kernel (module, name) and loop index: static keys, so a launch allocates nothing
    /// to record its times.
    profile: Mutex<HashMap<(&'static str, &'static str, usize), LoopTiming>>,
    /// A pool of a chosen size; `None` runs on rayon's global pool.
    pool: Option<rayon::ThreadPool>,
    /// Scatter loops add into the fields with shared atomics, instead of into per-thread
    /// copies summed in a fixed order (`mpm_core::scatter`), which is the default: it gives
    /// the same bits on every run and, without a compare-and-swap per word, P2G is 2.3x
    /// faster (mpm3d 64^3: 33 to 14 ms per substep on 2 cores).
    shared_atomics: bool,
    /// Kernels traced so far, and why a trace failed: the first launch of a kernel traces it
    /// as the GPU backend does, so that what the GPU lowering refuses (recursion through
    /// funcs) fails the same way here, before anything runs.
    traced: Mutex<HashMap<String, Option<String>>>,
}

impl CpuBackend {
    /// Runs the kernel, then each tree's maintenance, recording its pool use in `pools`.
    fn run_kernel(
        &self,
        kernel: &KernelDesc,
        args: &LaunchArgs<'_>,
        pools: &mut [Option<Vec<PoolUse>>],
    ) -> Result<()> {
        let name = kernel.qualified_name();
        self.check_trace(kernel, &name)?;
        let fields = args
            .fields
            .iter()
            .map(|f| {
                let tree = match f.tree.map(|t| &args.trees[t]) {
                    Some(t) => Some(Sparse::new(t.plan(), &host_buffer(t.structure())?.words)),
                    None => None,
                };
                Ok(HostField {
                    words: &host_buffer(&*f.buffer)?.words,
                    shape: f.shape,
                    tree,
                    frozen: f.tree.is_some_and(|t| args.trees[t].frozen()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let host = HostArgs {
            fields,
            scalars: args.scalars,
            ranges: args.ranges,
            loops: args.loops.clone(),
            out_of_bounds: AtomicUsize::new(0),
            reproducible: !self.shared_atomics,
            laps: Mutex::new(Laps::start()),
        };
        self.run(|| (kernel.cpu)(&host));
        if let (Ok(mut p), Ok(laps)) = (self.profile.lock(), host.laps.lock()) {
            let ran = laps.times.iter().enumerate().skip(host.loops.start);
            for (k, &took) in ran.take(host.loops.len()) {
                let key = (kernel.module, kernel.name, k);
                let t = p.entry(key).or_insert_with(|| LoopTiming {
                    kernel: name.clone(),
                    loop_index: k,
                    name: kernel.loop_name(k),
                    calls: 0,
                    total: Duration::ZERO,
                });
                t.calls += 1;
                t.total += took;
            }
        }
        // Each tree: apply deactivations, recycle blocks, measure the pools.
        for (tree, pool_use) in args.trees.iter().zip(pools.iter_mut()) {
            let placed = tree.fields();
            let words = placed
                .iter()
                .map(|(b, n)| {
                    Ok(FieldWords {
                        words: &host_buffer(&**b)?.words,
                        per_element: *n,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let sparse = Sparse::new(tree.plan(), &host_buffer(tree.structure())?.words);
            let maintained = sparse.maintain(&words);
            *pool_use = Some(sparse.pool_use());
            maintained.map_err(|(level, capacity)| Error::PoolExhausted {
                kernel: kernel.qualified_name(),
                level,
                capacity,
            })?;
        }
        let status = host.out_of_bounds.load(Ordering::Relaxed) as u32;
        mpm_core::abi::status_error(status, kernel.qualified_name(), |k| {
            kernel
                .field_names
                .get(k)
                .copied()
                .unwrap_or("?")
                .to_string()
        })
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// A backend for a program that launches its kernels from its main thread: rayon's
    /// global pool is built with `threads` threads (rayon's default for `None`), the main
    /// thread one of them, so that a launch starts on the calling thread at once and its
    /// end wakes no one. From outside the pool a launch hands its work to a sleeping worker
    /// and sleeps until it is done, and on a virtual machine a wake-up takes tens of
    /// microseconds: on this project's 2-core machine a launch of two small loops took
    /// 36-45 us that way and 20-27 us from the pool's own thread, and mpm99's first loop
    /// (which carries a launch's start) 41 -> 32 us.
    ///
    /// Anywhere else it is [`CpuBackend::new`] (`None`) or [`CpuBackend::with_threads`]:
    /// off the main thread (a test's, say), where the global pool was started before or
    /// built here for another size, and for one thread (a pool of the main thread alone
    /// would never run work handed to it from other threads). The main thread stays in the
    /// global pool for the rest of the process; rayon work from other threads goes to the
    /// pool's other workers.
    pub fn on_main_thread(threads: Option<usize>) -> Result<Self> {
        /// The size of the global pool this function built, 0 if it could not.
        static BUILT: OnceLock<usize> = OnceLock::new();
        let wanted = threads.unwrap_or_else(default_threads);
        let main = std::thread::current().name() == Some("main");
        let built = main.then(|| {
            *BUILT.get_or_init(|| {
                let ok = wanted >= 2
                    && rayon::ThreadPoolBuilder::new()
                        .num_threads(wanted)
                        .use_current_thread()
                        .build_global()
                        .is_ok();
                if ok {
                    wanted
                } else {
                    0
                }
            })
        });
        match threads {
            _ if built == Some(wanted) && wanted >= 2 => Ok(Self::new()),
            Some(n) => Self::with_threads(n),
            None => Ok(Self::new()),
        }
    }

    /// The trace error of `kernel` (qualified name `name`), if tracing it fails (traced once
    /// per kernel).
    fn check_trace(&self, kernel: &KernelDesc, name: &str) -> Result<()> {
        let known = self.traced.lock().ok().and_then(|t| t.get(name).cloned());
        let failure = match known {
            Some(failure) => failure,
            None => {
                let failure = match (kernel.trace)() {
                    Ok(_) => None,
                    Err(Error::Trace { message, .. }) => Some(message),
                    Err(other) => Some(other.to_string()),
                };
                if let Ok(mut t) = self.traced.lock() {
                    t.insert(name.to_string(), failure.clone());
                }
                failure
            }
        };
        match failure {
            None => Ok(()),
            Some(message) => Err(Error::Trace {
                kernel: name.to_string(),
                message,
            }),
        }
    }

    /// Lets scatter loops add into their fields with shared atomics (compare-and-swap loops
    /// for floats), as fields past the copies' memory budget always do: slower, and float
    /// sums then vary in their last bits from run to run. For comparison.
    pub fn with_shared_atomics(mut self) -> Self {
        self.shared_atomics = true;
        self
    }

    /// Runs kernels on `threads` threads. One thread makes every run bit-for-bit
    /// reproducible, sparse fields included.
    pub fn with_threads(threads: usize) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .build()
            .map_err(|e| Error::Backend {
                backend: "cpu",
                message: format!("cannot start {threads} threads: {e}"),
            })?;
        Ok(CpuBackend {
            pool: Some(pool),
            ..Self::default()
        })
    }

    /// Runs `f` on one of this backend's threads, so that a kernel's loops start from a
    /// worker, which takes part in them: from outside the pool each loop hands its job over
    /// and sleeps until the last batch is done, a wake-up per loop (`mpm bench`, three
    /// alternating rounds: mpm99 1.25-1.35 -> 1.04-1.13 ms a substep, mpm88 0.79-0.84 ->
    /// 0.68-0.81, the solver's dam break 1.25-1.84 -> 1.05-1.15). A thread of the pool
    /// (the main thread after [`CpuBackend::on_main_thread`]) runs `f` itself.
    fn run(&self, f: impl FnOnce() + Send) {
        match &self.pool {
            Some(p) => p.install(f),
            None => rayon::scope(|_| f()),
        }
    }

    fn threads(&self) -> usize {
        match &self.pool {
            Some(p) => p.current_num_threads(),
            None => rayon::current_num_threads(),
        }
    }
}

/// The size rayon gives its global pool by default: `RAYON_NUM_THREADS` when it is a
/// positive number, else the machine's parallelism.
fn default_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn host_buffer(b: &dyn Buffer) -> Result<&HostBuffer> {
    b.as_any()
        .downcast_ref::<HostBuffer>()
        .ok_or_else(|| Error::Backend {
            backend: "cpu",
            message: "a field of another backend was passed to a CPU kernel".into(),
        })
}

impl Backend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn describe(&self) -> String {
        // With several threads, scatter loops add in a fixed order into fields whose copies
        // fit the budget (dense and, since their pools are copied too, sparse ones); the
        // label keeps the narrower claim it has always made. One thread is reproducible
        // throughout.
        let mode = match (self.shared_atomics, self.threads()) {
            (_, 1) => ", reproducible",
            (false, _) => ", reproducible on dense grids",
            _ => "",
        };
        format!("cpu ({} threads{mode})", self.threads())
    }

    fn alloc(&self, words: usize) -> Result<Arc<dyn Buffer>> {
        let mut v = Vec::new();
        v.try_reserve_exact(words).map_err(|_| Error::OutOfMemory {
            requested: words as u64 * 4,
            context: "host field".into(),
        })?;
        v.resize_with(words, || AtomicU32::new(0));
        Ok(Arc::new(HostBuffer {
            words: v.into_boxed_slice(),
        }))
    }

    fn write(&self, buffer: &dyn Buffer, offset: usize, words: &[u32]) -> Result<()> {
        let b = host_buffer(buffer)?;
        let Some(range) = b.words.get(offset..offset + words.len()) else {
            return Err(Error::Backend {
                backend: "cpu",
                message: format!(
                    "writing {} words at word {offset} of a buffer of {}",
                    words.len(),
                    b.words.len()
                ),
            });
        };
        self.run(|| {
            range
                .par_chunks(CHUNK)
                .zip(words.par_chunks(CHUNK))
                .for_each(|(dst, src)| {
                    dst.iter()
                        .zip(src)
                        .for_each(|(d, s)| d.store(*s, Ordering::Relaxed))
                })
        });
        Ok(())
    }

    fn read(&self, buffer: &dyn Buffer) -> Result<Vec<u32>> {
        Ok(host_buffer(buffer)?
            .words
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect())
    }

    fn fill_zero(&self, buffer: &dyn Buffer, words: usize) -> Result<()> {
        let b = host_buffer(buffer)?;
        let Some(prefix) = b.words.get(..words) else {
            return Err(Error::Backend {
                backend: "cpu",
                message: format!("zeroing {words} words of a buffer of {}", b.words.len()),
            });
        };
        self.run(|| {
            prefix
                .par_chunks(CHUNK)
                .for_each(|c| c.iter().for_each(|w| w.store(0, Ordering::Relaxed)))
        });
        Ok(())
    }

    fn launch(&self, kernel: &KernelDesc, args: &LaunchArgs<'_>) -> LaunchReport {
        let mut pools = vec![None; args.trees.len()];
        let outcome = self.run_kernel(kernel, args, &mut pools);
        LaunchReport { outcome, pools }
    }

    fn profile(&self) -> Vec<LoopTiming> {
        let mut out: Vec<LoopTiming> = self
            .profile
            .lock()
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default();
        out.sort_by_key(|t| std::cmp::Reverse(t.total));
        out
    }

    fn reset_profile(&self) {
        if let Ok(mut p) = self.profile.lock() {
            p.clear();
        }
    }
}
