//! The module graph has no circles: a module may use the ones below it in the pipeline, never
//! one that uses it back. Read from the sources (every `use` and every path in code, outside
//! `#[cfg(test)]`): between top-level modules there is none, and between file modules none but
//! those in [`KNOWN_CIRCLES`] (each with why it is left; none today). A module naming its own
//! children is no dependency (it is made of them), and a re-exported name counts as the module
//! that defines it.
//!
//! `cargo nextest run --lib architecture --no-capture` prints every circle with the paths that
//! make it.

mod docs;
mod graph;
mod scan;

use graph::{circles, crate_graph, show, top_level, Graph, ModPath};
use std::collections::BTreeMap;
use std::path::Path;

/// Circles between file modules that are left, members sorted, each with why it is left. A
/// new circle fails the test; break it by moving the shared part down into a module both can
/// use (see the commits that emptied this list).
const KNOWN_CIRCLES: &[(&[&str], &str)] = &[];

/// Every `.rs` file under `src/` (path relative to it → source), except the binary's `main.rs`
/// and packages of their own (a folder with a `Cargo.toml`, e.g. the quiche helper).
fn crate_files() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        if dir != src && dir.join("Cargo.toml").exists() {
            continue;
        }
        for entry in std::fs::read_dir(&dir).expect("read src/") {
            let path = entry.expect("read src/").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with(".rs") && rel != "main.rs" {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                files.insert(rel, text);
            }
        }
    }
    files
}

/// One line per circle: its members, then each edge inside it with the path that makes it.
fn describe(graph: &Graph, circle: &[ModPath]) -> String {
    let names: Vec<String> = circle.iter().map(|m| show(m)).collect();
    let mut out = format!("{{{}}}\n", names.join(", "));
    for from in circle {
        for (to, how) in &graph[from] {
            if circle.contains(to) {
                out += &format!("    {} → {} ({how})\n", show(from), show(to));
            }
        }
    }
    out
}

#[test]
fn no_circles_between_top_level_modules() {
    let (graph, _) = crate_graph(&crate_files());
    let top = top_level(&graph);
    assert!(
        top.len() > 30,
        "the scan found the modules: {:?}",
        top.keys()
    );
    let found = circles(&top);
    let text: Vec<String> = found.iter().map(|c| describe(&top, c)).collect();
    assert!(
        found.is_empty(),
        "circles between top-level modules:\n{}",
        text.concat()
    );
}

#[test]
fn no_circles_between_file_modules_but_the_known_ones() {
    let (graph, unreached) = crate_graph(&crate_files());
    assert!(
        graph.len() > 150,
        "the scan found the modules: {:?}",
        graph.keys()
    );
    let found = circles(&graph);
    println!("circles between file modules:");
    for c in &found {
        print!("  {}", describe(&graph, c));
    }
    let names = |c: &Vec<ModPath>| c.iter().map(|m| show(m)).collect::<Vec<_>>();
    let new: Vec<String> = found
        .iter()
        .filter(|c| !KNOWN_CIRCLES.iter().any(|(k, _)| *k == names(c)))
        .map(|c| describe(&graph, c))
        .collect();
    assert!(
        new.is_empty(),
        "circles between modules (move the shared part down into a module both can use):\n{}",
        new.concat()
    );
    let gone: Vec<&[&str]> = KNOWN_CIRCLES
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !found.iter().any(|c| names(c) == *k))
        .collect();
    assert!(
        gone.is_empty(),
        "KNOWN_CIRCLES lists circles that are gone: {gone:?}"
    );
    assert!(
        unreached.is_empty(),
        "files no `mod` declares: {unreached:?}"
    );
}
