//! pagebench: is HTTP/1.1, HTTP/2 or HTTP/3 faster for this page on this network — and why?
//!
//! Real Chromium, a real packet-level link emulator between two network namespaces, and an
//! embedded h1/h2/h3 server. Pure cores (link model, metric derivation, statistics) with thin IO
//! shells around them; `ARCHITECTURE.md` has the pipeline, each module's job and the recipes.

pub mod atomic;
pub mod baseline;
pub mod browser;
pub mod capacity;
pub mod capture;
pub mod cli;
pub mod contention;
pub mod diagnose;
pub mod disruption;
pub mod fault;
pub mod har;
pub mod identity;
pub mod locations;
pub mod machine_check;
pub mod matrix;
pub mod metrics;
pub mod netem;
pub mod plan;
pub mod procfs;
pub mod profile;
pub mod protocol;
pub mod record;
pub mod recording;
pub mod registry;
pub mod report;
pub mod results;
pub mod runner;
pub mod server;
pub mod servers;
pub mod signals;
pub mod site;
pub mod snmp;
pub mod stats;
pub mod sysinfo;
pub mod tempdir;
pub mod testbed;
pub mod textfmt;
pub mod validate;
pub mod visual;
pub mod workload;

/// An error that means "this part of pagebench does not exist yet"; the CLI exits with 2.
#[derive(Debug, thiserror::Error)]
#[error("`pagebench {0}` is not built yet (see the open issues); nothing was run")]
pub struct NotBuilt(pub &'static str);

#[cfg(test)]
mod architecture {
    //! The module graph has no cycles: each top-level module may use the ones below it, never
    //! one that uses it back (read from the sources: every `crate::NAME` outside tests).

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Top-level module → the top-level modules its non-test code names.
    fn graph() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") {
                    continue;
                }
                let rel = p.strip_prefix(&src).unwrap();
                let top = rel.iter().next().unwrap().to_string_lossy();
                let top = top.trim_end_matches(".rs").to_string();
                if top == "lib" || top == "main" {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                let deps = g.entry(top.clone()).or_default();
                for (i, _) in code.match_indices("crate::") {
                    let name: String = code[i + 7..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top {
                        deps.insert(name);
                    }
                }
            }
        }
        g
    }

    /// A path from `to` back to `from`, if any.
    fn path_back(
        g: &BTreeMap<String, BTreeSet<String>>,
        from: &str,
        to: &str,
    ) -> Option<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![vec![to.to_string()]];
        while let Some(path) = todo.pop() {
            let last = path.last().unwrap().clone();
            if last == from {
                return Some(path);
            }
            if !seen.insert(last.clone()) {
                continue;
            }
            for next in g.get(&last).into_iter().flatten() {
                let mut p = path.clone();
                p.push(next.clone());
                todo.push(p);
            }
        }
        None
    }

    #[test]
    fn no_module_cycles() {
        let g = graph();
        assert!(g.len() > 10, "the scan found the modules: {:?}", g.keys());
        for (m, deps) in &g {
            for d in deps {
                if let Some(back) = path_back(&g, m, d) {
                    panic!("module cycle: {m} → {}", back.join(" → "));
                }
            }
        }
    }
}
