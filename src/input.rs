//! Reading input files within bounds: only regular files (a FIFO would block, `/dev/zero`
//! would never end), and no more bytes than the format can need, so that a wrong path fails
//! at once with a message instead of filling memory.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Scene files: a few kilobytes of TOML in practice.
pub const SCENE_LIMIT: u64 = 16 << 20;
/// OBJ meshes that seed particles: tens of millions of triangles.
pub const MESH_LIMIT: u64 = 2 << 30;
/// Checkpoints: about 150 bytes per 3D particle, so 100 million particles.
pub const CHECKPOINT_LIMIT: u64 = 16 << 30;

/// The bytes of the regular file at `path`, at most `limit` of them; `what` names the kind
/// of file in the error.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> io::Result<Vec<u8>> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "not a regular file (a directory, device or pipe); a {what} is read from a file"
            ),
        ));
    }
    let too_big = |size: u64| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{size} bytes is more than a {what} can need (at most {limit})"),
        )
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    // The file may grow while it is read: stop one byte past the limit.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    File::open(path)?.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = std::env::temp_dir().join(format!("mpm-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let file = dir.join("small.txt");
        std::fs::write(&file, b"0123456789").expect("write");
        assert_eq!(
            read_bounded(&file, 10, "test").expect("fits"),
            b"0123456789"
        );
        let e = read_bounded(&file, 9, "test file").expect_err("too big");
        assert!(
            e.to_string().contains("10 bytes") && e.to_string().contains("test file"),
            "{e}"
        );
        // A device that never ends, a directory, and a FIFO (which would block) are refused
        // before anything is read.
        for path in [Path::new("/dev/zero"), dir.as_path()] {
            let e = read_bounded(path, 1 << 20, "scene file").expect_err("not a file");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = read_bounded(&fifo, 1 << 20, "mesh").expect_err("a FIFO");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
