//! The report as a document (pure): headings, paragraphs, lists, tables and figures, rendered
//! once to GitHub-flavoured Markdown and once to a self-contained HTML page (images and the
//! bundled font embedded as data URIs: no external reference, works offline).

use base64::Engine;

/// What a table cell shows, for colouring in HTML (Markdown prints the text only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CellClass {
    Text,
    /// Row labels (profile, protocol).
    Label,
    Faster,
    Slower,
    NotSignificant,
    Undetermined,
    /// A series that did not finish in most runs.
    Dnf,
    /// Published study numbers.
    Study,
    /// Nothing to show.
    Missing,
}

impl CellClass {
    fn css(self) -> &'static str {
        match self {
            CellClass::Text => "",
            CellClass::Label => "label",
            CellClass::Faster => "faster",
            CellClass::Slower => "slower",
            CellClass::NotSignificant => "ns",
            CellClass::Undetermined => "undet",
            CellClass::Dnf => "dnf",
            CellClass::Study => "study",
            CellClass::Missing => "missing",
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cell {
    pub text: String,
    pub class: CellClass,
}

impl Cell {
    pub fn new(text: impl Into<String>, class: CellClass) -> Cell {
        Cell {
            text: text.into(),
            class,
        }
    }

    pub fn text(text: impl Into<String>) -> Cell {
        Cell::new(text, CellClass::Text)
    }

    pub fn label(text: impl Into<String>) -> Cell {
        Cell::new(text, CellClass::Label)
    }

    pub fn missing() -> Cell {
        Cell::new("—", CellClass::Missing)
    }
}

/// One table of the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Table {
    /// Stable identifier (also the HTML anchor), e.g. `h2-vs-h1-page50`.
    pub id: String,
    pub title: String,
    pub intro: Vec<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
    pub notes: Vec<String>,
}

impl Table {
    /// The cell in the row whose leading cells are `row_key` and the column named `column`.
    pub fn get(&self, row_key: &[&str], column: &str) -> Option<&Cell> {
        let col = self.header.iter().position(|h| h == column)?;
        self.rows
            .iter()
            .find(|r| {
                row_key.len() <= r.len() && row_key.iter().zip(r.iter()).all(|(k, c)| c.text == *k)
            })
            .and_then(|r| r.get(col))
    }
}

/// One block of the document.
#[derive(Debug, Clone)]
pub enum Block {
    Heading {
        level: u8,
        text: String,
        id: String,
    },
    /// Text with `code` spans in backticks.
    Para(String),
    List(Vec<String>),
    /// Two columns, no header row.
    KeyValues(Vec<(String, String)>),
    Table(Table),
    Figure {
        /// Path relative to the results directory (Markdown links to it).
        path: String,
        alt: String,
        caption: String,
        png: Vec<u8>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct Document {
    pub title: String,
    pub blocks: Vec<Block>,
}

impl Document {
    pub fn heading(&mut self, level: u8, text: &str, id: &str) {
        self.blocks.push(Block::Heading {
            level,
            text: text.to_string(),
            id: id.to_string(),
        });
    }

    pub fn para(&mut self, text: impl Into<String>) {
        self.blocks.push(Block::Para(text.into()));
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// GitHub-flavoured Markdown.
pub fn to_markdown(doc: &Document) -> String {
    let mut out = format!("# {}\n", doc.title);
    for b in &doc.blocks {
        out.push('\n');
        match b {
            Block::Heading { level, text, .. } => {
                out.push_str(&format!("{} {text}\n", "#".repeat(*level as usize)));
            }
            Block::Para(t) => out.push_str(&format!("{t}\n")),
            Block::List(items) => {
                for i in items {
                    out.push_str(&format!("- {}\n", i.replace('\n', " ")));
                }
            }
            Block::KeyValues(kv) => {
                out.push_str("| | |\n|---|---|\n");
                for (k, v) in kv {
                    out.push_str(&format!("| **{}** | {} |\n", md_cell(k), md_cell(v)));
                }
            }
            Block::Table(t) => {
                out.push_str(&format!("**{}**\n\n", t.title));
                for i in &t.intro {
                    out.push_str(&format!("{i}\n\n"));
                }
                out.push_str(&format!(
                    "| {} |\n",
                    t.header
                        .iter()
                        .map(|h| md_cell(h))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
                out.push_str(&format!("|{}\n", "---|".repeat(t.header.len())));
                for r in &t.rows {
                    out.push_str(&format!(
                        "| {} |\n",
                        r.iter()
                            .map(|c| md_cell(&c.text))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ));
                }
                for n in &t.notes {
                    out.push_str(&format!("\n{n}\n"));
                }
            }
            Block::Figure {
                path, alt, caption, ..
            } => {
                out.push_str(&format!("![{alt}]({path})\n\n*{caption}*\n"));
            }
        }
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Escapes text and turns `code` spans into `<code>`.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("<code>{}</code>", esc(part)));
        } else {
            out.push_str(&esc(part).replace("**", ""));
        }
    }
    out
}

const CSS: &str = r#"
@font-face { font-family: "PagebenchSans"; src: url("data:font/ttf;base64,FONT") format("truetype"); }
body { font-family: "PagebenchSans", "DejaVu Sans", sans-serif; margin: 0 auto; max-width: 1280px; padding: 16px 24px 48px; color: #1d1d1f; background: #fff; line-height: 1.45; }
h1 { font-size: 28px; margin: 8px 0 12px; }
h2 { font-size: 22px; margin: 32px 0 8px; border-bottom: 2px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 17px; margin: 22px 0 6px; }
p, li { font-size: 14px; }
code { background: #f2f3f5; padding: 0 3px; border-radius: 3px; font-size: 13px; }
nav ul { columns: 2; font-size: 14px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border: 1px solid #c9d1d9; padding: 3px 7px; text-align: right; }
td.label, th { white-space: nowrap; }
th { background: #f0f3f6; text-align: center; }
td.label { text-align: left; font-weight: bold; background: #fafbfc; }
td.faster { background: #cdeccd; }
td.slower { background: #f6cccc; }
td.ns { background: #ececec; }
td.undet { background: #fff3bf; }
td.dnf { background: #e8a0a0; font-weight: bold; }
td.study { color: #57606a; font-style: italic; }
td.missing { color: #8c959f; text-align: center; }
table.kv td { text-align: left; white-space: normal; }
table.kv td:first-child { font-weight: bold; background: #fafbfc; width: 170px; }
.tablewrap { overflow-x: auto; }
.tabletitle { font-weight: bold; font-size: 15px; margin-top: 18px; }
.note { color: #444c56; font-size: 13px; margin: 2px 0 8px; }
figure { margin: 14px 0 22px; }
figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { font-size: 13px; color: #444c56; margin-top: 4px; }
"#;

/// A self-contained HTML page: every image and the font are data URIs.
pub fn to_html(doc: &Document, font_ttf: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<title>{}</title>\n", esc(&doc.title)));
    out.push_str(&format!(
        "<style>{}</style>\n</head>\n<body>\n",
        CSS.replace("FONT", &b64.encode(font_ttf))
    ));
    out.push_str(&format!("<h1>{}</h1>\n", esc(&doc.title)));
    // Table of contents from the level-2 headings.
    let toc: Vec<String> = doc
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Heading { level: 2, text, id } => Some(format!(
                "<li><a href=\"#{}\">{}</a></li>",
                esc(id),
                esc(text)
            )),
            _ => None,
        })
        .collect();
    if !toc.is_empty() {
        out.push_str(&format!("<nav><ul>{}</ul></nav>\n", toc.join("")));
    }
    for b in &doc.blocks {
        match b {
            Block::Heading { level, text, id } => {
                out.push_str(&format!(
                    "<h{level} id=\"{}\">{}</h{level}>\n",
                    esc(id),
                    esc(text)
                ));
            }
            Block::Para(t) => out.push_str(&format!("<p>{}</p>\n", inline(t))),
            Block::List(items) => {
                out.push_str("<ul>\n");
                for i in items {
                    out.push_str(&format!("<li>{}</li>\n", inline(i)));
                }
                out.push_str("</ul>\n");
            }
            Block::KeyValues(kv) => {
                out.push_str("<table class=\"kv\">\n");
                for (k, v) in kv {
                    out.push_str(&format!(
                        "<tr><td>{}</td><td>{}</td></tr>\n",
                        esc(k),
                        inline(v)
                    ));
                }
                out.push_str("</table>\n");
            }
            Block::Table(t) => html_table(&mut out, t),
            Block::Figure {
                path,
                alt,
                caption,
                png,
            } => {
                out.push_str(&format!(
                    "<figure><img alt=\"{}\" data-file=\"{}\" src=\"data:image/png;base64,{}\"><figcaption>{}</figcaption></figure>\n",
                    esc(alt),
                    esc(path),
                    b64.encode(png),
                    inline(caption)
                ));
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// One table in HTML: its title, intro, header row, rows (cells coloured by class) and notes.
fn html_table(out: &mut String, t: &Table) {
    out.push_str(&format!(
        "<div class=\"tabletitle\" id=\"{}\">{}</div>\n",
        esc(&t.id),
        esc(&t.title)
    ));
    for i in &t.intro {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", inline(i)));
    }
    out.push_str("<div class=\"tablewrap\"><table>\n<tr>");
    for h in &t.header {
        out.push_str(&format!("<th>{}</th>", esc(h)));
    }
    out.push_str("</tr>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            let class = c.class.css();
            if class.is_empty() {
                out.push_str(&format!("<td>{}</td>", esc(&c.text)));
            } else {
                out.push_str(&format!("<td class=\"{class}\">{}</td>", esc(&c.text)));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    for n in &t.notes {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", inline(n)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Document {
        let mut d = Document {
            title: "t <1>".into(),
            blocks: vec![],
        };
        d.heading(2, "Setup", "setup");
        d.para("run `pagebench report` & see");
        d.blocks.push(Block::Table(Table {
            id: "x".into(),
            title: "T".into(),
            intro: vec![],
            header: vec!["profile".into(), "a|b".into()],
            rows: vec![vec![
                Cell::label("wired"),
                Cell::new("0.5 ↓ faster", CellClass::Faster),
            ]],
            notes: vec!["note".into()],
        }));
        d.blocks.push(Block::Figure {
            path: "charts/a.png".into(),
            alt: "A".into(),
            caption: "cap".into(),
            png: vec![1, 2, 3],
        });
        d
    }

    #[test]
    fn markdown_escapes_pipes_and_links_images() {
        let md = to_markdown(&doc());
        assert!(md.starts_with("# t <1>\n"));
        assert!(
            md.contains("| profile | a\\|b |\n|---|---|\n| wired | 0.5 ↓ faster |\n"),
            "{md}"
        );
        assert!(md.contains("![A](charts/a.png)"));
    }

    #[test]
    fn html_embeds_everything() {
        let html = to_html(&doc(), b"font");
        assert!(html.contains("<title>t &lt;1&gt;</title>"));
        assert!(html.contains("<code>pagebench report</code> &amp; see"));
        assert!(html.contains("<td class=\"faster\">0.5 ↓ faster</td>"));
        assert!(html.contains("src=\"data:image/png;base64,AQID\""));
        assert!(html.contains("base64,Zm9udA=="));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert_eq!(
            doc()
                .blocks
                .iter()
                .filter(|b| matches!(b, Block::Table(_)))
                .count(),
            1
        );
    }

    #[test]
    fn table_lookup() {
        let Block::Table(t) = &doc().blocks[2] else {
            panic!()
        };
        assert_eq!(t.get(&["wired"], "a|b").unwrap().class, CellClass::Faster);
        assert!(t.get(&["mobile"], "a|b").is_none());
    }
}
