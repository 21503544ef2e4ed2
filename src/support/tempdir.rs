//! Scratch directories (browser profiles, the testbed's certificate and server configs, the
//! server benchmark's body): `<system temp>/pagebench-<kind>-<pid>-<random>`, removed when the
//! [`TempDir`] drops. The owner's PID in the name lets `link::cleanup` remove the ones a
//! killed process (SIGKILL runs no destructor) left behind.

use anyhow::{Context, Result};
pub use tempfile::TempDir;

const PREFIX: &str = "pagebench-";

/// Creates a fresh private directory `pagebench-<kind>-<pid>-<random>` under the system temp
/// dir. `kind` is a lowercase word or words joined by `-` (e.g. `browser`, `bench-server`).
pub fn create(kind: &str) -> Result<TempDir> {
    debug_assert!(
        !kind.is_empty() && kind.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
        "temp dir kind {kind:?}"
    );
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{kind}-{}-", std::process::id()))
        .tempdir()
        .with_context(|| {
            format!(
                "cannot create a temporary directory under {}",
                std::env::temp_dir().display()
            )
        })
}

/// The kind and the owner's PID of a directory name [`create`] made (also the names of
/// earlier versions, which used the same `pagebench-<kind>-<pid>-<suffix>` shape).
pub fn parse_name(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix(PREFIX)?;
    // The random suffix has no `-`; the kind may.
    let mut parts = rest.rsplitn(3, '-');
    let suffix = parts.next()?;
    let pid = parts.next()?.parse().ok()?;
    let kind = parts.next()?;
    let word = |c: char| c.is_ascii_lowercase() || c == '-';
    (!suffix.is_empty() && !kind.is_empty() && kind.chars().all(word)).then_some((kind, pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_kind_and_owner_and_go_on_drop() {
        let dir = create("bench-server").unwrap();
        let path = dir.path().to_path_buf();
        assert_eq!(path.parent().unwrap(), std::env::temp_dir());
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_name(name), Some(("bench-server", std::process::id())));
        let other = create("bench-server").unwrap();
        assert_ne!(other.path(), path);
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn parses_only_pagebench_names() {
        assert_eq!(
            parse_name("pagebench-browser-4242-1a2b3c0"),
            Some(("browser", 4242))
        );
        assert_eq!(
            parse_name("pagebench-testbed-17-Xy9Qz1"),
            Some(("testbed", 17))
        );
        assert_eq!(parse_name("pagebench-browser-4242-"), None);
        assert_eq!(parse_name("pagebench-bench-server-4242"), None);
        assert_eq!(parse_name("pagebench--4242-abc"), None);
        assert_eq!(parse_name("pagebench-Browser-4242-abc"), None);
        assert_eq!(parse_name("other-browser-4242-abc"), None);
        assert_eq!(parse_name("pagebench-browser-x-abc"), None);
    }
}
