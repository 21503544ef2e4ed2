//! From a request target to a file below the workload root, and never outside it.
//!
//! Defence in depth: suspicious targets are refused before touching the file system (dot
//! segments, encoded slashes or backslashes, NUL), and whatever is left is canonicalised (which
//! resolves symlinks) and must still lie below the canonical root.

use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;

/// Where a request target leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// A regular file below the root (canonical path).
    File(PathBuf),
    /// Nothing servable there (including anything that resolves outside the root).
    NotFound,
    /// A target no honest client sends; the reason is for the log.
    BadRequest(&'static str),
}

/// Resolves `target` (the request's path, possibly with a query) below `root`, which must be
/// canonical (see [`canonical_root`]). A directory means its `index.html`.
pub fn resolve(root: &Path, target: &str) -> Resolved {
    let path = target.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Resolved::BadRequest("target is not an absolute path");
    }
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f") || lower.contains("%5c") {
        return Resolved::BadRequest("encoded slash or backslash");
    }
    let decoded = percent_decode_str(path).collect::<Vec<u8>>();
    if decoded.contains(&0) {
        return Resolved::BadRequest("NUL in path");
    }
    if decoded.contains(&b'\\') {
        return Resolved::BadRequest("backslash in path");
    }
    let Ok(decoded) = String::from_utf8(decoded) else {
        return Resolved::BadRequest("path is not UTF-8");
    };
    let mut rel = PathBuf::new();
    for seg in decoded.split('/') {
        match seg {
            "" => continue,
            "." | ".." => return Resolved::BadRequest("dot segment in path"),
            s => rel.push(s),
        }
    }
    // `rel` is now relative and free of `..`: joining cannot climb, only symlinks can.
    let mut candidate = root.join(&rel);
    if candidate.is_dir() {
        candidate.push("index.html");
    }
    let Ok(canonical) = candidate.canonicalize() else {
        return Resolved::NotFound;
    };
    if !canonical.starts_with(root) {
        tracing::warn!("{target:?} resolves outside the root (symlink?): refused");
        return Resolved::NotFound;
    }
    match std::fs::metadata(&canonical) {
        Ok(m) if m.is_file() => Resolved::File(canonical),
        _ => Resolved::NotFound,
    }
}

/// The canonical form of a workload root, with a clear error when it is missing.
pub fn canonical_root(root: &Path) -> anyhow::Result<PathBuf> {
    let c = root.canonicalize().map_err(|e| {
        anyhow::anyhow!(
            "cannot serve {}: {e} (generate the workloads with `pagebench pages --pages {}`)",
            root.display(),
            root.display()
        )
    })?;
    if !c.is_dir() {
        anyhow::bail!("cannot serve {}: not a directory", root.display());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// base/secret.txt (outside), base/root/{index.html, a/b.css, link-out -> ../secret.txt,
    /// dir-out -> .., link-in -> a/b.css}
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(base.path().join("secret.txt"), "secret").unwrap();
        std::fs::write(root.join("index.html"), "home").unwrap();
        std::fs::write(root.join("a/b.css"), "css").unwrap();
        std::os::unix::fs::symlink("../secret.txt", root.join("link-out")).unwrap();
        std::os::unix::fs::symlink("..", root.join("dir-out")).unwrap();
        std::os::unix::fs::symlink("a/b.css", root.join("link-in")).unwrap();
        let root = canonical_root(&root).unwrap();
        (base, root)
    }

    #[test]
    fn serves_files_and_directory_indexes() {
        let (_b, root) = tree();
        assert_eq!(
            resolve(&root, "/a/b.css"),
            Resolved::File(root.join("a/b.css"))
        );
        assert_eq!(
            resolve(&root, "/a/b.css?x=1"),
            Resolved::File(root.join("a/b.css"))
        );
        assert_eq!(
            resolve(&root, "/a//b.css"),
            Resolved::File(root.join("a/b.css"))
        );
        assert_eq!(
            resolve(&root, "/%61/b.css"),
            Resolved::File(root.join("a/b.css"))
        );
        assert_eq!(resolve(&root, "/"), Resolved::File(root.join("index.html")));
        assert_eq!(
            resolve(&root, "/link-in"),
            Resolved::File(root.join("a/b.css"))
        );
        assert_eq!(resolve(&root, "/a"), Resolved::NotFound);
        assert_eq!(resolve(&root, "/nope.js"), Resolved::NotFound);
    }

    #[test]
    fn never_leaves_the_root() {
        let (_b, root) = tree();
        for t in [
            "/../secret.txt",
            "/a/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E/secret.txt",
            "/.%2e/secret.txt",
            "/..%2fsecret.txt",
            "/%2e%2e%2fsecret.txt",
            "/..\\secret.txt",
            "/..%5csecret.txt",
            "/a/b.css%00.png",
            "/./index.html",
            "secret.txt",
            "../secret.txt",
        ] {
            assert!(
                matches!(resolve(&root, t), Resolved::BadRequest(_)),
                "{t:?} must be refused, got {:?}",
                resolve(&root, t)
            );
        }
        // Symlinks out of the tree and absolute-looking paths stay inside or are not found.
        for t in ["/link-out", "/dir-out/secret.txt"] {
            assert_eq!(resolve(&root, t), Resolved::NotFound, "{t:?}");
        }
        let secret = root.parent().unwrap().join("secret.txt");
        let abs = format!("/{}", secret.display());
        assert_eq!(resolve(&root, &abs), Resolved::NotFound);
        assert_eq!(resolve(&root, "//etc/passwd"), Resolved::NotFound);
    }

    #[test]
    fn missing_root_is_a_clear_error() {
        let err = canonical_root(Path::new("/nonexistent/pages"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pagebench pages"), "{err}");
    }
}
