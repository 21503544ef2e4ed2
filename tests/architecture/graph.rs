//! The crate's files → the graph of file modules → its circles (pure, no IO).

use super::scan::{scan_file, FileScan, RawRef};
use std::collections::{BTreeMap, BTreeSet};

/// A module's path from the crate root: `["netem", "model"]`; the root is `[]`.
pub type ModPath = Vec<String>;

/// File module → the file modules it names → the first such name as written.
pub type Graph = BTreeMap<ModPath, BTreeMap<ModPath, String>>;

/// `netem::model`, or `crate` for the root.
pub fn show(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// The module a file under `src/` holds, by Rust's file layout: `lib.rs` → root,
/// `netem/mod.rs` → `netem`, `netem/model.rs` → `netem::model`.
pub fn module_path(rel: &str) -> ModPath {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && stem == "lib")) {
        parts.push(stem.to_string());
    }
    parts
}

/// The crate's files (path under `src/` → source) read into the graph of file modules. Only
/// modules declared from `lib.rs` outside `#[cfg(test)]` take part; files that no `mod`
/// declares, not even a test one, are returned beside it.
pub fn crate_graph(files: &BTreeMap<String, String>) -> (Graph, Vec<String>) {
    let scans: BTreeMap<ModPath, (&String, FileScan)> = files
        .iter()
        .map(|(rel, src)| (module_path(rel), (rel, scan_file(src))))
        .collect();
    let modules = declared_modules(&scans);
    let imports: BTreeMap<&ModPath, BTreeMap<&String, ModPath>> = modules
        .iter()
        .map(|m| (m, imported_names(m, &scans[m].1, &modules)))
        .collect();
    let mut graph = Graph::new();
    for m in &modules {
        let edges = graph.entry(m.clone()).or_default();
        for r in &scans[m].1.refs {
            let Some(target) = absolute(m, r, &modules).or_else(|| through_import(r, &imports[m]))
            else {
                continue;
            };
            let owner = defining_module(target, &modules, &imports);
            // Naming a child is a dependency like any other: a child that uses its parent
            // while the parent uses it makes a circle (the contract goes into a module of its
            // own, which both use).
            if owner != *m {
                edges.entry(owner).or_insert_with(|| r.path.join("::"));
            }
        }
    }
    let unreached = unreached_files(&scans, &modules);
    (graph, unreached)
}

/// Files that no `mod` declares, not even under `#[cfg(test)]`.
fn unreached_files(
    scans: &BTreeMap<ModPath, (&String, FileScan)>,
    modules: &BTreeSet<ModPath>,
) -> Vec<String> {
    let tests: Vec<ModPath> = modules
        .iter()
        .flat_map(|m| {
            scans[m]
                .1
                .test_children
                .iter()
                .map(move |c| [m.as_slice(), std::slice::from_ref(c)].concat())
        })
        .collect();
    scans
        .iter()
        .filter(|(m, _)| !modules.contains(*m) && !tests.iter().any(|t| m.starts_with(t)))
        .map(|(_, (rel, _))| rel.to_string())
        .collect()
}

/// The root and every module its non-test `mod NAME;` declarations reach, transitively.
fn declared_modules(scans: &BTreeMap<ModPath, (&String, FileScan)>) -> BTreeSet<ModPath> {
    let mut found = BTreeSet::new();
    let mut todo = vec![ModPath::new()];
    while let Some(m) = todo.pop() {
        let Some((_, scan)) = scans.get(&m) else {
            continue;
        };
        for child in &scan.children {
            let c = [m.as_slice(), std::slice::from_ref(child)].concat();
            todo.push(c);
        }
        found.insert(m);
    }
    found
}

/// The crate-absolute path a reference names, or `None` for another crate's (or a local item).
fn absolute(file: &[String], r: &RawRef, modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let base = [file, r.scope.as_slice()].concat();
    let (first, rest) = r.path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "self" => Some([base.as_slice(), rest].concat()),
        "super" => {
            let supers = r.path.iter().take_while(|s| *s == "super").count();
            let kept = base.len().checked_sub(supers)?;
            Some([&base[..kept], &r.path[supers..]].concat())
        }
        _ => {
            let child = [base.as_slice(), std::slice::from_ref(first)].concat();
            modules
                .contains(&child)
                .then(|| [base.as_slice(), &r.path].concat())
        }
    }
}

/// A module's `use` imports outside inline modules: name → the crate-absolute path it stands for.
fn imported_names<'s>(
    m: &[String],
    scan: &'s FileScan,
    modules: &BTreeSet<ModPath>,
) -> BTreeMap<&'s String, ModPath> {
    let named = scan.refs.iter().filter(|r| r.scope.is_empty());
    named
        .filter_map(|r| Some((r.binds.as_ref()?, absolute(m, r, modules)?)))
        .collect()
}

/// A path that starts with a name the module imported (`attrition::words::f` after
/// `use super::attrition;`), made crate-absolute through the import.
fn through_import(r: &RawRef, imports: &BTreeMap<&String, ModPath>) -> Option<ModPath> {
    let (first, rest) = r.path.split_first()?;
    let to = imports.get(first)?;
    Some([to.as_slice(), rest].concat())
}

/// The file module that defines what `path` names: its longest prefix that is a module, or
/// where that module's `use` of the next segment leads (`super::Link` re-exported from `link`).
fn defining_module(
    mut path: ModPath,
    modules: &BTreeSet<ModPath>,
    imports: &BTreeMap<&ModPath, BTreeMap<&String, ModPath>>,
) -> ModPath {
    for _ in 0..16 {
        let m = owner(&path, modules);
        let Some(next) = path.get(m.len()) else {
            return m;
        };
        match imports.get(&m).and_then(|i| i.get(next)) {
            Some(to) if !to.starts_with(&path[..=m.len()]) => {
                path = [to.as_slice(), &path[m.len() + 1..]].concat();
            }
            _ => return m,
        }
    }
    owner(&path, modules)
}

/// The file module that holds what `path` names: its longest prefix that is a module.
fn owner(path: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// The graph between the modules `group` maps each file module to (its layer, its unit): an
/// edge between two file modules is an edge between their groups, when those differ.
pub fn collapse(graph: &Graph, group: impl Fn(&ModPath) -> ModPath) -> Graph {
    let mut out = Graph::new();
    for (from, edges) in graph {
        let a = group(from);
        if a.is_empty() {
            continue;
        }
        let entry = out.entry(a.clone()).or_default();
        for (to, how) in edges {
            let b = group(to);
            if !b.is_empty() && b != a {
                entry.entry(b).or_insert_with(|| how.clone());
            }
        }
    }
    out
}

/// A file module's first `depth` path components (its layer at 1, its unit at 2).
pub fn prefix(depth: usize) -> impl Fn(&ModPath) -> ModPath {
    move |m| m.iter().take(depth).cloned().collect()
}

/// Every edge that reaches up: from a module of one layer to one of a layer above it
/// (`layers` bottom up); the crate root and modules outside every layer are not judged.
pub fn upward_edges(graph: &Graph, layers: &[&str]) -> Vec<String> {
    let rank = |m: &ModPath| m.first().and_then(|l| layers.iter().position(|x| x == l));
    let mut out = Vec::new();
    for (from, edges) in graph {
        let Some(a) = rank(from) else { continue };
        for (to, how) in edges {
            if rank(to).is_some_and(|b| b > a) {
                out.push(format!("{} → {} ({how})", show(from), show(to)));
            }
        }
    }
    out
}

/// Every circle: each strongly connected component of more than one module (Tarjan), members
/// sorted, circles sorted.
pub fn circles(graph: &Graph) -> Vec<Vec<ModPath>> {
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in graph.keys() {
        if !t.index.contains_key(m) {
            t.visit(m);
        }
    }
    let mut found: Vec<Vec<ModPath>> = t.found.into_iter().filter(|c| c.len() > 1).collect();
    for c in &mut found {
        c.sort();
    }
    found.sort();
    found
}

struct Tarjan<'g> {
    graph: &'g Graph,
    index: BTreeMap<&'g ModPath, usize>,
    low: BTreeMap<&'g ModPath, usize>,
    stack: Vec<&'g ModPath>,
    on_stack: BTreeSet<&'g ModPath>,
    found: Vec<Vec<ModPath>>,
}

impl<'g> Tarjan<'g> {
    fn visit(&mut self, m: &'g ModPath) {
        let i = self.index.len();
        self.index.insert(m, i);
        self.low.insert(m, i);
        self.stack.push(m);
        self.on_stack.insert(m);
        for next in self.graph.get(m).into_iter().flat_map(|e| e.keys()) {
            if !self.index.contains_key(next) {
                self.visit(next);
                let l = self.low[m].min(self.low[next]);
                self.low.insert(m, l);
            } else if self.on_stack.contains(next) {
                let l = self.low[m].min(self.index[next]);
                self.low.insert(m, l);
            }
        }
        if self.low[m] == self.index[m] {
            let mut component = Vec::new();
            while let Some(x) = self.stack.pop() {
                self.on_stack.remove(x);
                component.push(x.clone());
                if x == m {
                    break;
                }
            }
            self.found.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect()
    }

    fn found(list: &[(&str, &str)]) -> Vec<Vec<String>> {
        let (graph, _) = crate_graph(&files(list));
        circles(&graph)
            .iter()
            .map(|c| c.iter().map(|m| show(m)).collect())
            .collect()
    }

    #[test]
    fn file_layout_gives_the_module_path() {
        assert_eq!(module_path("lib.rs"), Vec::<String>::new());
        assert_eq!(module_path("netem/mod.rs"), ["netem"]);
        assert_eq!(module_path("netem/model.rs"), ["netem", "model"]);
        assert_eq!(module_path("baseline/gate.rs"), ["baseline", "gate"]);
        assert_eq!(module_path("baseline.rs"), ["baseline"]);
    }

    #[test]
    fn a_two_file_circle_is_found() {
        let c = found(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod x; mod y;"),
            ("a/x.rs", "use super::y::Y; pub struct X;"),
            ("a/y.rs", "pub struct Y(crate::a::x::X);"),
        ]);
        assert_eq!(c, [["a::x", "a::y"]]);
    }

    #[test]
    fn a_three_file_circle_through_grouped_imports_is_found() {
        let c = found(&[
            ("lib.rs", "pub mod a; pub mod b; mod c;"),
            ("a.rs", "mod inner;"),
            ("a/inner.rs", "use crate::{b::{B, Other}, c};"),
            ("b.rs", "use crate::c::C;"),
            ("c.rs", "fn f() { super::a::inner::g() }"),
        ]);
        assert_eq!(c, [["a::inner", "b", "c"]]);
    }

    #[test]
    fn a_parent_naming_its_children_is_no_circle() {
        let c = found(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod x; mod y; pub use x::X; fn f() { y::g() }"),
            ("a/x.rs", "use super::y::Y;"),
            ("a/y.rs", "use std::fmt;"),
        ]);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn a_parent_and_a_child_that_use_each_other_are_a_circle() {
        let c = found(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod x; pub use x::X; pub struct Shared;"),
            ("a/x.rs", "use super::Shared; pub struct X;"),
        ]);
        assert_eq!(c, [["a", "a::x"]]);
        let apart = found(&[
            ("lib.rs", "pub mod a;"),
            (
                "a/mod.rs",
                "mod contract; mod x; pub use contract::Shared; pub use x::X;",
            ),
            ("a/contract.rs", "pub struct Shared;"),
            ("a/x.rs", "use super::Shared; pub struct X;"),
        ]);
        assert!(apart.is_empty(), "{apart:?}");
    }

    #[test]
    fn a_re_export_leads_to_the_module_that_defines_the_name() {
        let c = found(&[
            ("lib.rs", "pub mod a;"),
            (
                "a/mod.rs",
                "mod x; mod y; pub use x::X as Renamed; pub use y::{Y};",
            ),
            ("a/x.rs", "use super::Y;"),
            ("a/y.rs", "fn f() -> crate::a::Renamed { todo!() }"),
        ]);
        assert_eq!(c, [["a::x", "a::y"]]);
    }

    #[test]
    fn a_path_through_an_imported_module_reaches_its_child() {
        let c = found(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "mod x; mod y;"),
            ("a/x.rs", "pub mod deep;"),
            ("a/x/deep.rs", "use crate::a::y::Y;"),
            ("a/y.rs", "use super::x; fn f() { x::deep::g() }"),
        ]);
        assert_eq!(c, [["a::x::deep", "a::y"]]);
    }

    #[test]
    fn test_code_and_other_crates_make_no_edges() {
        let (graph, unreached) = crate_graph(&files(&[
            ("lib.rs", "pub mod a; pub mod b; #[cfg(test)] mod checks;"),
            (
                "a.rs",
                "use b::B; fn f() { ::b::g() }\n#[cfg(test)]\nmod tests { use crate::b; }",
            ),
            ("b.rs", "use crate::a::A;"),
            ("checks.rs", "use crate::{a, b};"),
            ("orphan.rs", "use crate::a;"),
        ]));
        assert!(circles(&graph).is_empty(), "{graph:?}");
        assert_eq!(unreached, ["orphan.rs"]);
    }

    #[test]
    fn circles_between_top_level_modules_show_through_their_children() {
        let (graph, _) = crate_graph(&files(&[
            ("lib.rs", "pub mod a; pub mod b;"),
            ("a/mod.rs", "pub mod x;"),
            ("a/x.rs", "use crate::b::B;"),
            ("b.rs", "fn f() { crate::a::g() }"),
        ]));
        assert!(circles(&graph).is_empty());
        let top: Vec<Vec<ModPath>> = circles(&collapse(&graph, prefix(1)));
        assert_eq!(top, [[vec!["a".to_string()], vec!["b".to_string()]]]);
    }

    #[test]
    fn a_layer_reaching_up_is_caught_and_one_reaching_down_is_not() {
        let (graph, _) = crate_graph(&files(&[
            ("lib.rs", "pub mod low; pub mod high;"),
            ("low/mod.rs", "pub mod a; pub mod b;"),
            ("low/a.rs", "pub struct A;"),
            (
                "low/b.rs",
                "use super::a::A; fn f() { crate::high::x::g() }",
            ),
            ("high/mod.rs", "pub mod x;"),
            ("high/x.rs", "use crate::low::a::A;"),
        ]));
        assert!(circles(&graph).is_empty());
        let up = upward_edges(&graph, &["low", "high"]);
        assert_eq!(up, ["low::b → high::x (crate::high::x::g)"]);
        assert_eq!(upward_edges(&graph, &["high", "low"]).len(), 1);
    }
}
