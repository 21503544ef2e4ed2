//! Names that never collide: every module of `src/` has a name no other module has (a file's
//! stem, or its folder's name for a `mod.rs`), so a name found in a path, a log or a review
//! leads to one place. Two kinds of module may share a name, and only with their own kind:
//! test-only files (`tests.rs`), and the files of one registry's entries that mirror each other
//! ([`MIRRORED`]: each engine's `har.rs` is that engine's HAR).

use std::collections::BTreeMap;

/// Folders whose subfolders are a registry's entries (one per engine), whose files may mirror
/// each other's names.
pub const MIRRORED: &[&str] = &["measure/browser/engines"];

/// A module's name as a reader meets it: its file's stem, or its folder's for `mod.rs`.
fn module_name(rel: &str) -> &str {
    let mut parts = rel.rsplit('/');
    let file = parts.next().unwrap_or(rel);
    match file.strip_suffix(".rs") {
        Some("mod") => parts.next().unwrap_or(file),
        Some(stem) => stem,
        None => file,
    }
}

/// The registry entry `rel` belongs to (`measure/browser/engines/chromium`), if it is inside
/// one of the [`MIRRORED`] folders' entries.
fn mirrored_entry(rel: &str) -> Option<String> {
    MIRRORED.iter().find_map(|root| {
        let rest = rel.strip_prefix(root)?.strip_prefix('/')?;
        let entry = rest.split('/').next()?;
        rest.contains('/').then(|| format!("{root}/{entry}"))
    })
}

/// Every name used by more than one module, with the modules (files under `src/`) that use it,
/// once the allowed sharing is left out.
pub fn collisions(paths: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for rel in paths {
        by_name.entry(module_name(rel)).or_default().push(rel);
    }
    by_name
        .into_iter()
        .filter(|(name, users)| users.len() > 1 && *name != "tests")
        .filter(|(_, users)| {
            // Mirrors: each user inside a different entry of the same registry.
            let entries: Vec<Option<String>> = users.iter().map(|r| mirrored_entry(r)).collect();
            let all_mirrored = entries.iter().all(Option::is_some);
            let mut distinct = entries.clone();
            distinct.sort();
            distinct.dedup();
            !(all_mirrored && distinct.len() == entries.len())
        })
        .map(|(name, users)| {
            (
                name.to_string(),
                users.iter().map(|u| u.to_string()).collect(),
            )
        })
        .collect()
}

#[test]
fn no_two_modules_share_a_name() {
    let files = super::crate_files();
    let paths: Vec<&str> = files
        .keys()
        .map(String::as_str)
        .filter(|p| *p != "lib.rs")
        .collect();
    let found = collisions(&paths);
    let text: Vec<String> = found
        .iter()
        .map(|(name, users)| format!("{name}: {}", users.join(", ")))
        .collect();
    assert!(
        found.is_empty(),
        "modules that share a name (give each a name that says what it holds):\n  {}",
        text.join("\n  ")
    );
}

#[test]
fn a_shared_name_is_caught_and_mirrors_and_tests_are_not() {
    let found = collisions(&[
        "link/link_stats.rs",
        "report/stats/mod.rs",
        "support/stats.rs",
        "measure/browser/engines/chromium/har.rs",
        "measure/browser/engines/firefox/har.rs",
        "results/attrition/tests.rs",
        "report/gate/tests.rs",
        "evidence/har_document.rs",
    ]);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        [(
            "stats".to_string(),
            vec![
                "report/stats/mod.rs".to_string(),
                "support/stats.rs".to_string()
            ]
        )]
    );
    // A mirror's name is its own: a module outside the engines may not take it.
    let found = collisions(&[
        "measure/browser/engines/chromium/har.rs",
        "measure/browser/engines/firefox/har.rs",
        "evidence/har.rs",
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
}
