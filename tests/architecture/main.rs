//! The crate is layers in the order of the pipeline ([`LAYERS`]), and the module graph has no
//! circles: a module uses its own layer's modules and the layers' below, never one above; and
//! between file modules there is no circle but those in [`KNOWN_CIRCLES`] (each with why it is
//! left; none today). Read from the sources (every `use` and every path in code, outside
//! `#[cfg(test)]`). A parent naming its children is a dependency like any other, so a child
//! that uses its parent while the parent uses it is a circle; a re-exported name counts as the
//! module that defines it.
//!
//! `cargo nextest run --test architecture --no-capture` prints every circle with the paths that
//! make it.

mod docs;
mod graph;
mod names;
mod scan;
mod sizes;

use graph::{circles, collapse, crate_graph, prefix, show, upward_edges, Graph, ModPath};
use std::collections::BTreeMap;
use std::path::Path;

/// Circles between file modules that are left, members sorted, each with why it is left. A
/// new circle fails the test; break it by moving the shared part down into a module both can
/// use (see the commits that emptied this list).
const KNOWN_CIRCLES: &[(&[&str], &str)] = &[];

/// `src/`'s layers, bottom up: the OS helpers and pure libraries every layer may use, what to
/// run, the link, its packets read back, the embedded server, the servers under test, a run's
/// evidence, one measured load, the results directory, the diagnosis, the matrix, the benches,
/// the report, and the command line that composes them. `src/lib.rs` declares exactly these.
const LAYERS: [&str; 14] = [
    "support",
    "config",
    "link",
    "packets",
    "embedded_server",
    "servers",
    "evidence",
    "measure",
    "results",
    "diagnosis",
    "matrix",
    "bench",
    "report",
    "cli",
];

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
fn the_crate_is_its_layers_and_none_reaches_up() {
    let (graph, _) = crate_graph(&crate_files());
    let layers = collapse(&graph, prefix(1));
    let names: Vec<&str> = layers.keys().map(|m| m[0].as_str()).collect();
    let mut expected = LAYERS.to_vec();
    expected.sort();
    assert_eq!(names, expected, "src/lib.rs declares these layers");
    let up = upward_edges(&graph, &LAYERS);
    assert!(
        up.is_empty(),
        "modules that use a layer above their own (move the shared part down):\n  {}",
        up.join("\n  ")
    );
}

#[test]
fn no_circles_between_the_layers_modules() {
    let (graph, _) = crate_graph(&crate_files());
    let units = collapse(&graph, prefix(2));
    assert!(
        units.len() > 40,
        "the scan found the modules: {:?}",
        units.keys()
    );
    let found = circles(&units);
    let text: Vec<String> = found.iter().map(|c| describe(&units, c)).collect();
    assert!(
        found.is_empty(),
        "circles between modules:\n{}",
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

/// A results directory explains itself: what an engine can tell is in every record and in
/// `meta.json`, so the statistics, the diagnosis and the report (and the metric registry below
/// them) read it there and import nothing of the browsers.
#[test]
fn results_diagnosis_and_report_read_no_engine_code() {
    let (graph, _) = crate_graph(&crate_files());
    let readers = ["results", "diagnosis", "report", "evidence"];
    let browsers: ModPath = vec!["measure".into(), "browser".into()];
    let found: Vec<String> = graph
        .iter()
        .filter(|(from, _)| from.first().is_some_and(|l| readers.contains(&l.as_str())))
        .flat_map(|(from, edges)| {
            edges
                .iter()
                .filter(|(to, _)| to.starts_with(&browsers))
                .map(move |(to, how)| format!("{} → {} ({how})", show(from), show(to)))
        })
        .collect();
    assert!(
        found.is_empty(),
        "engine code read by:\n  {}",
        found.join("\n  ")
    );
}

/// Each extension point's registry, and the modules that may name its entries besides it and
/// the entries themselves, with why.
const REGISTRIES: &[(&str, &[(&str, &str)])] = &[
    (
        "servers::stacks",
        &[(
            "servers::choice",
            "`--server-cmd` is a choice of its own (the `custom` stack), not a registered one",
        )],
    ),
    (
        "measure::browser::engines",
        &[
            (
                "measure::site_recorder",
                "`pagebench record` is Chromium as a normal browser",
            ),
            (
                "cli::record_cmd",
                "`pagebench record`'s flags are Chromium's launch options",
            ),
            (
                "cli::args",
                "`pagebench record --wait` is Chromium's load wait",
            ),
        ],
    ),
];

/// Only a registry names its entries (a stack, an engine): an entry imports the contract, and
/// adding one touches its own file or folder and the registry.
#[test]
fn only_the_registries_name_their_entries() {
    let (graph, _) = crate_graph(&crate_files());
    let mut found = Vec::new();
    for (registry, allowed) in REGISTRIES {
        let reg: ModPath = registry.split("::").map(String::from).collect();
        let entry_of = |m: &ModPath| m.starts_with(&reg) && m.len() > reg.len();
        for (from, edges) in &graph {
            let same_entry = |to: &ModPath| entry_of(from) && from[reg.len()] == to[reg.len()];
            let siblings = entry_of(from);
            let allowed_here = allowed.iter().any(|(m, _)| show(from) == *m);
            for (to, how) in edges.iter().filter(|(to, _)| entry_of(to)) {
                if *from == reg || same_entry(to) || siblings || allowed_here {
                    continue;
                }
                found.push(format!("{} → {} ({how})", show(from), show(to)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "modules that name a registry's entry (import the contract, or go through the \
registry):\n  {}",
        found.join("\n  ")
    );
}
