//! ARCHITECTURE.md stays true to the tree: its module table names every top-level module
//! once and nothing else, and every source file it names (in the picture, the table's notes
//! and the recipes) exists.

use std::collections::BTreeSet;
use std::path::Path;

fn architecture_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).expect("read ARCHITECTURE.md")
}

/// The modules the table's first column names (`| `a`, `b` | … |`), in the "Modules" section.
fn table_modules(md: &str) -> Vec<String> {
    let section = md
        .split("\n## Modules")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has a \"Modules\" section");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| cell.split(','))
        .map(|name| name.trim().trim_matches('`').to_string())
        .collect()
}

/// The top-level modules `src/lib.rs` declares (test-only ones left out).
fn declared_modules() -> BTreeSet<String> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    let text = std::fs::read_to_string(lib).expect("read src/lib.rs");
    text.lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

/// Every `something.rs` path a text names (`src/` may be left out), as written.
fn named_files(md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for token in md.split(|c: char| !(c.is_ascii_alphanumeric() || "_/.-".contains(c))) {
        let token = token.trim_start_matches("src/");
        if token.ends_with(".rs") && token.len() > 3 {
            out.insert(token.to_string());
        }
    }
    out
}

/// Whether `name` is a file of the repository: under `src/` where a path may leave out the
/// folders above it (`reference/access_log.rs`, `execute.rs`), or from the repository's root
/// (`tests/…`). A recipe's placeholder (`NAME.rs`) names no file.
fn exists_in_tree(name: &str) -> bool {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if name.contains("NAME") || root.join(name).exists() {
        return true;
    }
    let src = root.join("src");
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel == name || rel.ends_with(&format!("/{name}")) {
                return true;
            }
        }
    }
    false
}

#[test]
fn the_module_table_lists_every_top_level_module_once() {
    let listed = table_modules(&architecture_md());
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(listed.len(), unique.len(), "listed twice: {listed:?}");
    let declared = declared_modules();
    assert!(declared.len() > 30, "{declared:?}");
    let missing: Vec<&String> = declared.difference(&unique).collect();
    let stale: Vec<&String> = unique.difference(&declared).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "ARCHITECTURE.md's module table: add {missing:?}, remove {stale:?}"
    );
}

#[test]
fn every_source_file_architecture_md_names_exists() {
    let md = architecture_md();
    let named = named_files(&md);
    assert!(named.len() > 10, "{named:?}");
    let gone: Vec<&String> = named.iter().filter(|f| !exists_in_tree(f)).collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names files the tree lacks: {gone:?}"
    );
}

#[test]
fn a_planted_module_or_file_is_caught() {
    let md =
        "# A\n\n## Modules\n\n| module | job |\n|---|---|\n| `plan`, `nope` | x |\n\n## Next\n";
    assert_eq!(table_modules(md), ["plan", "nope"]);
    let named = named_files("see `src/matrix/gone.rs` and runner.rs::assemble");
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["matrix/gone.rs", "runner.rs"]
    );
    assert!(!exists_in_tree("matrix/gone.rs") && !exists_in_tree("gone.rs"));
    assert!(exists_in_tree("runner.rs") && exists_in_tree("execute.rs"));
    assert!(exists_in_tree("reference/access_log.rs") && exists_in_tree("tests/cli_basics.rs"));
}
