//! What a run used, measured rather than counted: the process's peak resident memory and the
//! GPU's device-local memory, reported next to the engine's own accounting of its fields
//! (which leaves out staging copies, output buffers, the allocator's slack and the runtime).

use mpm_core::Backend;

/// The process's peak resident set size in bytes (`VmHWM` in `/proc/self/status`); `None`
/// where the system does not report it.
pub fn process_peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_hwm(&status)
}

/// The `VmHWM:` line of a `/proc/<pid>/status` text, in bytes.
fn vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line["VmHWM:".len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// "process peak 660.2 MiB, device peak 230.0 MiB": the measured figures, for a summary line.
pub fn measured(backend: &dyn Backend) -> String {
    let mut parts = vec![match process_peak_bytes() {
        Some(b) => format!("process peak {}", mib(b)),
        None => "process peak unknown".to_string(),
    }];
    if let Some(d) = backend.device_memory() {
        parts.push(format!("device peak {}", mib(d.peak)));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_high_water_mark() {
        let status = "Name:\tmpm\nVmPeak:\t  900 kB\nVmHWM:\t   123456 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(vm_hwm(status), Some(123456 * 1024));
        assert_eq!(vm_hwm("Name:\tmpm\n"), None);
    }

    #[test]
    fn this_process_has_a_peak() {
        let peak = process_peak_bytes().expect("Linux reports VmHWM");
        // A test binary holds at least its own code and stacks resident.
        assert!(peak > 1 << 20, "{peak}");
    }
}
