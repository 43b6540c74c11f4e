//! GLSL -> SPIR-V with shaderc, cached in memory and on disk; the persisted pipeline cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpm_core::hash::fnv1a64;
use mpm_core::{Error, Result};

use crate::context::backend_err;

/// The directory for on-disk caches: `$MPM_CACHE_DIR`, `$XDG_CACHE_HOME/mpm` or `$HOME/.cache/mpm`.
pub fn cache_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env("MPM_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("mpm")))
        .or_else(|| env("HOME").map(|d| d.join(".cache").join("mpm")))
}

/// With `MPM_GLSL_DIR` set, writes each shader's GLSL to `<dir>/<name>` (a kernel's loop `l`
/// is `<kernel>_loop<l>.comp`; the last specialisation compiled wins), to read what a kernel
/// lowers to. A failed write is reported, not fatal.
fn dump_glsl(name: &str, glsl: &str) {
    let Some(dir) = std::env::var_os("MPM_GLSL_DIR").filter(|d| !d.is_empty()) else {
        return;
    };
    let file: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = Path::new(&dir).join(file);
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, glsl)) {
        eprintln!("mpm: could not write {}: {e}", path.display());
    }
}

/// Counters of the shader cache, for tests and profiling notes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileStats {
    /// Shaders compiled by shaderc.
    pub compiled: u64,
    /// Shaders found in the in-memory cache.
    pub memory_hits: u64,
    /// Shaders loaded from the on-disk cache.
    pub disk_hits: u64,
    /// On-disk entries that were damaged or held another shader, rebuilt.
    pub rejected: u64,
    /// Time spent in shaderc.
    pub compile_time: Duration,
}

pub(crate) struct ShaderCache {
    compiler: Option<shaderc::Compiler>,
    memory: HashMap<u64, Vec<u32>>,
    dir: Option<PathBuf>,
    /// Device capabilities and compiler version, mixed into every key.
    salt: String,
    pub stats: CompileStats,
}

/// The first bytes of an on-disk cache entry (format version 1).
const ENTRY_MAGIC: &[u8; 8] = b"mpmcach1";

/// An on-disk cache entry: magic, the key it was stored under, the payload's length and
/// checksum, then the payload. A damaged, truncated or swapped file thus reads as a miss
/// (see [`unseal`]), never as a wrong shader.
fn seal(key: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + payload.len());
    out.extend_from_slice(ENTRY_MAGIC);
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a64(&[payload]).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry stored under `key`, or `None` when the bytes are not one intact.
fn unseal(key: u64, bytes: &[u8]) -> Option<&[u8]> {
    let word = |k: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(k..k + 8)?.try_into().ok()?))
    };
    let payload = bytes.get(32..)?;
    let intact = bytes.get(..8)? == ENTRY_MAGIC
        && word(8)? == key
        && word(16)? == payload.len() as u64
        && word(24)? == fnv1a64(&[payload]);
    intact.then_some(payload)
}

/// Reads the entry at `path` stored under `key`: `Ok(None)` when there is none (or a file
/// of an older format), `Err(())` when the file is an entry but not an intact one for `key`
/// (it is then rebuilt).
fn read_entry(path: &Path, key: u64) -> std::result::Result<Option<Vec<u8>>, ()> {
    match std::fs::read(path) {
        Err(_) => Ok(None),
        Ok(bytes) if !bytes.starts_with(ENTRY_MAGIC) => Ok(None),
        Ok(bytes) => unseal(key, &bytes).map(|p| Some(p.to_vec())).ok_or(()),
    }
}

/// The key of a device's pipeline cache entry.
fn pipeline_key(device_id: &str) -> u64 {
    fnv1a64(&[b"pipeline-cache", device_id.as_bytes()])
}

/// A persisted `VkPipelineCache`'s data for the device, if an intact entry exists; a damaged
/// one is named on stderr and ignored (the next save replaces it).
pub fn load_pipeline_cache(path: &Path, device_id: &str) -> Vec<u8> {
    match read_entry(path, pipeline_key(device_id)) {
        Ok(data) => data.unwrap_or_default(),
        Err(()) => {
            eprintln!(
                "mpm: the pipeline cache {} is damaged or belongs to another device; it is rebuilt",
                path.display()
            );
            Vec::new()
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Quotes the GLSL line that shaderc's message points at (`name:LINE: error: ...`).
fn quote_error(glsl: &str, message: &str) -> String {
    let mut out = message.trim_end().to_string();
    let lines: Vec<&str> = glsl.lines().collect();
    let mut quoted = Vec::new();
    for m in message.lines() {
        // `NAME:LINE: error: ...` where NAME may itself contain colons.
        let Some(pos) = m.find(": error:").or_else(|| m.find(": warning:")) else {
            continue;
        };
        let n = m[..pos].rsplit(':').next().unwrap_or("");
        if let Ok(n) = n.trim().parse::<usize>() {
            if n >= 1 && n <= lines.len() && !quoted.contains(&n) {
                quoted.push(n);
            }
        }
    }
    for n in quoted {
        out.push_str(&format!("\n  line {n}: {}", lines[n - 1].trim()));
    }
    out
}

impl ShaderCache {
    pub fn new(salt: String) -> ShaderCache {
        ShaderCache {
            compiler: None,
            memory: HashMap::new(),
            dir: cache_dir().map(|d| d.join("spirv")),
            salt,
            stats: CompileStats::default(),
        }
    }

    pub fn key(&self, glsl: &str) -> u64 {
        let (v, r) = shaderc::get_spirv_version();
        let version = format!("shaderc-0.8/{v}.{r}/vulkan1.1/O");
        fnv1a64(&[glsl.as_bytes(), version.as_bytes(), self.salt.as_bytes()])
    }

    /// Compiles (or finds) the SPIR-V of one compute shader.
    pub fn spirv(&mut self, kernel: &str, name: &str, glsl: &str) -> Result<Vec<u32>> {
        let key = self.key(glsl);
        dump_glsl(name, glsl);
        if let Some(s) = self.memory.get(&key) {
            self.stats.memory_hits += 1;
            return Ok(s.clone());
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{key:016x}.spv")));
        if let Some(p) = &path {
            let words = read_entry(p, key).map(|bytes| {
                bytes
                    .filter(|b| b.len() % 4 == 0 && b.len() >= 20)
                    .map(|b| {
                        b.chunks_exact(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                            .collect::<Vec<u32>>()
                    })
            });
            match words {
                Ok(Some(words)) if words[0] == SPIRV_MAGIC => {
                    self.stats.disk_hits += 1;
                    self.memory.insert(key, words.clone());
                    return Ok(words);
                }
                Ok(_) => {}
                Err(()) => {
                    self.stats.rejected += 1;
                    eprintln!(
                        "mpm: the shader cache entry {} is damaged or holds another shader; it is rebuilt",
                        p.display()
                    );
                }
            }
        }
        let t0 = Instant::now();
        let words = self.compile(kernel, name, glsl)?;
        self.stats.compile_time += t0.elapsed();
        self.stats.compiled += 1;
        if let Some(p) = &path {
            // A failed cache write only costs a recompile next time.
            let _ = write_atomic(p, &seal(key, bytemuck::cast_slice(&words)));
        }
        self.memory.insert(key, words.clone());
        Ok(words)
    }

    fn compile(&mut self, kernel: &str, name: &str, glsl: &str) -> Result<Vec<u32>> {
        if self.compiler.is_none() {
            self.compiler = shaderc::Compiler::new();
        }
        let compiler = self
            .compiler
            .as_ref()
            .ok_or_else(|| backend_err("shaderc could not be initialised"))?;
        let mut opts =
            shaderc::CompileOptions::new().ok_or_else(|| backend_err("shaderc options"))?;
        opts.set_target_env(
            shaderc::TargetEnv::Vulkan,
            shaderc::EnvVersion::Vulkan1_1 as u32,
        );
        opts.set_optimization_level(shaderc::OptimizationLevel::Performance);
        match compiler.compile_into_spirv(
            glsl,
            shaderc::ShaderKind::Compute,
            name,
            "main",
            Some(&opts),
        ) {
            Ok(a) => Ok(a.as_binary().to_vec()),
            Err(shaderc::Error::CompilationError(_, msg)) => Err(Error::ShaderCompile {
                kernel: kernel.into(),
                message: quote_error(glsl, &msg),
            }),
            Err(e) => Err(Error::ShaderCompile {
                kernel: kernel.into(),
                message: e.to_string(),
            }),
        }
    }
}

/// Path of the persisted `VkPipelineCache` of one device.
pub fn pipeline_cache_path(device_id: &str) -> Option<PathBuf> {
    cache_dir().map(|d| d.join(format!("pipeline-cache-{device_id}.bin")))
}

pub fn save_pipeline_cache(path: &Path, device_id: &str, data: &[u8]) {
    let _ = write_atomic(path, &seal(pipeline_key(device_id), data));
}

/// The first word of every SPIR-V module.
const SPIRV_MAGIC: u32 = 0x0723_0203;

#[cfg(test)]
mod tests {
    use super::*;

    /// A damaged entry (a flipped byte past the SPIR-V magic word) and an entry copied under
    /// another shader's name are misses: rebuilt, named, and never run.
    #[test]
    fn damaged_or_swapped_entries_are_rebuilt() {
        let dir = std::env::temp_dir().join(format!("mpm-spirv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fresh = || {
            let mut c = ShaderCache::new("test".into());
            c.dir = Some(dir.clone());
            c
        };
        let a = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
        let b = "#version 450\nlayout(local_size_x = 2) in;\nvoid main() {}\n";
        let mut c = fresh();
        let (wa, wb) = (
            c.spirv("k", "a", a).expect("a"),
            c.spirv("k", "b", b).expect("b"),
        );
        assert_eq!(c.stats.compiled, 2);
        let file = |src: &str| dir.join(format!("{:016x}.spv", c.key(src)));
        let (fa, fb) = (file(a), file(b));
        // Intact: a disk hit.
        let mut c2 = fresh();
        assert_eq!(c2.spirv("k", "a", a).expect("a"), wa);
        assert_eq!((c2.stats.disk_hits, c2.stats.compiled), (1, 0));
        // Damaged past the magic: rebuilt.
        let mut bytes = std::fs::read(&fa).expect("entry");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&fa, &bytes).expect("damage");
        let mut c3 = fresh();
        assert_eq!(c3.spirv("k", "a", a).expect("a"), wa);
        assert_eq!((c3.stats.rejected, c3.stats.compiled), (1, 1));
        // b's entry under a's name: rebuilt, and a's shader comes back.
        std::fs::copy(&fb, &fa).expect("swap");
        let mut c4 = fresh();
        let again = c4.spirv("k", "a", a).expect("a");
        assert_eq!(again, wa);
        assert_ne!(again, wb);
        assert_eq!((c4.stats.rejected, c4.stats.compiled), (1, 1));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn error_quotes_line() {
        let glsl = "#version 450\nvoid main() {\n    int x = nope;\n}\n";
        let msg = quote_error(glsl, "k.comp:3: error: 'nope' : undeclared identifier\n");
        assert!(msg.contains("line 3: int x = nope;"), "{msg}");
    }
}
