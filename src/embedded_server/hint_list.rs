//! `--early-hints-links FILE`: the user's own Early Hints, page by page, instead of the rule
//! that reads them from the page ([`super::early_hints::links`]).
//!
//! One hint a line: the page, then the `Link` value it sends, e.g.
//!
//! ```text
//! # page                          Link value
//! /page50/index.html              </page50/style.css>; rel=preload; as=style
//! https://docs.test/index.html    <https://static.test>; rel=preconnect
//! ```
//!
//! A page is a request target (`/path?query`, any authority) or a whole `https://` URL (that
//! authority only). A page the file does not name gets no hints.

use std::path::Path;

/// The hints of the pages a file names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HintList {
    pages: Vec<(Page, Vec<String>)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Page {
    /// A request target on any authority.
    Target(String),
    /// A target on one authority (lower-cased, without a default port).
    Url { authority: String, target: String },
}

/// A line of the file that is not `PAGE LINK-VALUE`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {problem}")]
pub struct HintListError {
    pub file: String,
    pub line: usize,
    pub problem: String,
}

impl HintList {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> anyhow::Result<HintList> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read the Early Hints list {}: {e} (one hint a line: PAGE LINK-VALUE)",
                path.display()
            )
        })?;
        Ok(HintList::parse(&text, &path.display().to_string())?)
    }

    /// `file` names the source in errors.
    pub fn parse(text: &str, file: &str) -> Result<HintList, HintListError> {
        let mut list = HintList::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let error = |problem: String| HintListError {
                file: file.to_string(),
                line: i + 1,
                problem,
            };
            let Some((page, value)) = line.split_once(char::is_whitespace) else {
                return Err(error(format!(
                    "{line:?} has a page but no Link value (write: PAGE <URL>; rel=preload; as=style)"
                )));
            };
            let value = value.trim();
            if !value.starts_with('<') || !value.contains('>') {
                return Err(error(format!(
                    "the Link value {value:?} does not start with <URL> (e.g. </style.css>; rel=preload; as=style)"
                )));
            }
            if http::HeaderValue::from_str(value).is_err() {
                return Err(error(format!(
                    "the Link value {value:?} is not a valid header value"
                )));
            }
            let page = parse_page(page).map_err(error)?;
            match list.pages.iter_mut().find(|(p, _)| *p == page) {
                Some((_, values)) => values.push(value.to_string()),
                None => list.pages.push((page, vec![value.to_string()])),
            }
        }
        Ok(list)
    }

    /// The hints of a request for `target` sent to `authority`: the URL's entry, else the
    /// target's; none when the file names neither.
    pub fn links(&self, authority: &str, target: &str) -> Vec<String> {
        let authority = normal_authority(authority);
        let url = self.pages.iter().find(|(p, _)| {
            matches!(p, Page::Url { authority: a, target: t } if *a == authority && t == target)
        });
        let any = || {
            self.pages
                .iter()
                .find(|(p, _)| matches!(p, Page::Target(t) if t == target))
        };
        url.or_else(any).map(|(_, v)| v.clone()).unwrap_or_default()
    }
}

fn parse_page(page: &str) -> Result<Page, String> {
    if page.starts_with('/') {
        return Ok(Page::Target(page.to_string()));
    }
    let Some(rest) = page.strip_prefix("https://") else {
        return Err(format!(
            "the page {page:?} is neither a target (/path) nor an https:// URL"
        ));
    };
    let (authority, target) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(format!("the page {page:?} names no host"));
    }
    Ok(Page::Url {
        authority: normal_authority(authority),
        target: target.to_string(),
    })
}

/// Lower-cased, without `:443`.
fn normal_authority(a: &str) -> String {
    let a = a.to_ascii_lowercase();
    a.strip_suffix(":443").map(str::to_string).unwrap_or(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# hints\n\
        /index.html </a.css>; rel=preload; as=style\n\
        /index.html  </hero.jpg>; rel=preload; as=image\n\
        \n\
        https://Docs.test:443/ <https://static.test>; rel=preconnect\n";

    #[test]
    fn pages_get_their_lines_in_order_and_a_url_only_on_its_authority() {
        let list = HintList::parse(FILE, "hints.txt").unwrap();
        assert_eq!(
            list.links("any.test", "/index.html"),
            vec![
                "</a.css>; rel=preload; as=style",
                "</hero.jpg>; rel=preload; as=image"
            ]
        );
        assert_eq!(
            list.links("docs.test", "/"),
            vec!["<https://static.test>; rel=preconnect"]
        );
        assert!(list.links("other.test", "/").is_empty());
        assert!(list.links("docs.test", "/index.html?x").is_empty());
    }

    #[test]
    fn a_bad_line_is_named_with_its_file_and_number() {
        for (text, problem) in [
            ("/a.html\n", "no Link value"),
            ("/a.html rel=preload\n", "does not start with <URL>"),
            ("docs.test/ </a.css>; rel=preload\n", "neither a target"),
            ("https:///x </a.css>; rel=preload\n", "names no host"),
        ] {
            let e = HintList::parse(&format!("# c\n{text}"), "h.txt").unwrap_err();
            assert_eq!((e.file.as_str(), e.line), ("h.txt", 2), "{text}");
            assert!(e.to_string().contains(problem), "{e}");
        }
    }
}
