//! A folder of a test's own under the system's temporary folder, removed when the test ends
//! (passed or failed), so that test runs leave nothing behind.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub struct Scratch(PathBuf);

impl Scratch {
    /// An empty folder `mpm-{suite}-{name}-{pid}` (whatever an earlier process of the same id
    /// left there removed first).
    pub fn new(suite: &str, name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mpm-{suite}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
