//! Files in and out. Input is read within bounds: only regular files (a FIFO would block,
//! `/dev/zero` would never end), and no more bytes than the format can need, so that a wrong
//! path fails at once with a message instead of filling memory. Output is written atomically:
//! to a hidden temporary file named after the process, then renamed into place, so that an
//! interrupted run leaves every finished file intact; the temporary file goes on any error,
//! and those of runs that were killed go at the next run's start.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

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

/// Writes `path` through `body` into a temporary file that is synced and renamed over
/// `path`; on any failure the temporary file is removed. The error says which step failed.
pub fn write_atomically(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary(path)?;
    let step = |action: &'static str| {
        move |e: io::Error| io::Error::new(e.kind(), format!("{action}: {e}"))
    };
    let file = File::create(&tmp).map_err(step("creating the temporary file"))?;
    let result = (|| {
        let mut w = BufWriter::with_capacity(1 << 20, file);
        body(&mut w).map_err(step("writing"))?;
        w.flush().map_err(step("writing"))?;
        let file = w
            .into_inner()
            .map_err(|e| step("writing")(e.into_error()))?;
        file.sync_all().map_err(step("syncing to disk"))?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(step("renaming into place"))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The hidden, per-process temporary name of `path`: concurrent writers of one path cannot
/// clobber each other's half-written files, and globs for `*.ply` do not pick it up.
fn temporary(path: &Path) -> io::Result<std::path::PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    Ok(path.with_file_name(format!(
        ".{}.{}{TEMPORARY}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// The suffix of temporary files.
const TEMPORARY: &str = ".tmp";

/// Removes from `dir` the temporary files of runs that no longer exist (killed before they
/// could clean up); returns how many. Temporary files of live processes stay.
pub fn remove_stale_temporaries(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(TEMPORARY))
            .and_then(|n| n.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The frame files (`frame_NNNNN.png` / `.ply`) in `dir` numbered `frames` or above, sorted:
/// an earlier, longer run left them, and a run of `frames` frames will not overwrite them.
pub fn frames_beyond(dir: &Path, frames: u32) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let number = name
            .strip_prefix("frame_")
            .and_then(|n| n.strip_suffix(".png").or_else(|| n.strip_suffix(".ply")))
            .and_then(|n| n.parse::<u32>().ok());
        if number.is_some_and(|n| n >= frames) {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_beyond_a_run_are_found() {
        let dir = std::env::temp_dir().join(format!("mpm-frames-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        for name in [
            "frame_00001.png",
            "frame_00003.png",
            "frame_00004.ply",
            "frame_x.png",
            "notes.txt",
        ] {
            std::fs::write(dir.join(name), b"").expect("write");
        }
        let names: Vec<String> = frames_beyond(&dir, 3)
            .expect("listing")
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["frame_00003.png", "frame_00004.ply"]);
        assert!(frames_beyond(&dir, 5).expect("listing").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

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

    #[test]
    fn writes_are_atomic_and_stale_temporaries_go() {
        let dir = std::env::temp_dir().join(format!("mpm-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let target = dir.join("frame.ply");
        write_atomically(&target, |w| w.write_all(b"done")).expect("write");
        assert_eq!(std::fs::read(&target).expect("read"), b"done");
        // A failing body leaves the old file and no temporary.
        let e = write_atomically(&target, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("disk full"))
        })
        .expect_err("the body failed");
        assert!(e.to_string().contains("writing: disk full"), "{e}");
        assert_eq!(std::fs::read(&target).expect("read"), b"done");
        // A killed run's temporary (no such process) goes; a live one's and others stay.
        let dead = dir.join(".frame.ply.4000000000.tmp");
        let live = dir.join(format!(".frame.ply.{}.tmp", std::process::id()));
        let other = dir.join("notes.tmp");
        for f in [&dead, &live, &other] {
            std::fs::write(f, b"x").expect("write");
        }
        let names = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .expect("list")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(remove_stale_temporaries(&dir).expect("clean"), 1);
        assert!(
            !dead.exists() && live.exists() && other.exists(),
            "{:?}",
            names(&dir)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
