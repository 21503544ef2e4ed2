//! Early Hints (RFC 8297) for a page (pure): the `Link` values a `103` carries before the page's
//! final response, read from the page itself.
//!
//! The rule, the same for a generated page and a replayed one: every stylesheet
//! (`<link rel=stylesheet>`) and every synchronous script (`<script src>` without `async`,
//! `defer` or `type=module`) of the document's `<head>` — what blocks its first render — and
//! the first `<img src>` of its body (the hero of a generated page), each as
//! `rel=preload` with its `as`; and `rel=preconnect` for every other origin those name.

/// The `Link` header values for `html`, a page served as `authority`.
pub fn links(html: &str, authority: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let body_at = lower.find("<body").unwrap_or(lower.len());
    let head_end = lower.find("</head").unwrap_or(body_at).min(body_at);
    let mut preload = Vec::new();
    for tag in tags(html, &lower, 0, head_end) {
        match tag.name.as_str() {
            "link" if tag.has_word("rel", "stylesheet") => {
                if let Some(href) = tag.attr("href") {
                    preload.push((href, "style"));
                }
            }
            "script" if !tag.has("async") && !tag.has("defer") && !tag.is("type", "module") => {
                if let Some(src) = tag.attr("src") {
                    preload.push((src, "script"));
                }
            }
            _ => {}
        }
    }
    if let Some(src) = tags(html, &lower, body_at, lower.len())
        .into_iter()
        .find(|t| t.name == "img")
        .and_then(|t| t.attr("src"))
    {
        preload.push((src, "image"));
    }
    let mut values = Vec::new();
    let mut origins: Vec<String> = Vec::new();
    for (url, kind) in preload {
        if url.is_empty() || url.starts_with("data:") {
            continue;
        }
        if let Some(origin) = other_origin(&url, authority) {
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        values.push(format!("<{url}>; rel=preload; as={kind}"));
    }
    values.extend(
        origins
            .into_iter()
            .map(|o| format!("<{o}>; rel=preconnect")),
    );
    values
}

/// The `103 Early Hints` response carrying `links`, one `Link` field each.
pub fn response(links: &[String]) -> http::Response<()> {
    let mut r = http::Response::new(());
    *r.status_mut() = http::StatusCode::EARLY_HINTS;
    for v in links {
        match http::HeaderValue::from_str(v) {
            Ok(v) => {
                r.headers_mut().append(http::header::LINK, v);
            }
            Err(_) => tracing::debug!("a Link value that is not a header value: {v:?}"),
        }
    }
    r
}

/// `https://host` of an absolute (or scheme-relative) URL on another authority than `ours`.
fn other_origin(url: &str, ours: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .or_else(|| url.strip_prefix("//"))?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let name = host.split(':').next().unwrap_or("");
    (!name.is_empty() && !name.eq_ignore_ascii_case(ours)).then(|| format!("https://{host}"))
}

/// One start tag: its name and attribute text (lower-cased names, values as written).
struct Tag<'a> {
    name: String,
    text: &'a str,
    lower: &'a str,
}

impl Tag<'_> {
    /// The value of attribute `name` (quoted or not).
    fn attr(&self, name: &str) -> Option<String> {
        let mut from = 0;
        while let Some(i) = self.lower[from..].find(name) {
            let at = from + i;
            from = at + name.len();
            let before_ok = at == 0
                || self.lower.as_bytes()[at - 1].is_ascii_whitespace()
                || self.lower.as_bytes()[at - 1] == b'/';
            let after = self.lower[from..].trim_start();
            if !before_ok || !after.starts_with('=') {
                continue;
            }
            let skip = self.lower.len() - after.len() + 1;
            let v = self.text[skip..].trim_start();
            return Some(match v.chars().next() {
                Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or("").to_string(),
                _ => v
                    .split(|c: char| c.is_ascii_whitespace() || c == '>')
                    .next()
                    .unwrap_or("")
                    .to_string(),
            });
        }
        None
    }

    /// Whether the attribute is present (with a value or without).
    fn has(&self, name: &str) -> bool {
        self.lower
            .split(|c: char| c.is_ascii_whitespace() || c == '=' || c == '/')
            .any(|w| w == name)
    }

    fn is(&self, name: &str, value: &str) -> bool {
        self.attr(name)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case(value))
    }

    fn has_word(&self, name: &str, word: &str) -> bool {
        self.attr(name).is_some_and(|v| {
            v.split_ascii_whitespace()
                .any(|w| w.eq_ignore_ascii_case(word))
        })
    }
}

/// The start tags between byte offsets `from` and `to`.
fn tags<'a>(html: &'a str, lower: &'a str, from: usize, to: usize) -> Vec<Tag<'a>> {
    let mut out = Vec::new();
    let mut at = from;
    while let Some(i) = lower[at..to].find('<') {
        let start = at + i + 1;
        let Some(len) = lower[start..to].find('>') else {
            break;
        };
        let end = start + len;
        let inner = &lower[start..end];
        let name_len = inner
            .find(|c: char| c.is_ascii_whitespace() || c == '/')
            .unwrap_or(inner.len());
        let name = &inner[..name_len];
        if name.chars().all(|c| c.is_ascii_alphanumeric()) && !name.is_empty() {
            out.push(Tag {
                name: name.to_string(),
                text: &html[start + name_len..end],
                lower: &lower[start + name_len..end],
            });
        }
        at = end + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heads_blocking_resources_and_the_hero_are_preloaded() {
        let html = r#"<!doctype html><html><head>
            <link rel="icon" href="data:,">
            <link rel="stylesheet" href="/a.css"><LINK REL='Stylesheet preload' HREF=/b.css>
            <script src="/sync.js"></script><script async src="/async.js"></script>
            <script defer src="/defer.js"></script><script type="module" src="/m.js"></script>
            <link rel="stylesheet" href="https://static.site.test/c.css">
            <script>var inline = 1;</script>
            </head><body><p>x</p><img src="img/hero.png" alt=""><img src="/second.png"></body></html>"#;
        assert_eq!(
            links(html, "www.site.test"),
            vec![
                "</a.css>; rel=preload; as=style",
                "</b.css>; rel=preload; as=style",
                "</sync.js>; rel=preload; as=script",
                "<https://static.site.test/c.css>; rel=preload; as=style",
                "<img/hero.png>; rel=preload; as=image",
                "<https://static.site.test>; rel=preconnect",
            ]
        );
    }

    #[test]
    fn a_page_without_a_head_or_anything_blocking_gets_nothing_but_its_hero() {
        assert!(links("<p>plain</p>", "a.test").is_empty());
        assert_eq!(
            links("<body><img src=/h.png></body>", "a.test"),
            vec!["</h.png>; rel=preload; as=image"]
        );
        // Same origin spelled out: no preconnect.
        assert_eq!(
            links(
                "<head><script src=\"https://a.test/x.js\"></script></head>",
                "a.test"
            ),
            vec!["<https://a.test/x.js>; rel=preload; as=script"]
        );
    }
}
