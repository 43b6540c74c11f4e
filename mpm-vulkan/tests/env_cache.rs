//! Environment variables and the on-disk caches. One test in this binary, so that setting
//! environment variables cannot race with other tests.

mod common;

use std::time::Instant;

use common::*;
use mpm_core::ir::*;
use mpm_core::types::Ty;
use mpm_core::{Error, Result};
use mpm_vulkan::{VulkanBackend, VulkanOptions};

/// `for i in a.indices() { a[i] = a[i] + s }`
fn trace_add() -> Result<Kernel> {
    let mut k = Kb::new("add");
    let a = k.field("a", Ty::F32, 1);
    let s = k.scalar(Ty::F32);
    let i = k.par_indices(a, Ty::U32);
    let iv = k.v(i);
    let ai = k.load(a, iv);
    let val = k.bin(BinOp::Add, ai, s);
    k.push(Stmt::Store {
        field: a,
        index: iv,
        value: val,
    });
    k.finish()
}

#[test]
fn env_and_disk_caches() {
    let dir = std::env::temp_dir().join(format!("mpm-vk-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("MPM_CACHE_DIR", &dir);
    assert_eq!(mpm_vulkan::cache_dir(), Some(dir.clone()));

    // MPM_VK_DEVICE=nonexistent gives a clear error.
    std::env::set_var("MPM_VK_DEVICE", "nonexistent");
    std::env::set_var("MPM_VK_NO_FLOAT_ATOMICS", "1");
    let opts = VulkanOptions::from_env();
    assert_eq!(opts.device.as_deref(), Some("nonexistent"));
    assert!(!opts.float_atomics);
    match VulkanBackend::new(opts) {
        Err(e @ Error::DeviceNotFound { .. }) => {
            let m = e.to_string();
            assert!(m.contains("MPM_VK_DEVICE=`nonexistent`"), "{m}");
            eprintln!("error as shown: {m}");
        }
        Err(e) if mpm_vulkan::may_skip(&e) => {
            eprintln!("SKIP: no Vulkan device: {e}");
            return;
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("`nonexistent` selected a device"),
    }
    std::env::remove_var("MPM_VK_DEVICE");
    std::env::remove_var("MPM_VK_NO_FLOAT_ATOMICS");
    // Selecting by index 0 works.
    std::env::set_var("MPM_VK_DEVICE", "0");
    let Some(be) = backend_or_skip() else { return };
    std::env::remove_var("MPM_VK_DEVICE");

    let d = desc!("add", ["a"], trace_add);
    let a = fbuf(&be, &[1.0, 2.0]);
    let t0 = Instant::now();
    run(&be, &d, &[(&a, &[2])], &[0.5f32.to_bits()], &[(0, 2)]).unwrap();
    let first = t0.elapsed();
    let stats = be.compile_stats();
    assert_eq!((stats.compiled, stats.disk_hits), (1, 0), "{stats:?}");
    assert_eq!(read_f(&be, &a), vec![1.5, 2.5]);
    // Same kernel, new shape: a second pipeline, a second compile.
    let b = fbuf(&be, &[1.0, 2.0, 3.0]);
    run(&be, &d, &[(&b, &[3])], &[0.5f32.to_bits()], &[(0, 3)]).unwrap();
    assert_eq!(be.compile_stats().compiled, 2);
    final_checks(&be);
    drop(be);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.iter().any(|f| f.starts_with("pipeline-cache-")),
        "{files:?}"
    );
    assert_eq!(std::fs::read_dir(dir.join("spirv")).unwrap().count(), 2);

    // A new backend finds the SPIR-V on disk.
    let be = backend_or_skip().unwrap();
    let a = fbuf(&be, &[1.0, 2.0]);
    let t0 = Instant::now();
    run(&be, &d, &[(&a, &[2])], &[0.5f32.to_bits()], &[(0, 2)]).unwrap();
    let cached = t0.elapsed();
    let stats2 = be.compile_stats();
    assert_eq!((stats2.compiled, stats2.disk_hits), (0, 1), "{stats2:?}");
    assert_eq!(read_f(&be, &a), vec![1.5, 2.5]);
    eprintln!(
        "first launch {first:?} (shaderc {:?}), launch with the disk caches {cached:?}",
        stats.compile_time
    );
    final_checks(&be);
    drop(be);
    let _ = std::fs::remove_dir_all(&dir);
}
