//! A workload's manifest: every file it serves (`FileEntry`: path, kind, size, hash, status),
//! where it lives on disk, how it is read back and verified.

use super::names::{Workload, WorkloadKind};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a generated file is, for the content type and for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    Html,
    Css,
    Js,
    Image,
    Font,
    Binary,
}

impl FileKind {
    pub fn content_type(self) -> &'static str {
        match self {
            FileKind::Html => "text/html; charset=utf-8",
            FileKind::Css => "text/css; charset=utf-8",
            FileKind::Js => "text/javascript; charset=utf-8",
            FileKind::Image => "image/png",
            FileKind::Font => "font/ttf",
            FileKind::Binary => "application/octet-stream",
        }
    }
}

/// The content type a server should send for a file path, by extension.
pub fn content_type_for(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => FileKind::Html.content_type(),
        "css" => FileKind::Css.content_type(),
        "js" | "mjs" => FileKind::Js.content_type(),
        "png" => FileKind::Image.content_type(),
        "ttf" => FileKind::Font.content_type(),
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "jpg" | "jpeg" => "image/jpeg",
        "woff2" => "font/woff2",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => FileKind::Binary.content_type(),
    }
}

/// One generated file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// URL path, e.g. `/page10/img/i03.png`; also the path below `pages/`.
    pub path: String,
    pub kind: FileKind,
    pub content_type: String,
    /// Exact body size in bytes.
    pub size: u64,
    pub sha256: String,
    /// The status it answers with (200 for generated files).
    #[serde(default = "ok_status", skip_serializing_if = "is_ok_status")]
    pub status: u16,
    /// Other names the browser may give it (a redirect's first URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

fn ok_status() -> u16 {
    200
}

fn is_ok_status(s: &u16) -> bool {
    *s == 200
}

/// Everything a run needs to know about a generated workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub workload: Workload,
    pub generator_version: u32,
    pub seed: u64,
    /// URL path of the page to navigate to.
    pub entry: String,
    pub entry_size: u64,
    /// The files the page loads (for a download: the downloaded file), each exactly once.
    pub files: Vec<FileEntry>,
    /// Sum of `files` sizes.
    pub subresource_bytes: u64,
    /// For an upload: bytes the page POSTs to `/upload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_bytes: Option<u64>,
    /// For a site archive: its origins and how it is replayed (`files` are then keyed by URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<crate::config::workload::site_plan::SitePlan>,
}

#[cfg(test)]
impl Manifest {
    /// A page10 manifest with no files: the base of unit tests that need one, not its bytes.
    pub fn empty_page10() -> Manifest {
        Manifest {
            workload: "page10".parse().unwrap(),
            generator_version: 1,
            seed: 1,
            entry: "/page10/index.html".into(),
            entry_size: 1,
            subresource_bytes: 0,
            files: vec![],
            upload_bytes: None,
            site: None,
        }
    }
}

impl Manifest {
    pub fn total_bytes(&self) -> u64 {
        self.entry_size + self.subresource_bytes
    }

    /// The file named `key` (see [`Manifest::key`]), under its path or an alias.
    pub fn file(&self, key: &str) -> Option<&FileEntry> {
        self.files
            .iter()
            .find(|f| f.path == key || f.aliases.iter().any(|a| a == key))
    }

    /// How validation names the resource at `url`: its path for a generated workload (one
    /// origin), the URL without fragment for a site.
    pub fn key(&self, url: &str) -> String {
        match self.site {
            Some(_) => crate::config::workload::site_plan::url_key(url),
            None => url_path(url),
        }
    }
}

pub const MANIFEST_NAME: &str = "manifest.json";

/// The directory of a workload below the pages root.
pub fn workload_dir(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

/// The site archive a workload is served from, if it is one (a sharded page: `site.json` and
/// `bodies/` in its directory, beside its manifest); `None`: a tree served by path.
pub fn site_archive_dir(root: &Path, workload: &Workload) -> Option<PathBuf> {
    matches!(workload.kind, WorkloadKind::Sharded { .. })
        .then(|| workload_dir(root, &workload.name))
}

/// Reads a workload's manifest.
pub fn read_manifest(root: &Path, name: &str) -> Result<Manifest> {
    let path = workload_dir(root, name).join(MANIFEST_NAME);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}: run `pagebench pages`", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid manifest", path.display()))
}

/// `https://host:port/a/b?q` → `/a/b`.
pub fn url_path(url: &str) -> String {
    let after_scheme = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let path = after_scheme
        .find('/')
        .map(|i| &after_scheme[i..])
        .unwrap_or("/");
    path.split(['?', '#']).next().unwrap_or("/").to_string()
}
