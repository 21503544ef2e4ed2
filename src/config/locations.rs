//! Where pagebench finds its inputs when no flag says. Inside a pagebench checkout (the working
//! directory holds pagebench's own `Cargo.toml`) the repository's `profiles/` and `pages/`, as
//! always; anywhere else the profiles compiled into the binary and workloads generated into the
//! user's cache directory — so an installed binary works from any directory. A checkout is
//! recognised by its manifest, not by a `pages/` directory, which many web projects have.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::config::profile::ProfileSource;

/// Whether `dir` is the root of a pagebench checkout.
pub fn is_checkout(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
        return false;
    };
    let Ok(manifest) = text.parse::<toml::Table>() else {
        return false;
    };
    manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        == Some("pagebench")
}

fn cwd_is_checkout() -> bool {
    std::env::current_dir().is_ok_and(|d| is_checkout(&d))
}

/// The profiles `--profiles-dir` names, else `profiles/` in a checkout, else the built-in set.
pub fn profile_source(flag: Option<&Path>) -> ProfileSource {
    profile_source_in(flag, cwd_is_checkout())
}

fn profile_source_in(flag: Option<&Path>, in_checkout: bool) -> ProfileSource {
    match flag {
        Some(dir) => ProfileSource::Dir(dir.to_path_buf()),
        None if in_checkout => ProfileSource::Dir(PathBuf::from("profiles")),
        None => ProfileSource::BuiltIn,
    }
}

/// Where workloads of `seed` are generated: `--pages`, else `pages/` in a checkout, else
/// `$XDG_CACHE_HOME/pagebench/pages/<seed>` (or `~/.cache/…`).
pub fn pages_root(flag: Option<&Path>, seed: u64) -> Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    if cwd_is_checkout() {
        return Ok(PathBuf::from("pages"));
    }
    cache_pages_root(
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
        seed,
    )
}

/// The cache directory's pages of `seed`, from the values of `XDG_CACHE_HOME` and `HOME`
/// (a relative or empty `XDG_CACHE_HOME` is ignored, as the XDG specification says).
pub fn cache_pages_root(
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
    seed: u64,
) -> Result<PathBuf> {
    fn absolute(v: Option<&OsStr>) -> Option<&Path> {
        v.map(Path::new).filter(|p| p.is_absolute())
    }
    let cache = match (absolute(xdg_cache_home), absolute(home)) {
        (Some(xdg), _) => xdg.to_path_buf(),
        (None, Some(home)) => home.join(".cache"),
        (None, None) => bail!(
            "no cache directory for the generated pages: neither XDG_CACHE_HOME nor HOME is set; pass --pages DIR"
        ),
    };
    Ok(cache.join("pagebench").join("pages").join(seed.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_go_to_the_xdg_cache_then_home_then_an_error_naming_the_flag() {
        let xdg = OsStr::new("/x/cache");
        let home = OsStr::new("/home/u");
        assert_eq!(
            cache_pages_root(Some(xdg), Some(home), 7).unwrap(),
            Path::new("/x/cache/pagebench/pages/7")
        );
        assert_eq!(
            cache_pages_root(None, Some(home), 1).unwrap(),
            Path::new("/home/u/.cache/pagebench/pages/1")
        );
        // Relative or empty XDG_CACHE_HOME: ignored.
        for bad in ["", "rel/cache"] {
            assert_eq!(
                cache_pages_root(Some(OsStr::new(bad)), Some(home), 1).unwrap(),
                Path::new("/home/u/.cache/pagebench/pages/1")
            );
        }
        let e = cache_pages_root(None, None, 1).unwrap_err().to_string();
        assert!(e.contains("XDG_CACHE_HOME") && e.contains("--pages"), "{e}");
    }

    #[test]
    fn a_checkout_is_known_by_its_manifest() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert!(is_checkout(repo));
        let other = tempfile::tempdir().unwrap();
        assert!(!is_checkout(other.path()));
        std::fs::create_dir(other.path().join("pages")).unwrap();
        std::fs::write(
            other.path().join("Cargo.toml"),
            "[package]\nname = \"site\"\n",
        )
        .unwrap();
        assert!(
            !is_checkout(other.path()),
            "another crate with a pages/ dir"
        );
    }

    #[test]
    fn profiles_come_from_the_flag_the_checkout_or_the_binary() {
        let d = Path::new("/p");
        assert_eq!(
            profile_source_in(Some(d), true),
            ProfileSource::Dir(d.into())
        );
        assert_eq!(
            profile_source_in(None, true),
            ProfileSource::Dir("profiles".into())
        );
        assert_eq!(profile_source_in(None, false), ProfileSource::BuiltIn);
    }
}
