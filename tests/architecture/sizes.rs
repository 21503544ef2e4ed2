//! Rooms a reader can take in: no source file over [`MAX_FILE_LINES`] lines (a long test module
//! goes into a test file of its own) and no function over [`MAX_FN_LINES`] lines outside
//! `#[cfg(test)]` code, counted from `fn` to its closing brace.

use std::collections::BTreeMap;

use super::graph::module_path;
use super::scan::{blank_comments_and_literals, scan_file};

pub const MAX_FILE_LINES: usize = 1200;
pub const MAX_FN_LINES: usize = 100;

/// Every function outside test code longer than `max` lines: (lines, name, line it starts on).
pub fn long_functions(source: &str, max: usize) -> Vec<(usize, String, usize)> {
    let code = blank_comments_and_literals(source);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    let mut depth = 0i64;
    let mut test_depth: Option<i64> = None;
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if test_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            test_depth = Some(depth);
        }
        if test_depth.is_none() {
            if let Some(name) = fn_name(trimmed) {
                if let Some(len) = body_length(&lines[i..]) {
                    if len > max {
                        out.push((len, name, i + 1));
                    }
                }
            }
        }
        depth += braces(line);
        // A test item ends where the depth falls back to where its attribute stood.
        if test_depth.is_some_and(|d| depth <= d && line.contains('}')) {
            test_depth = None;
        }
    }
    out
}

/// `fn name` at the start of a (trimmed) line, after any `pub`, `const`, `async`, `unsafe`.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.peek() {
        let qualifier = w.starts_with("pub") || ["const", "async", "unsafe"].contains(w);
        if !qualifier {
            break;
        }
        words.next();
    }
    if words.next()? != "fn" {
        return None;
    }
    let name: String = words
        .next()?
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Lines from a function's first line to the brace that closes its body; None for a
/// declaration without a body (a trait's).
fn body_length(lines: &[&str]) -> Option<usize> {
    let mut depth = 0i64;
    let mut opened = false;
    for (k, line) in lines.iter().enumerate() {
        if !opened && depth == 0 && line.contains(';') && !line.contains('{') {
            return None;
        }
        depth += braces(line);
        opened |= line.contains('{');
        if opened && depth <= 0 {
            return Some(k + 1);
        }
    }
    None
}

fn braces(line: &str) -> i64 {
    line.matches('{').count() as i64 - line.matches('}').count() as i64
}

#[test]
fn no_file_is_too_long_to_take_in() {
    let long: Vec<String> = super::crate_files()
        .iter()
        .map(|(path, text)| (path, text.lines().count()))
        .filter(|(_, n)| *n > MAX_FILE_LINES)
        .map(|(path, n)| format!("src/{path}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them along a seam, or move a long test module \
into a test file of its own):\n  {}",
        long.join("\n  ")
    );
}

/// The files that hold only tests (declared `#[cfg(test)] mod NAME;`), and what is under them.
fn test_files(files: &BTreeMap<String, String>) -> Vec<String> {
    let test_modules: Vec<Vec<String>> = files
        .iter()
        .flat_map(|(rel, text)| {
            let parent = module_path(rel);
            scan_file(text)
                .test_children
                .into_iter()
                .map(move |c| [parent.clone(), vec![c]].concat())
        })
        .collect();
    files
        .keys()
        .filter(|rel| {
            let m = module_path(rel);
            test_modules.iter().any(|t| m.starts_with(t))
        })
        .cloned()
        .collect()
}

#[test]
fn no_function_is_longer_than_a_screen() {
    let files = super::crate_files();
    let tests = test_files(&files);
    assert!(
        tests.iter().any(|t| t.ends_with("/tests.rs")),
        "test files are found: {tests:?}"
    );
    let mut long = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !tests.contains(p)) {
        for (n, name, line) in long_functions(text, MAX_FN_LINES) {
            long.push(format!("src/{path}:{line} {name}: {n} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn a_long_function_is_found_and_test_code_is_not_judged() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let src = format!(
        "pub fn short() {{\n{}}}\n\npub(crate) async fn long(a: u8) -> u8 {{\n{}    \
a\n}}\n\ntrait T {{\n    fn declared(&self);\n}}\n\n#[cfg(test)]\nmod tests {{\n    fn \
long_test() {{\n{}    }}\n}}\n\nfn after() {{\n    let s = \"}}}}\";\n{}}}\n",
        body(3),
        body(101),
        body(200),
        body(102)
    );
    let found: Vec<(usize, String)> = long_functions(&src, 100)
        .into_iter()
        .map(|(n, name, _)| (n, name))
        .collect();
    assert_eq!(
        found,
        [(104, "long".to_string()), (105, "after".to_string())]
    );
}
