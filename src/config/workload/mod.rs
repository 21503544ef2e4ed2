//! Workloads: what the browser loads. Names (`page10`, `page50x900`, `page50s4`, `download`,
//! `upload`…), their deterministic generation under `pages/`, and the manifest a run checks
//! bodies against.

mod content;
pub mod from_archive;
mod generate;
pub mod manifest;
pub mod names;
pub mod site_plan;

use std::path::Path;

use anyhow::Result;

pub use crate::support::digest::sha256_hex;
pub use generate::generate;
pub use manifest::{
    content_type_for, read_manifest, site_archive_dir, url_path, workload_dir, FileEntry, FileKind,
    Manifest, MANIFEST_NAME,
};
pub use names::{
    page_bytes, parse_list, shard_host, shard_server_address, Workload, WorkloadKind, DEFAULT_SEED,
    DOWNLOAD_BYTES, DOWNLOAD_RETRIES, GENERATOR_VERSION, HERO_ELEMENT, LATE_CSS_BYTES,
    LATE_CSS_IMAGE_BYTES, MAX_FILES, MAX_SHARDS, MIN_FILE_BYTES, PAGE10_BYTES, PAGE50_BYTES,
    PAGE_HOST, STANDARD_WORKLOADS, UPLOAD_BYTES,
};

/// Makes sure a workload is generated under `root` with `seed` and intact; regenerates it when
/// missing, stale (older generator, other seed) or damaged.
pub fn ensure(
    root: &Path,
    workload: &Workload,
    seed: u64,
    sites: site_plan::SiteOptions,
) -> Result<Manifest> {
    if let WorkloadKind::Site { dir } = &workload.kind {
        let archive = crate::config::site_archive::read(dir)?;
        return from_archive::manifest(workload, dir, &archive, sites);
    }
    let fresh = read_manifest(root, &workload.name).ok().filter(|m| {
        m.generator_version == GENERATOR_VERSION
            && m.seed == seed
            && m.workload == *workload
            && verify(root, m).is_ok()
    });
    let m = match fresh {
        Some(m) => m,
        None => generate(root, workload, seed)?,
    };
    // A sharded page is replayed from its archive, like a recorded site.
    match site_archive_dir(root, workload) {
        Some(dir) => {
            let archive = crate::config::site_archive::read(&dir)?;
            Ok(Manifest {
                generator_version: m.generator_version,
                seed: m.seed,
                ..from_archive::manifest(workload, &dir, &archive, sites)?
            })
        }
        None => Ok(m),
    }
}

/// The listing printed by `pagebench pages`.
pub fn listing(manifests: &[Manifest]) -> String {
    let mut rows = vec![vec![
        "workload".to_string(),
        "entry".into(),
        "files".into(),
        "css/js/img/font/bin".into(),
        "subresource bytes".into(),
        "total bytes".into(),
        "upload bytes".into(),
    ]];
    for m in manifests {
        let count = |k: FileKind| m.files.iter().filter(|f| f.kind == k).count();
        rows.push(vec![
            m.workload.name.clone(),
            m.entry.clone(),
            m.files.len().to_string(),
            format!(
                "{}/{}/{}/{}/{}",
                count(FileKind::Css),
                count(FileKind::Js),
                count(FileKind::Image),
                count(FileKind::Font),
                count(FileKind::Binary)
            ),
            m.subresource_bytes.to_string(),
            m.total_bytes().to_string(),
            m.upload_bytes
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    crate::support::textfmt::table(&rows)
}

/// Checks that a generated tree is exactly what its manifest says (every file present with
/// its size and hash; for a sharded page, its site archive). Returns the first difference.
pub fn verify(root: &Path, manifest: &Manifest) -> Result<(), String> {
    if let WorkloadKind::Sharded { shards, .. } = manifest.workload.kind {
        let dir = workload_dir(root, &manifest.workload.name);
        return generate::verify_sharded(&dir, manifest, shards);
    }
    let entry = root.join(manifest.entry.trim_start_matches('/'));
    match std::fs::metadata(&entry) {
        Ok(m) if m.len() == manifest.entry_size => {}
        Ok(m) => {
            return Err(format!(
                "{} has {} bytes, manifest says {}",
                entry.display(),
                m.len(),
                manifest.entry_size
            ))
        }
        Err(e) => return Err(format!("{}: {e}", entry.display())),
    }
    for f in &manifest.files {
        let p = root.join(f.path.trim_start_matches('/'));
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if bytes.len() as u64 != f.size {
            return Err(format!(
                "{} has {} bytes, manifest says {}",
                p.display(),
                bytes.len(),
                f.size
            ));
        }
        if sha256_hex(&bytes) != f.sha256 {
            return Err(format!("{} differs from its manifest hash", p.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        let w: Workload = "page50x900".parse().unwrap();
        assert_eq!(
            w.kind,
            WorkloadKind::Page {
                files: 50,
                file_bytes: Some(900)
            }
        );
        let w: Workload = "page20x4kb".parse().unwrap();
        assert_eq!(
            w.kind,
            WorkloadKind::Page {
                files: 20,
                file_bytes: Some(4000)
            }
        );
        let w: Workload = "latecss40".parse().unwrap();
        assert_eq!(w.kind, WorkloadKind::LateStylesheet { images: 40 });
        assert!(w.kind.is_page() && !w.kind.is_replayed());
        let w: Workload = "download".parse().unwrap();
        assert_eq!(w.kind, WorkloadKind::Download { bytes: 3_000_000 });
        let w: Workload = "upload5mb".parse().unwrap();
        assert_eq!(w.kind, WorkloadKind::Upload { bytes: 5_000_000 });
        for bad in [
            "page0",
            "pagex",
            "page10x1",
            "foo",
            "download-3",
            "page5000",
            "latecss0",
            "latecss",
        ] {
            let e = bad.parse::<Workload>().unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
        assert!(parse_list("page10,page10").is_err());
    }

    #[test]
    fn parses_sharded_names() {
        let w: Workload = "page50s4".parse().unwrap();
        assert_eq!(
            w.kind,
            WorkloadKind::Sharded {
                files: 50,
                file_bytes: None,
                shards: 4
            }
        );
        let (page, k) = w.unsharded().unwrap();
        assert_eq!((page.name.as_str(), k), ("page50", 4));
        assert_eq!(page, "page50".parse().unwrap());
        let w: Workload = "page20x4kbs16".parse().unwrap();
        assert_eq!(
            w.kind,
            WorkloadKind::Sharded {
                files: 20,
                file_bytes: Some(4000),
                shards: 16
            }
        );
        assert_eq!(w.unsharded().unwrap().0, "page20x4kb".parse().unwrap());
        assert!(w.kind.is_page());
        assert!("page10s1".parse::<Workload>().is_ok());
        assert_eq!("page10".parse::<Workload>().unwrap().unsharded(), None);
        for bad in [
            "page50s0",
            "page50s17",
            "page50s",
            "page50sx",
            "page0s2",
            "pages2",
        ] {
            let e = bad.parse::<Workload>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("pageNsK"), "{bad}: {e}");
        }
        let e = "page50s17".parse::<Workload>().unwrap_err().to_string();
        assert!(e.contains("host count after `s` must be 1 to 16"), "{e}");
        assert_eq!(shard_host(1), "pagebench.test");
        assert_eq!(shard_host(3), "s3.pagebench.test");
    }

    #[test]
    fn page_bytes_follow_the_study() {
        assert_eq!(page_bytes(10), 80_000);
        assert_eq!(page_bytes(50), 421_000);
        assert!(page_bytes(20) > 80_000 && page_bytes(20) < page_bytes(30));
        assert_eq!(page_bytes(1), 3275);
        assert!(page_bytes(2) >= 2000);
    }
}
