//! One source file → the modules it declares and every path it names (pure, no IO).
//!
//! Not a Rust parser: comments and literals are blanked, the rest is cut into identifiers and
//! punctuation, `#[cfg(test)]` items are dropped (tests may use anything), and paths are read
//! from `use` trees and from code. Good enough for the module graph, which only needs the
//! first segments of each path.

/// What one file says about the module graph.
#[derive(Debug, Default, PartialEq)]
pub struct FileScan {
    /// Child modules declared with `mod NAME;` outside `#[cfg(test)]`.
    pub children: Vec<String>,
    /// Child modules declared with `#[cfg(test)] mod NAME;`: files that hold only tests.
    pub test_children: Vec<String>,
    /// Every path named outside tests, as written (`super::model::Link`).
    pub refs: Vec<RawRef>,
}

/// A path as written, with the inline modules (`mod build { … }`) it sits in.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRef {
    /// Inline modules between the file's module and the path (`super` starts from there).
    pub scope: Vec<String>,
    /// The segments as written: `["super", "model", "Link"]`, `["crate", "netem"]`.
    pub path: Vec<String>,
    /// The name a `use` brings into scope (`Link`, or its alias); none for a glob or in code.
    pub binds: Option<String>,
}

/// Reads one file's source.
pub fn scan_file(source: &str) -> FileScan {
    let tokens = tokens(&blank_comments_and_literals(source));
    let mut scan = FileScan::default();
    let tokens = drop_test_items(&tokens, &mut scan.test_children);
    scan_scope(&tokens, &[], &mut scan);
    scan
}

/// Collects declarations and paths of one module body; inline modules recurse.
fn scan_scope(tokens: &[String], scope: &[String], scan: &mut FileScan) {
    let mut i = 0;
    let mut rest: Vec<String> = Vec::with_capacity(tokens.len());
    while i < tokens.len() {
        let t = tokens[i].as_str();
        if t == "mod" && i + 2 < tokens.len() && is_ident(&tokens[i + 1]) {
            let name = tokens[i + 1].clone();
            if tokens[i + 2] == ";" {
                if scope.is_empty() {
                    scan.children.push(name);
                }
                i += 3;
                continue;
            }
            if tokens[i + 2] == "{" {
                let end = matching_close(tokens, i + 2);
                let inner = [scope, std::slice::from_ref(&name)].concat();
                scan_scope(&tokens[i + 3..end], &inner, scan);
                i = end + 1;
                continue;
            }
        }
        if t == "use" {
            let end = (i..tokens.len())
                .find(|&j| tokens[j] == ";")
                .unwrap_or(tokens.len());
            for (path, binds) in use_tree_paths(&tokens[i + 1..end]) {
                let scope = scope.to_vec();
                scan.refs.push(RawRef { scope, path, binds });
            }
            i = end + 1;
            continue;
        }
        rest.push(tokens[i].clone());
        i += 1;
    }
    for path in code_paths(&rest) {
        let scope = scope.to_vec();
        scan.refs.push(RawRef {
            scope,
            path,
            binds: None,
        });
    }
}

/// Every path of a `use` tree (the tokens between `use` and `;`), braces expanded:
/// `crate::{a::{b, c}, d}` → `crate::a::b`, `crate::a::c`, `crate::d`; `a::{self}` → `a`. Each
/// with the name it brings into scope (`b`, `c`, `d`, `a`, or an alias; none for `*`).
pub fn use_tree_paths(tokens: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < tokens.len() {
        let before = pos;
        use_tree(tokens, &mut pos, &[], &mut out);
        if pos == before {
            pos += 1;
        }
    }
    out
}

type UsePaths = Vec<(Vec<String>, Option<String>)>;

fn use_tree(tokens: &[String], pos: &mut usize, prefix: &[String], out: &mut UsePaths) {
    let mut path = prefix.to_vec();
    let mut named = false;
    let mut glob = false;
    let mut alias = None;
    while let Some(t) = tokens.get(*pos) {
        match t.as_str() {
            "{" => {
                *pos += 1;
                while *pos < tokens.len() && tokens[*pos] != "}" {
                    let before = *pos;
                    use_tree(tokens, pos, &path, out);
                    if *pos == before {
                        *pos += 1;
                    }
                }
                *pos += 1;
                skip_comma(tokens, pos);
                return;
            }
            "::" => {
                if path.is_empty() {
                    // `use ::name` names an external crate.
                    path.push("::".into());
                }
                *pos += 1;
            }
            "*" => {
                *pos += 1;
                named = true;
                glob = true;
                break;
            }
            "as" => {
                alias = tokens.get(*pos + 1).cloned();
                *pos += 2;
            }
            "," | "}" => break,
            _ if is_ident(t) => {
                path.push(t.clone());
                named = true;
                *pos += 1;
            }
            _ => *pos += 1,
        }
    }
    skip_comma(tokens, pos);
    if named {
        if path.last().is_some_and(|s| s == "self") {
            path.pop();
        }
        let binds = if glob {
            None
        } else {
            alias.or_else(|| path.last().cloned())
        };
        out.push((path, binds));
    }
}

fn skip_comma(tokens: &[String], pos: &mut usize) {
    if tokens.get(*pos).is_some_and(|t| t == ",") {
        *pos += 1;
    }
}

/// Paths in code: `crate::a::b(…)`, `super::x`, `self::y`, `$crate::z`, `name::thing`. Only the
/// first is taken where one path continues another (`a::b::c` once, not `b::c` again).
pub fn code_paths(tokens: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let starts = is_ident(&tokens[i])
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if !starts {
            i += 1;
            continue;
        }
        let mut path = vec![tokens[i].clone()];
        i += 1;
        while tokens.get(i).is_some_and(|t| t == "::")
            && tokens.get(i + 1).is_some_and(|t| is_ident(t))
        {
            path.push(tokens[i + 1].clone());
            i += 2;
        }
        out.push(path);
    }
    out
}

/// Removes every item behind `#[cfg(test)]`; the names of test-only `mod NAME;` go to `test_mods`.
fn drop_test_items(tokens: &[String], test_mods: &mut Vec<String>) -> Vec<String> {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let cfg_test = CFG_TEST
            .iter()
            .enumerate()
            .all(|(k, s)| tokens.get(i + k).is_some_and(|t| t == s));
        if !cfg_test {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let mut j = i + CFG_TEST.len();
        while tokens.get(j).is_some_and(|t| t == "#") && tokens.get(j + 1).is_some_and(|t| t == "[")
        {
            j = matching_close(tokens, j + 1) + 1;
        }
        let end = item_end(tokens, j);
        let item = &tokens[j..end];
        if let Some(k) = item.iter().position(|t| t == "mod") {
            if item.get(k + 2).is_some_and(|t| t == ";") {
                test_mods.push(item[k + 1].clone());
            }
        }
        i = end;
    }
    out
}

/// The end (exclusive) of the item, field or statement starting at `start`: its `;`, its `{ … }`
/// body, the bracket that closes around it, or (not for items: `-> Result<A, B>`) its `,`.
fn item_end(tokens: &[String], start: usize) -> usize {
    const ITEM: [&str; 9] = [
        "fn", "mod", "impl", "struct", "enum", "use", "const", "static", "trait",
    ];
    let is_item = tokens[start..]
        .iter()
        .take(6)
        .any(|t| ITEM.contains(&t.as_str()));
    let mut depth = 0usize;
    let mut i = start;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" | "}" if depth == 0 => return i,
            ")" | "]" => depth -= 1,
            "{" if depth == 0 => return matching_close(tokens, i) + 1,
            ";" if depth == 0 => return i + 1,
            "," if depth == 0 && !is_item => return i + 1,
            _ => {}
        }
        i += 1;
    }
    tokens.len()
}

/// The index of the bracket closing the one at `open` (or the end).
fn matching_close(tokens: &[String], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Identifiers (numbers too), `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_ident_char(c) {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The source with comments, strings and character literals replaced by spaces (lines kept), so
/// that `crate::x` in a doc comment or `'{'` in code cannot be mistaken for code.
pub fn blank_comments_and_literals(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        let end = literal_or_comment_end(&c, i);
        if end == i {
            out.push(c[i]);
            i += 1;
        } else {
            out.extend(
                c[i..end]
                    .iter()
                    .map(|&x| if x == '\n' { '\n' } else { ' ' }),
            );
            i = end;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends (exclusive); `i` itself when none starts.
fn literal_or_comment_end(c: &[char], i: usize) -> usize {
    let at = |k: usize| c.get(k).copied();
    let prev_ident = i > 0 && is_ident_char(c[i - 1]);
    match c[i] {
        '/' if at(i + 1) == Some('/') => (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len()),
        '/' if at(i + 1) == Some('*') => block_comment_end(c, i),
        '"' => quoted_end(c, i + 1, '"'),
        'r' if !prev_ident
            || (i >= 1 && matches!(c[i - 1], 'b' | 'c') && !ident_before(c, i - 1)) =>
        {
            raw_string_end(c, i + 1).unwrap_or(i)
        }
        '\'' if at(i + 1) == Some('\\') => quoted_end(c, i + 1, '\''),
        '\'' if at(i + 2) == Some('\'') => i + 3,
        _ => i,
    }
}

fn ident_before(c: &[char], i: usize) -> bool {
    i > 0 && is_ident_char(c[i - 1])
}

fn block_comment_end(c: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut k = start;
    while k + 1 < c.len() {
        if c[k] == '/' && c[k + 1] == '*' {
            depth += 1;
            k += 2;
        } else if c[k] == '*' && c[k + 1] == '/' {
            depth -= 1;
            k += 2;
            if depth == 0 {
                return k;
            }
        } else {
            k += 1;
        }
    }
    c.len()
}

/// The end of a quoted literal whose body starts at `k` (escapes skipped).
fn quoted_end(c: &[char], mut k: usize, quote: char) -> usize {
    while k < c.len() {
        match c[k] {
            '\\' => k += 2,
            x if x == quote => return k + 1,
            _ => k += 1,
        }
    }
    c.len()
}

/// The end of `r"…"` / `r#"…"#` whose hashes start at `k`; `None` when it is not one.
fn raw_string_end(c: &[char], k: usize) -> Option<usize> {
    let hashes = c[k..].iter().take_while(|&&x| x == '#').count();
    if c.get(k + hashes) != Some(&'"') {
        return None;
    }
    let mut j = k + hashes + 1;
    while j < c.len() {
        if c[j] == '"'
            && c[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&x| x == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(src: &str) -> Vec<String> {
        scan_file(src)
            .refs
            .iter()
            .map(|r| r.path.join("::"))
            .collect()
    }

    #[test]
    fn grouped_and_nested_imports_are_expanded() {
        let p = paths("use crate::{a::{b, c as d}, e::{self, f::*}, g};");
        assert_eq!(
            p,
            [
                "crate::a::b",
                "crate::a::c",
                "crate::e",
                "crate::e::f",
                "crate::g"
            ]
        );
    }

    #[test]
    fn a_use_names_what_it_brings_into_scope() {
        let binds: Vec<Option<String>> = scan_file("use a::{b as c, d::{self}, e::*};")
            .refs
            .into_iter()
            .map(|r| r.binds)
            .collect();
        assert_eq!(binds, [Some("c".into()), Some("d".into()), None]);
    }

    #[test]
    fn super_self_and_relative_imports_are_kept_as_written() {
        let p = paths("pub use super::super::x::Y;\npub(crate) use self::z;\nuse model::{Link};");
        assert_eq!(p, ["super::super::x::Y", "self::z", "model::Link"]);
    }

    #[test]
    fn paths_in_code_are_read_once_from_their_start() {
        let p = paths("fn f() { let x = crate::a::b::c(); super::d::<u8>(); $crate::e::F {} }");
        assert_eq!(p, ["crate::a::b::c", "super::d", "crate::e::F"]);
    }

    #[test]
    fn comments_strings_and_chars_name_nothing() {
        let src = "//! [`crate::a`]\n/* crate::b /* nested */ crate::c */\nfn f() {\n\
                   let s = \"crate::d\"; let r = r#\"crate::e \"# ; let q = '{'; let l: &'static str;\n\
                   let e = '\\''; }\nfn g() { crate::real::x(); }";
        assert_eq!(paths(src), ["crate::real::x"]);
    }

    #[test]
    fn test_items_are_dropped_and_test_files_noted() {
        let src = "mod a;\n#[cfg(test)]\nmod b;\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n\
                   use crate::x::Y;\n}\nstruct S {\n    #[cfg(test)]\n    f: crate::z::Z,\n    g: u8,\n}\n\
                   fn f() -> crate::w::W { todo!() }";
        let scan = scan_file(src);
        assert_eq!(scan.children, ["a"]);
        assert_eq!(scan.test_children, ["b"]);
        let p: Vec<String> = scan.refs.iter().map(|r| r.path.join("::")).collect();
        assert_eq!(p, ["crate::w::W"]);
    }

    #[test]
    fn inline_modules_give_their_paths_a_scope() {
        let scan = scan_file("pub mod build {\n    use super::Packet;\n}\nuse crate::a::B;");
        let scoped: Vec<(String, String)> = scan
            .refs
            .iter()
            .map(|r| (r.scope.join("::"), r.path.join("::")))
            .collect();
        assert_eq!(
            scoped,
            [
                ("build".into(), "super::Packet".into()),
                (String::new(), "crate::a::B".into())
            ]
        );
    }
}
