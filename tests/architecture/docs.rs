//! ARCHITECTURE.md stays true to the tree: its "Modules" section has a part per layer, in the
//! order of [`super::LAYERS`] from the top, whose table names every module of that layer once
//! and nothing else; and every source file it names (in the picture, the tables' notes and the
//! recipes) exists.

use std::collections::BTreeSet;
use std::path::Path;

fn architecture_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    std::fs::read_to_string(&path).expect("read ARCHITECTURE.md")
}

/// Each layer part of the "Modules" section (`### `layer`: …`) with the modules its table's
/// first column names (`| `a`, `b` | … |`), in the order written.
fn table_modules(md: &str) -> Vec<(String, Vec<String>)> {
    let section = md
        .split("\n## Modules")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("ARCHITECTURE.md has a \"Modules\" section");
    section
        .split("\n### ")
        .skip(1)
        .filter_map(|part| {
            let layer = part.strip_prefix('`')?.split('`').next()?.to_string();
            let names = part
                .lines()
                .filter(|l| l.starts_with("| `"))
                .filter_map(|l| l.split('|').nth(1))
                .flat_map(|cell| cell.split(','))
                .map(|name| name.trim().trim_matches('`').to_string())
                .collect();
            Some((layer, names))
        })
        .collect()
}

/// The modules `src/LAYER/mod.rs` declares (test-only ones left out).
fn declared_modules(layer: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(layer);
    let text = std::fs::read_to_string(root.join("mod.rs")).expect("read a layer's mod.rs");
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
fn the_module_tables_list_every_layers_modules_once() {
    let parts = table_modules(&architecture_md());
    let layers: Vec<&str> = parts.iter().map(|(l, _)| l.as_str()).collect();
    let top_down: Vec<&str> = super::LAYERS.iter().rev().copied().collect();
    assert_eq!(layers, top_down, "one part per layer, from the top");
    for (layer, listed) in &parts {
        let unique: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(
            listed.len(),
            unique.len(),
            "{layer}: listed twice: {listed:?}"
        );
        let declared = declared_modules(layer);
        let missing: Vec<&String> = declared.difference(&unique).collect();
        let stale: Vec<&String> = unique.difference(&declared).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "ARCHITECTURE.md's `{layer}` table: add {missing:?}, remove {stale:?}"
        );
    }
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
    let md = "# A\n\n## Modules\n\nintro\n\n### `config`: what\n\n| module | job |\n|---|---|\n\
| `plan`, `nope` | x |\n\n### `cli`\n\n| `matrix` | y |\n\n## Next\n| `no` | z |\n";
    let parts = table_modules(md);
    assert_eq!(
        parts[0],
        ("config".to_string(), vec!["plan".into(), "nope".into()])
    );
    assert_eq!(parts[1], ("cli".to_string(), vec!["matrix".into()]));
    assert_eq!(parts.len(), 2);
    assert!(!declared_modules("config").contains("nope"));
    assert!(declared_modules("config").contains("plan"));
    let named = named_files("see `src/matrix/gone.rs` and runner.rs::assemble");
    assert_eq!(
        named.into_iter().collect::<Vec<_>>(),
        ["matrix/gone.rs", "runner.rs"]
    );
    assert!(!exists_in_tree("matrix/gone.rs") && !exists_in_tree("gone.rs"));
    assert!(exists_in_tree("runner.rs") && exists_in_tree("execute.rs"));
    assert!(exists_in_tree("reference/access_log.rs") && exists_in_tree("tests/cli_basics.rs"));
}

/// The README is read in minutes: at most 150 lines of at most 120 characters, the two
/// commands as `.ci/run` and a newcomer run them, and the example report linked from its
/// first screen.
#[test]
fn the_readme_is_short_and_leads_to_the_commands_and_the_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 150, "README.md has {} lines", lines.len());
    let long: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].chars().count() > 120)
        .map(|i| i + 1)
        .collect();
    assert!(
        long.is_empty(),
        "README.md lines over 120 characters: {long:?}"
    );
    for command in [
        "./setup.sh && cargo run --release -- matrix --profiles all",
        "./setup.sh && cargo nextest run",
    ] {
        assert!(readme.contains(command), "README.md lacks `{command}`");
    }
    let ci = std::fs::read_to_string(root.join(".ci/run")).expect("read .ci/run");
    assert!(ci.lines().any(|l| l == "./setup.sh && cargo nextest run"));
    let first_screen = lines[..lines.len().min(60)].join("\n");
    assert!(
        first_screen.contains("results/example/") && first_screen.contains("report.md"),
        "the README's first screen links no example report"
    );
}
