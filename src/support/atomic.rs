//! Atomic publishing of files and directory trees: a reader (a report, a resumed matrix, a
//! server serving a workload) sees the old version or the new one, never a half-written file,
//! and after a crash the new one is either complete on disk or absent. Every results, record,
//! meta, report and chart file is written through [`write_file`]; scratch files need not be.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A sibling of `path` for staging its new version: same directory (so the rename cannot cross
/// file systems), hidden, and private to this process (two writers never share one).
fn staging_sibling(path: &Path, what: &str) -> Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    Ok(path.with_file_name(format!(
        ".{}.{what}-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Writes a file atomically: a temporary sibling, synced, renamed over `path`, then the
/// directory synced so the rename itself survives a crash.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = staging_sibling(path, "tmp")?;
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot rename to {}", path.display()));
    }
    sync_parent(path)
}

/// Makes a directory's entries (new files, renames) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

fn sync_parent(path: &Path) -> Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
}

/// A directory tree being built next to where it will be published; removed if dropped
/// unpublished (an error half-way leaves nothing behind).
pub struct StagedDir {
    staging: PathBuf,
    target: PathBuf,
    published: bool,
}

impl StagedDir {
    /// Starts a fresh (empty) staging directory for `target`, replacing any a killed process
    /// with the same PID left.
    pub fn new(target: &Path) -> Result<StagedDir> {
        let staging = staging_sibling(target, "tmp")?;
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .with_context(|| format!("cannot create {}", staging.display()))?;
        Ok(StagedDir {
            staging,
            target: target.to_path_buf(),
            published: false,
        })
    }

    /// Where to build the tree.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Moves the tree to its target. An existing target is swapped out in one step
    /// (`renameat2(RENAME_EXCHANGE)`) and then removed, so readers never find it missing; on
    /// file systems without the exchange it is removed first.
    pub fn publish(mut self) -> Result<()> {
        let cannot = || format!("cannot move the new tree to {}", self.target.display());
        if self.target.exists() {
            match exchange(&self.staging, &self.target) {
                Ok(()) => {
                    // The old tree now sits at the staging path: Drop removes it.
                    sync_parent(&self.target)?;
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    std::fs::remove_dir_all(&self.target)
                        .with_context(|| format!("cannot replace {}", self.target.display()))?;
                }
                Err(e) => return Err(e).with_context(cannot),
            }
        }
        std::fs::rename(&self.staging, &self.target).with_context(cannot)?;
        self.published = true;
        sync_parent(&self.target)
    }
}

impl Drop for StagedDir {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// Swaps two existing paths atomically.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths; AT_FDCWD resolves them like open() does.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_and_replaces_a_file_leaving_no_staging_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("summary.csv");
        write_file(&p, b"one").unwrap();
        write_file(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // Two files of one stem (report.md, report.html) stage under distinct names.
        write_file(&dir.path().join("summary.md"), b"md").unwrap();
        assert_eq!(names(dir.path()), ["summary.csv", "summary.md"]);
    }

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_old_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("meta.json");
        write_file(&p, b"old").unwrap();
        // The target is a directory now: the rename fails.
        let d = dir.path().join("charts");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("x"), "x").unwrap();
        let e = format!("{:#}", write_file(&d, b"new").unwrap_err());
        assert!(e.contains("charts"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(names(dir.path()), ["charts", "meta.json"]);
        let e = format!(
            "{:#}",
            write_file(&dir.path().join("missing/x.json"), b"x").unwrap_err()
        );
        assert!(e.contains("missing"), "{e}");
    }

    #[test]
    fn publishes_a_tree_new_or_replacing_the_old_one() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("page10");
        let s = StagedDir::new(&target).unwrap();
        std::fs::write(s.path().join("index.html"), "v1").unwrap();
        s.publish().unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("index.html")).unwrap(),
            "v1"
        );
        let s = StagedDir::new(&target).unwrap();
        std::fs::write(s.path().join("other.html"), "v2").unwrap();
        s.publish().unwrap();
        assert_eq!(names(&target), ["other.html"]);
        assert_eq!(names(root.path()), ["page10"]);
    }

    #[test]
    fn an_unpublished_tree_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("page10");
        {
            let s = StagedDir::new(&target).unwrap();
            std::fs::write(s.path().join("index.html"), "half").unwrap();
        }
        assert!(names(root.path()).is_empty());
    }
}
