//! Writes a workload's tree (`pages/<name>/…`) and its manifest, deterministically: the same
//! name and seed always give the same bytes. A sharded page (`pageNsK`) is written as a site
//! archive of pageN's very files on K hosts, beside its manifest.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

use super::content;
use super::{
    page_bytes, sha256_hex, workload_dir, FileEntry, FileKind, Manifest, Workload, WorkloadKind,
    GENERATOR_VERSION, MANIFEST_NAME,
};
use crate::config::site_archive;

/// A file to write, before hashing.
struct Planned {
    rel: String,
    kind: FileKind,
    bytes: Vec<u8>,
    /// The page's hero image (`elementtiming="hero"`, shown first at its own size).
    hero: bool,
}

/// Each workload gets its own RNG stream, derived from the seed and its name.
fn rng_for(seed: u64, name: &str) -> ChaCha8Rng {
    let digest = Sha256::new()
        .chain_update(seed.to_le_bytes())
        .chain_update(name.as_bytes())
        .finalize();
    let mut key = [0u8; 32];
    key.copy_from_slice(&digest);
    ChaCha8Rng::from_seed(key)
}

/// Generates `workload` below `root` (replacing any previous tree of that name) and returns its
/// manifest. The tree is written to a temporary sibling and renamed into place, so a reader never
/// sees half a tree.
pub fn generate(root: &Path, workload: &Workload, seed: u64) -> Result<Manifest> {
    if let Some((page, shards)) = workload.unsharded() {
        return generate_sharded(root, workload, &page, shards, seed);
    }
    let mut rng = rng_for(seed, &workload.name);
    let (entry_html, files, upload_bytes) = match workload.kind.clone() {
        WorkloadKind::Page { files, file_bytes } => {
            let planned = plan_page(&mut rng, files, file_bytes);
            let html = page_html(&workload.name, &planned, |_, f| f.rel.clone());
            (html, planned, None)
        }
        WorkloadKind::LateStylesheet { images } => {
            let planned = plan_late_stylesheet(&mut rng, images);
            (
                late_stylesheet_html(&workload.name, &planned),
                planned,
                None,
            )
        }
        WorkloadKind::Site { dir } => bail!(
            "{}: a site archive is recorded or imported, not generated",
            dir.display()
        ),
        WorkloadKind::Sharded { .. } => unreachable!("sharded pages are generated above"),
        WorkloadKind::Download { bytes } => {
            let body = content::binary(&mut rng, bytes as usize);
            let hash = sha256_hex(&body);
            let html = download_html(&workload.name, bytes, &hash);
            let file = Planned {
                rel: "download.bin".into(),
                kind: FileKind::Binary,
                bytes: body,
                hero: false,
            };
            (html, vec![file], None)
        }
        WorkloadKind::Upload { bytes } => (
            upload_html(&workload.name, bytes, seed),
            vec![],
            Some(bytes),
        ),
    };

    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let final_dir = workload_dir(root, &workload.name);
    // Built beside its final place and swapped in whole: a server never serves half a tree.
    let staged = crate::support::atomic::StagedDir::new(&final_dir)?;
    let tmp_dir = staged.path();
    let url_prefix = format!("/{}/", workload.name);
    let mut entries = Vec::new();
    for f in &files {
        let path = tmp_dir.join(&f.rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, &f.bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
        entries.push(FileEntry {
            path: format!("{url_prefix}{}", f.rel),
            kind: f.kind,
            content_type: f.kind.content_type().to_string(),
            size: f.bytes.len() as u64,
            sha256: sha256_hex(&f.bytes),
            status: 200,
            aliases: Vec::new(),
        });
    }
    let entry_path = tmp_dir.join("index.html");
    std::fs::write(&entry_path, entry_html.as_bytes())
        .with_context(|| format!("cannot write {}", entry_path.display()))?;
    let manifest = Manifest {
        workload: workload.clone(),
        generator_version: GENERATOR_VERSION,
        seed,
        entry: format!("{url_prefix}index.html"),
        entry_size: entry_html.len() as u64,
        subresource_bytes: entries.iter().map(|e| e.size).sum(),
        files: entries,
        upload_bytes,
        site: None,
    };
    let json = serde_json::to_string_pretty(&manifest)? + "\n";
    std::fs::write(tmp_dir.join(MANIFEST_NAME), json)?;
    staged.publish()?;
    Ok(manifest)
}

/// The host (1-based shard) of each of a sharded page's files, in the page's file order: file
/// `i` on host `(i mod K) + 1`, except the font, which the first stylesheet loads by a relative
/// URL (its bytes are pageN's): it goes with that stylesheet.
fn shard_assignment(files: &[Planned], shards: u32) -> Vec<u32> {
    let mut hosts: Vec<u32> = (0..files.len())
        .map(|i| (i as u32 % shards.max(1)) + 1)
        .collect();
    let first_css = files.iter().position(|f| f.kind == FileKind::Css);
    if let Some(css) = first_css {
        for (i, f) in files.iter().enumerate() {
            if f.kind == FileKind::Font {
                hosts[i] = hosts[css];
            }
        }
    }
    hosts
}

/// A file's URL on its shard host.
fn shard_url(host: u32, url_path: &str) -> String {
    format!("https://{}{url_path}", super::shard_host(host))
}

/// A generated response: 200 with the headers pagebench's server sends for pageN, body as is.
fn generated_entry(url: String, content_type: &str, host: u32, size: usize) -> site_archive::Entry {
    site_archive::Entry {
        method: "GET".into(),
        url,
        status: 200,
        headers: vec![
            ("content-type".into(), content_type.into()),
            ("cache-control".into(), "no-store".into()),
            // Shard hosts are other origins than the page's: a font from one needs CORS.
            ("access-control-allow-origin".into(), "*".into()),
        ],
        body: None,
        content_encoding: None,
        decoded_size: size as u64,
        server_address: Some(super::shard_server_address(host)),
        protocol: None,
        timings: site_archive::Timings::default(),
        missing: None,
        browser_initiated: false,
        connection: None,
    }
}

/// Writes a sharded page: `page`'s files (its generator stream: the same bytes) as a site
/// archive whose page references each file by its absolute URL on its host, and the manifest.
fn generate_sharded(
    root: &Path,
    workload: &Workload,
    page: &Workload,
    shards: u32,
    seed: u64,
) -> Result<Manifest> {
    let WorkloadKind::Page { files, file_bytes } = page.kind else {
        unreachable!("Workload::unsharded gives a page")
    };
    let planned = plan_page(&mut rng_for(seed, &page.name), files, file_bytes);
    let hosts = shard_assignment(&planned, shards);
    let url_prefix = format!("/{}/", workload.name);
    let url_path = |f: &Planned| format!("{url_prefix}{}", f.rel);
    let html = page_html(&workload.name, &planned, |i, f| {
        shard_url(hosts[i], &url_path(f))
    });
    let entry = format!("{url_prefix}index.html");
    let page_url = shard_url(1, &entry);

    let mut archive = site_archive::Builder::default();
    archive.push(
        generated_entry(
            page_url.clone(),
            FileKind::Html.content_type(),
            1,
            html.len(),
        ),
        Some(html.clone().into_bytes()),
    );
    let mut entries = Vec::new();
    for (f, host) in planned.iter().zip(&hosts) {
        let content_type = f.kind.content_type();
        archive.push(
            generated_entry(
                shard_url(*host, &url_path(f)),
                content_type,
                *host,
                f.bytes.len(),
            ),
            Some(f.bytes.clone()),
        );
        entries.push(FileEntry {
            path: url_path(f),
            kind: f.kind,
            content_type: content_type.to_string(),
            size: f.bytes.len() as u64,
            sha256: sha256_hex(&f.bytes),
            status: 200,
            aliases: Vec::new(),
        });
    }
    let manifest = Manifest {
        workload: workload.clone(),
        generator_version: GENERATOR_VERSION,
        seed,
        entry,
        entry_size: html.len() as u64,
        subresource_bytes: entries.iter().map(|e| e.size).sum(),
        files: entries,
        upload_bytes: None,
        site: None,
    };

    std::fs::create_dir_all(root).with_context(|| format!("cannot create {}", root.display()))?;
    let staged = crate::support::atomic::StagedDir::new(&workload_dir(root, &workload.name))?;
    let source = site_archive::Source {
        kind: site_archive::SOURCE_GENERATED.into(),
        from: format!(
            "pagebench pages {}: {}'s files (seed {seed}, generator {GENERATOR_VERSION}) on {shards} hosts",
            workload.name, page.name
        ),
        creator: "pagebench".into(),
        started: None,
        browser_confinement: None,
        load_ms: None,
    };
    archive.write(staged.path(), source, page_url)?;
    let json = serde_json::to_string_pretty(&manifest)? + "\n";
    std::fs::write(staged.path().join(MANIFEST_NAME), json)?;
    staged.publish()?;
    Ok(manifest)
}

/// Checks a sharded page's archive against its manifest: the archive reads back whole (every
/// body at its address), the page is first, then each file in order at its host's URL with the
/// manifest's bytes.
pub(super) fn verify_sharded(dir: &Path, manifest: &Manifest, shards: u32) -> Result<(), String> {
    let archive = site_archive::read(dir).map_err(|e| format!("{e:#}"))?;
    let page_url = shard_url(1, &manifest.entry);
    if archive.page_url != page_url || archive.entries.len() != manifest.files.len() + 1 {
        return Err(format!(
            "{}: not the archive of {} ({} entries, page {})",
            dir.join(site_archive::MANIFEST).display(),
            manifest.workload.name,
            archive.entries.len(),
            archive.page_url
        ));
    }
    let html = &archive.entries[0];
    if html.url != page_url || html.body.as_ref().map(|b| b.size) != Some(manifest.entry_size) {
        return Err(format!("{page_url}: not the manifest's page"));
    }
    // The font follows its stylesheet; every other file is where the round robin puts it.
    let kinds: Vec<Planned> = manifest
        .files
        .iter()
        .map(|f| Planned {
            rel: String::new(),
            kind: f.kind,
            bytes: Vec::new(),
            hero: false,
        })
        .collect();
    let hosts = shard_assignment(&kinds, shards);
    for ((f, e), host) in manifest.files.iter().zip(&archive.entries[1..]).zip(hosts) {
        let url = shard_url(host, &f.path);
        let same = e
            .body
            .as_ref()
            .is_some_and(|b| b.sha256 == f.sha256 && b.size == f.size);
        if e.url != url || !same {
            return Err(format!(
                "{url}: the archive's entry is {} with other bytes",
                e.url
            ));
        }
    }
    Ok(())
}

/// How many files of each kind a page of `n` files has: one font (from 5 files on), ~10 %
/// stylesheets, ~16 % scripts, the rest images — roughly the mix of a real page.
fn mix(n: u32) -> Vec<FileKind> {
    let mut kinds = Vec::new();
    if n >= 5 {
        kinds.push(FileKind::Font);
    }
    let css = ((n as f64 * 0.10).round() as u32)
        .max(1)
        .min(n - kinds.len() as u32);
    kinds.extend(std::iter::repeat_n(FileKind::Css, css as usize));
    let left = n - kinds.len() as u32;
    let js = ((n as f64 * 0.16).round() as u32).max(1).min(left);
    kinds.extend(std::iter::repeat_n(FileKind::Js, js as usize));
    let left = n - kinds.len() as u32;
    kinds.extend(std::iter::repeat_n(FileKind::Image, left as usize));
    kinds
}

/// Sizes that sum exactly to `total`, drawn around the kind's typical share, at least `min`.
fn split_sizes(rng: &mut impl Rng, kinds: &[FileKind], total: u64, min: u64) -> Vec<u64> {
    let weights: Vec<f64> = kinds
        .iter()
        .map(|k| {
            let typical = match k {
                FileKind::Image => 1.3,
                FileKind::Js => 1.0,
                FileKind::Css => 0.6,
                _ => 1.0,
            };
            // Log-normal spread: a few big files, many smaller ones.
            let z: f64 = (0..6).map(|_| rng.random::<f64>()).sum::<f64>() - 3.0;
            typical * (0.6 * z).exp()
        })
        .collect();
    let sum: f64 = weights.iter().sum();
    let spare = total.saturating_sub(min * kinds.len() as u64) as f64;
    let mut sizes: Vec<u64> = weights
        .iter()
        .map(|w| min + (spare * w / sum).floor() as u64)
        .collect();
    let assigned: u64 = sizes.iter().sum();
    let biggest = (0..sizes.len()).max_by_key(|&i| sizes[i]).unwrap_or(0);
    sizes[biggest] += total - assigned;
    sizes
}

fn plan_page(rng: &mut ChaCha8Rng, n: u32, file_bytes: Option<u64>) -> Vec<Planned> {
    let (kinds, sizes) = match file_bytes {
        // Many streams, few bytes: every file an image of exactly `size`.
        Some(size) => (vec![FileKind::Image; n as usize], vec![size; n as usize]),
        None => {
            let kinds = mix(n);
            let font = kinds.contains(&FileKind::Font);
            let rest_kinds: Vec<FileKind> = kinds
                .iter()
                .copied()
                .filter(|k| *k != FileKind::Font)
                .collect();
            let font_len = if font {
                content::FONT_TTF.len() as u64
            } else {
                0
            };
            let total = page_bytes(n)
                .saturating_sub(font_len)
                .max(rest_kinds.len() as u64 * 700);
            let mut sizes = split_sizes(rng, &rest_kinds, total, 700);
            if font {
                sizes.insert(0, font_len);
            }
            (kinds, sizes)
        }
    };
    let has_font = kinds.contains(&FileKind::Font);
    // The hero is the smallest image with room for the whole picture (the first of equals), else
    // the largest: a small file is among the first to arrive on any protocol, so the hero
    // paints before the load event instead of being the last file a multiplexed connection
    // finishes.
    let images: Vec<usize> = (0..kinds.len())
        .filter(|&i| kinds[i] == FileKind::Image)
        .collect();
    let room = content::hero_min_bytes() as u64;
    let hero = images
        .iter()
        .copied()
        .filter(|&i| sizes[i] >= room)
        .min_by_key(|&i| sizes[i])
        .or_else(|| images.iter().copied().rev().max_by_key(|&i| sizes[i]));
    let mut counters = [0usize; 3];
    let mut out = Vec::new();
    for (index, (kind, size)) in kinds.iter().zip(sizes).enumerate() {
        let size = size as usize;
        let planned = match kind {
            FileKind::Font => Planned {
                rel: "font/pb-sans.ttf".into(),
                kind: *kind,
                bytes: content::FONT_TTF.to_vec(),
                hero: false,
            },
            FileKind::Css => {
                counters[0] += 1;
                let i = counters[0];
                let font_url = (i == 1 && has_font).then_some("../font/pb-sans.ttf");
                Planned {
                    rel: format!("css/style{i:02}.css"),
                    kind: *kind,
                    bytes: content::css(rng, size, i, font_url),
                    hero: false,
                }
            }
            FileKind::Js => {
                counters[1] += 1;
                let i = counters[1];
                Planned {
                    rel: format!("js/script{i:02}.js"),
                    kind: *kind,
                    bytes: content::js(rng, size, i),
                    hero: false,
                }
            }
            _ => {
                counters[2] += 1;
                let i = counters[2];
                let is_hero = hero == Some(index);
                let picture = is_hero.then(|| content::hero_png(rng, size)).flatten();
                Planned {
                    rel: format!("img/image{i:03}.png"),
                    kind: FileKind::Image,
                    bytes: picture.unwrap_or_else(|| content::png(rng, size)),
                    hero: is_hero,
                }
            }
        };
        out.push(planned);
    }
    out
}

/// A `latecssN` page's files: the small stylesheet that imports the late one, the late one,
/// the images.
fn plan_late_stylesheet(rng: &mut ChaCha8Rng, images: u32) -> Vec<Planned> {
    let mut out = vec![
        Planned {
            rel: "css/first.css".into(),
            kind: FileKind::Css,
            bytes: b"@import url(\"late.css\");\n".to_vec(),
            hero: false,
        },
        Planned {
            rel: "css/late.css".into(),
            kind: FileKind::Css,
            bytes: content::css(rng, super::LATE_CSS_BYTES as usize, 1, None),
            hero: false,
        },
    ];
    for i in 1..=images {
        out.push(Planned {
            rel: format!("img/image{i:03}.png"),
            kind: FileKind::Image,
            bytes: content::png(rng, super::LATE_CSS_IMAGE_BYTES as usize),
            hero: false,
        });
    }
    out
}

/// The page: the first stylesheet in its head (the late one is found in it, a round trip
/// after the images the preload scanner finds in the body), then every image.
fn late_stylesheet_html(name: &str, files: &[Planned]) -> String {
    let mut h = String::from(HEAD);
    h.push_str(&format!("<title>pagebench {name}</title>\n"));
    h.push_str("<link rel=\"stylesheet\" href=\"css/first.css\">\n</head>\n<body>\n");
    h.push_str(&format!(
        "<h1>pagebench {name}</h1>\n<p>Images requested before the render-blocking stylesheet \
         that an earlier stylesheet imports: a server's response priorities decide which \
         arrives first.</p>\n"
    ));
    for (n, f) in files
        .iter()
        .filter(|f| f.kind == FileKind::Image)
        .enumerate()
    {
        h.push_str(&format!(
            "<img src=\"{}\" alt=\"image {}\" width=\"64\" height=\"64\">\n",
            f.rel,
            n + 1
        ));
    }
    h.push_str("</body>\n</html>\n");
    h
}

const HEAD: &str = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<link rel=\"icon\" href=\"data:,\">\n";

/// The page referencing each of `files` by `href(index, file)`: its relative path for pageN, its
/// absolute URL on its host for a sharded page.
fn page_html(name: &str, files: &[Planned], href: impl Fn(usize, &Planned) -> String) -> String {
    let of = |kind: FileKind| {
        files
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.kind == kind)
    };
    let mut h = String::from(HEAD);
    h.push_str(&format!("<title>pagebench {name}</title>\n"));
    // The hero is announced first and high, as pages mark their LCP image: it then arrives
    // before the render-blocking files are done and paints with the first render, before the
    // load event, whatever the protocol's scheduling.
    for (i, f) in of(FileKind::Image).filter(|(_, f)| f.hero) {
        h.push_str(&format!(
            "<link rel=\"preload\" as=\"image\" href=\"{}\" fetchpriority=\"high\">\n",
            href(i, f)
        ));
    }
    for (i, f) in of(FileKind::Css) {
        h.push_str(&format!(
            "<link rel=\"stylesheet\" href=\"{}\">\n",
            href(i, f)
        ));
    }
    for (i, f) in of(FileKind::Js) {
        h.push_str(&format!("<script src=\"{}\" defer></script>\n", href(i, f)));
    }
    h.push_str("</head>\n<body>\n");
    h.push_str(&format!(
        "<h1>pagebench {name}</h1>\n<p>A generated page with {} subresources. Its text uses the page font, \
         its images are PNGs and its scripts count themselves.</p>\n",
        files.len()
    ));
    // The hero first, at its own size (width and height given: nothing shifts when it loads).
    for (i, f) in of(FileKind::Image).filter(|(_, f)| f.hero) {
        let (w, h2) = content::png_size(&f.bytes).unwrap_or((64, 64));
        h.push_str(&format!(
            "<img src=\"{}\" alt=\"hero image\" elementtiming=\"{}\" fetchpriority=\"high\" width=\"{w}\" height=\"{h2}\" style=\"display:block\">\n",
            href(i, f),
            super::HERO_ELEMENT,
        ));
    }
    for (n, (i, f)) in of(FileKind::Image).filter(|(_, f)| !f.hero).enumerate() {
        h.push_str(&format!(
            "<img src=\"{}\" alt=\"image {}\" width=\"64\" height=\"64\">\n",
            href(i, f),
            n + 1
        ));
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The download page: fetches the file, checks its length and SHA-256 in the browser, and
/// publishes the outcome in `window.__pagebench` (the runner waits for `done`). A fetch that
/// fails with a network error (a connection broken by an outage or NAT rebinding) is tried
/// again, at most twice, as a download manager would; `attempts` and `errors` say so.
fn download_html(name: &str, bytes: u64, sha256: &str) -> String {
    format!(
        "{HEAD}<title>pagebench {name}</title>\n</head>\n<body>\n<h1>pagebench {name}</h1>\n\
<p id=\"status\">downloading {bytes} bytes…</p>\n<script>\n\
(function () {{\n\
  const expected = {{ bytes: {bytes}, sha256: \"{sha256}\" }};\n\
  const start = performance.now();\n\
  const errors = [];\n\
  function attempt() {{\n\
    return fetch(\"download.bin\", {{ cache: \"no-store\" }})\n\
      .then(function (r) {{ if (!r.ok) throw new Error(\"HTTP \" + r.status); return r.arrayBuffer(); }})\n\
      .catch(function (e) {{\n\
        if (!(e instanceof TypeError) || errors.length >= {retries}) throw e;\n\
        errors.push(String(e));\n\
        return attempt();\n\
      }});\n\
  }}\n\
  attempt()\n\
    .then(function (buf) {{\n\
      const end = performance.now();\n\
      return crypto.subtle.digest(\"SHA-256\", buf).then(function (d) {{\n\
        const hex = Array.from(new Uint8Array(d)).map(function (x) {{ return x.toString(16).padStart(2, \"0\"); }}).join(\"\");\n\
        const ok = buf.byteLength === expected.bytes && hex === expected.sha256;\n\
        window.__pagebench = {{ done: true, ok: ok, bytes: buf.byteLength, sha256: hex, start: start, end: end, attempts: errors.length + 1, errors: errors }};\n\
        document.getElementById(\"status\").textContent = ok ? \"done\" : \"corrupt\";\n\
      }});\n\
    }})\n\
    .catch(function (e) {{ window.__pagebench = {{ done: true, ok: false, error: String(e), attempts: errors.length + 1, errors: errors, start: start, end: performance.now() }}; }});\n\
}})();\n</script>\n</body>\n</html>\n",
        retries = super::DOWNLOAD_RETRIES
    )
}

/// The upload page: builds a pseudo-random body first (outside the timed part), then POSTs it to
/// `/upload` and publishes the server's byte count in `window.__pagebench`.
fn upload_html(name: &str, bytes: u64, seed: u64) -> String {
    format!(
        "{HEAD}<title>pagebench {name}</title>\n</head>\n<body>\n<h1>pagebench {name}</h1>\n\
<p id=\"status\">uploading {bytes} bytes…</p>\n<script>\n\
(function () {{\n\
  const n = {bytes};\n\
  const body = new Uint8Array(n);\n\
  let x = {xs} >>> 0 || 1;\n\
  for (let i = 0; i < n; i++) {{ x ^= x << 13; x ^= x >>> 17; x ^= x << 5; body[i] = x & 255; }}\n\
  const start = performance.now();\n\
  fetch(\"/upload\", {{ method: \"POST\", body: body, cache: \"no-store\", headers: {{ \"content-type\": \"application/octet-stream\" }} }})\n\
    .then(function (r) {{ if (!r.ok) throw new Error(\"HTTP \" + r.status); return r.json(); }})\n\
    .then(function (j) {{\n\
      const end = performance.now();\n\
      const ok = j.bytes === n;\n\
      window.__pagebench = {{ done: true, ok: ok, bytes: n, server_bytes: j.bytes, server_duration_ms: j.duration_ms, start: start, end: end }};\n\
      document.getElementById(\"status\").textContent = ok ? \"done\" : \"short\";\n\
    }})\n\
    .catch(function (e) {{ window.__pagebench = {{ done: true, ok: false, error: String(e), start: start, end: performance.now() }}; }});\n\
}})();\n</script>\n</body>\n</html>\n",
        xs = (seed as u32) ^ 0x9e37_79b9
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_stylesheet_page_imports_its_big_stylesheet_after_its_images() {
        let root = tempfile::tempdir().unwrap();
        let m = generate(root.path(), &"latecss3".parse().unwrap(), 1).unwrap();
        let sizes: Vec<(&str, u64)> = m.files.iter().map(|f| (f.path.as_str(), f.size)).collect();
        assert_eq!(sizes.len(), 5, "{sizes:?}");
        assert_eq!(
            sizes[1],
            ("/latecss3/css/late.css", super::super::LATE_CSS_BYTES)
        );
        assert!(sizes[2..]
            .iter()
            .all(|(p, s)| p.ends_with(".png") && *s == super::super::LATE_CSS_IMAGE_BYTES));
        let dir = root.path().join("latecss3");
        let first = std::fs::read_to_string(dir.join("css/first.css")).unwrap();
        assert!(first.contains("@import url(\"late.css\")"), "{first}");
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let css_at = html.find("css/first.css").unwrap();
        assert!(html.find("img/image001.png").unwrap() > css_at);
        assert!(
            !html.contains("late.css"),
            "found only through the first stylesheet"
        );
    }

    #[test]
    fn regenerating_replaces_the_tree_and_leaves_no_staging_dir() {
        let root = tempfile::tempdir().unwrap();
        let w: Workload = "page10".parse().unwrap();
        let dir = workload_dir(root.path(), &w.name);
        assert_eq!(generate(root.path(), &w, 1).unwrap().seed, 1);
        std::fs::write(dir.join("stale.txt"), "from an older generator").unwrap();
        generate(root.path(), &w, 2).unwrap();
        assert_eq!(
            super::super::read_manifest(root.path(), &w.name)
                .unwrap()
                .seed,
            2
        );
        assert!(!dir.join("stale.txt").exists());
        assert!(dir.join("index.html").is_file());
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from(&w.name)]);
    }

    fn files_on(archive: &site_archive::SiteArchive) -> Vec<(String, String)> {
        archive.entries[1..]
            .iter()
            .map(|e| {
                let rest = e.url.strip_prefix("https://").unwrap();
                let (host, path) = rest.split_once('/').unwrap();
                (host.to_string(), format!("/{path}"))
            })
            .collect()
    }

    #[test]
    fn shards_are_assigned_round_robin_and_the_font_follows_its_stylesheet() {
        let mut rng = rng_for(1, "page10");
        let files = plan_page(&mut rng, 10, None);
        assert_eq!(files[0].kind, FileKind::Font);
        assert_eq!(files[1].rel, "css/style01.css");
        let hosts = shard_assignment(&files, 3);
        // File i on host (i mod 3) + 1; the font (file 0) where style01 (file 1) is.
        assert_eq!(hosts, [2, 2, 3, 1, 2, 3, 1, 2, 3, 1]);
        assert_eq!(shard_assignment(&files, 1), [1; 10]);
        let fixed = plan_page(&mut rng_for(1, "page7x200"), 7, Some(200));
        assert_eq!(shard_assignment(&fixed, 2), [1, 2, 1, 2, 1, 2, 1]);
    }

    #[test]
    fn a_sharded_page_serves_page_n_files_from_k_hosts() {
        let root = tempfile::tempdir().unwrap();
        let plain = generate(root.path(), &"page10".parse().unwrap(), 1).unwrap();
        let w: Workload = "page10s3".parse().unwrap();
        let m = generate(root.path(), &w, 1).unwrap();
        let dir = workload_dir(root.path(), "page10s3");
        let archive = site_archive::read(&dir).unwrap();
        assert_eq!(archive.source.kind, "generated");
        assert_eq!(
            archive.page_url,
            "https://pagebench.test/page10s3/index.html"
        );
        assert_eq!(archive.entries[0].url, archive.page_url);
        assert_eq!(archive.entries.len(), plain.files.len() + 1);
        assert_eq!(m.subresource_bytes, plain.subresource_bytes);
        // Byte for byte pageN's files, in pageN's order.
        let mut total = 0;
        for (e, f) in archive.entries[1..].iter().zip(&plain.files) {
            let pagen = std::fs::read(root.path().join(f.path.trim_start_matches('/'))).unwrap();
            assert_eq!(site_archive::body(&dir, e).unwrap(), pagen, "{}", e.url);
            assert!(e.url.ends_with(f.path.trim_start_matches("/page10")));
            assert_eq!(e.header("content-type"), Some(f.content_type.as_str()));
            assert_eq!(e.header("cache-control"), Some("no-store"));
            assert_eq!((e.status, e.content_encoding.as_deref()), (200, None));
            total += pagen.len() as u64;
        }
        assert_eq!(total, plain.subresource_bytes);
        // Every file on its host, each host with its own recorded address.
        let on = files_on(&archive);
        let hosts = [
            "s2.pagebench.test",
            "s2.pagebench.test",
            "s3.pagebench.test",
            "pagebench.test",
        ];
        for (i, want) in hosts.iter().enumerate() {
            assert_eq!(on[i].0, *want, "file {i}");
        }
        for e in &archive.entries {
            let host = e.url.split('/').nth(2).unwrap();
            let k = if host == "pagebench.test" {
                1
            } else {
                host[1..2].parse().unwrap()
            };
            assert_eq!(e.server_address, Some(format!("192.0.2.{k}")));
        }
        let (slots, addresses) = site_archive::origins::plan(
            &archive.entries,
            site_archive::origins::AddressMode::Recorded,
        )
        .unwrap();
        assert_eq!(addresses, 3);
        let origins: Vec<&str> = slots.iter().map(|s| s.host.as_str()).collect();
        assert_eq!(
            origins,
            ["pagebench.test", "s2.pagebench.test", "s3.pagebench.test"]
        );
        // The page references every file by its absolute URL, nothing relative.
        let html =
            String::from_utf8(site_archive::body(&dir, &archive.entries[0]).unwrap()).unwrap();
        for (host, path) in &on[1..] {
            assert!(
                html.contains(&format!("\"https://{host}{path}\"")),
                "{path}"
            );
        }
        assert!(html.contains("<link rel=\"icon\" href=\"data:,\">"));
        assert!(!html.contains("href=\"css/") && !html.contains("src=\"img/"));
        assert_eq!(html.len() as u64, m.entry_size);
        assert!(super::super::verify(root.path(), &m).is_ok());
        assert_eq!(super::super::site_archive_dir(root.path(), &w), Some(dir));
        assert_eq!(
            super::super::site_archive_dir(root.path(), &"page10".parse().unwrap()),
            None
        );
    }

    #[test]
    fn one_shard_is_page_n_with_absolute_urls() {
        let root = tempfile::tempdir().unwrap();
        let plain = generate(root.path(), &"page10".parse().unwrap(), 1).unwrap();
        generate(root.path(), &"page10s1".parse().unwrap(), 1).unwrap();
        let dir = workload_dir(root.path(), "page10s1");
        let archive = site_archive::read(&dir).unwrap();
        let html =
            String::from_utf8(site_archive::body(&dir, &archive.entries[0]).unwrap()).unwrap();
        let pagen = std::fs::read_to_string(root.path().join("page10/index.html")).unwrap();
        let relative = html
            .replace("https://pagebench.test/page10s1/", "")
            .replace("page10s1", "page10");
        assert_eq!(relative, pagen);
        assert!(files_on(&archive)
            .iter()
            .all(|(h, _)| h == "pagebench.test"));
        let (_, addresses) = site_archive::origins::plan(
            &archive.entries,
            site_archive::origins::AddressMode::Recorded,
        )
        .unwrap();
        assert_eq!(addresses, 1);
        assert_eq!(archive.entries.len(), plain.files.len() + 1);
    }

    #[test]
    fn sharded_archives_are_deterministic_and_regenerated_when_damaged() {
        let snapshot = |dir: &Path| -> Vec<(String, Vec<u8>)> {
            let mut files: Vec<(String, Vec<u8>)> = Vec::new();
            for sub in [dir.to_path_buf(), dir.join(site_archive::BODIES)] {
                for e in std::fs::read_dir(&sub).unwrap() {
                    let p = e.unwrap().path();
                    if p.is_file() {
                        files.push((p.display().to_string(), std::fs::read(&p).unwrap()));
                    }
                }
            }
            files.sort();
            files
        };
        let root = tempfile::tempdir().unwrap();
        let w: Workload = "page10x300s2".parse().unwrap();
        let dir = workload_dir(root.path(), &w.name);
        let first = generate(root.path(), &w, 1).unwrap();
        let before = snapshot(&dir);
        assert_eq!(generate(root.path(), &w, 1).unwrap(), first);
        assert_eq!(snapshot(&dir), before, "same bytes every generation");
        // What a run gets is the archive's manifest: the same files, keyed by URL.
        let ensured = super::super::ensure(root.path(), &w, 1, Default::default()).unwrap();
        assert_eq!(ensured.site.as_ref().unwrap().origins.len(), 2);
        let sizes = |m: &Manifest| m.files.iter().map(|f| f.size).collect::<Vec<_>>();
        assert_eq!(sizes(&ensured), sizes(&first));
        // A damaged body is noticed and the archive regenerated.
        let archive = site_archive::read(&dir).unwrap();
        let body = dir
            .join(site_archive::BODIES)
            .join(&archive.entries[3].body.as_ref().unwrap().sha256);
        std::fs::write(&body, b"damaged").unwrap();
        let e = super::super::verify(root.path(), &first).unwrap_err();
        assert!(e.contains("not the recorded body"), "{e}");
        super::super::ensure(root.path(), &w, 1, Default::default()).unwrap();
        assert_eq!(snapshot(&dir), before);
        // Another seed is another page, and ensure regenerates for it.
        let other = super::super::ensure(root.path(), &w, 2, Default::default()).unwrap();
        assert_eq!(other.seed, 2);
        assert_ne!(other.files, ensured.files);
    }

    #[test]
    fn page_n_html_is_unchanged_by_sharding() {
        let root = tempfile::tempdir().unwrap();
        generate(root.path(), &"page10".parse().unwrap(), 1).unwrap();
        let html = std::fs::read(root.path().join("page10/index.html")).unwrap();
        // Generator 4's page10, unchanged in 5 (a change here must bump GENERATOR_VERSION).
        assert_eq!(
            sha256_hex(&html),
            "2276381d2ade138d74423b50ca108fa4fe92da4fa6a9deb8ce81f0dc775d3aa7"
        );
    }

    #[test]
    fn the_study_pages_keep_their_files_and_bytes_and_gain_a_hero() {
        let root = tempfile::tempdir().unwrap();
        // Generator 1's (the study's) file counts and subresource bytes.
        for (name, files, bytes) in [("page10", 10, 80_000), ("page50", 50, 421_000)] {
            let m = generate(root.path(), &name.parse().unwrap(), 1).unwrap();
            assert_eq!(m.files.len(), files, "{name}");
            assert_eq!(m.subresource_bytes, bytes, "{name}");
            let html = std::fs::read_to_string(root.path().join(name).join("index.html")).unwrap();
            assert_eq!(html.matches("elementtiming=\"hero\"").count(), 1, "{name}");
            // The hero is the smallest image with room for the whole picture, shown at its own
            // (big) size before the others.
            let room = content::hero_min_bytes() as u64;
            let hero = m
                .files
                .iter()
                .filter(|f| f.kind == FileKind::Image && f.size >= room)
                .min_by_key(|f| f.size)
                .unwrap();
            let rel = hero.path.trim_start_matches(&format!("/{name}/"));
            let png = std::fs::read(root.path().join(name).join(rel)).unwrap();
            assert_eq!(png.len() as u64, hero.size);
            assert_eq!(content::png_size(&png), Some(content::HERO_SIZE), "{name}");
            let (w, h) = content::HERO_SIZE;
            // Smaller than most of the page's images: it arrives early whatever the protocol.
            let smaller = m
                .files
                .iter()
                .filter(|f| f.kind == FileKind::Image && f.size > hero.size)
                .count();
            let images = m.files.iter().filter(|f| f.kind == FileKind::Image).count();
            assert!(
                2 * smaller >= images,
                "{name}: {smaller} of {images} images are larger"
            );
            let img = html.find("<img").unwrap();
            assert!(html[img..].starts_with(&format!("<img src=\"{rel}\" alt=\"hero image\"")));
            // Preloaded before the stylesheets, at high priority.
            let preload = format!(
                "<link rel=\"preload\" as=\"image\" href=\"{rel}\" fetchpriority=\"high\">"
            );
            let at = html.find(&preload).expect("the hero is preloaded");
            assert!(at < html.find("rel=\"stylesheet\"").unwrap());
            assert!(html.contains(&format!("width=\"{w}\" height=\"{h}\"")));
        }
    }

    #[test]
    fn mix_has_every_kind() {
        let m = mix(50);
        assert_eq!(m.len(), 50);
        assert_eq!(m.iter().filter(|k| **k == FileKind::Font).count(), 1);
        assert_eq!(m.iter().filter(|k| **k == FileKind::Css).count(), 5);
        assert_eq!(m.iter().filter(|k| **k == FileKind::Js).count(), 8);
        let m = mix(10);
        assert_eq!(m.len(), 10);
        assert_eq!(mix(1), vec![FileKind::Css]);
        assert_eq!(mix(3).len(), 3);
    }

    #[test]
    fn sizes_sum_exactly() {
        let mut rng = rng_for(1, "x");
        let kinds = mix(50);
        let s = split_sizes(&mut rng, &kinds, 400_000, 700);
        assert_eq!(s.iter().sum::<u64>(), 400_000);
        assert!(s.iter().all(|&v| v >= 700));
    }
}
