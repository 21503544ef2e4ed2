//! Plain-text tables for the terminal: columns padded to the widest cell.

/// Renders rows (the first is the header) as aligned columns with a rule under the header.
pub fn table<R: AsRef<[String]>>(rows: &[R]) -> String {
    let ncol = rows.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
    let mut widths = vec![0usize; ncol];
    for r in rows {
        for (i, c) in r.as_ref().iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        let cells = r.as_ref();
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if ri == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * ncol.saturating_sub(1);
            out.push_str(&"-".repeat(total.min(120)));
            out.push('\n');
        }
    }
    out
}

/// Lists at most a few items, then "and N more".
pub fn few(items: &[String]) -> String {
    const SHOW: usize = 4;
    let mut s = items
        .iter()
        .take(SHOW)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOW {
        s.push_str(&format!(" and {} more", items.len() - SHOW));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_columns() {
        let rows = vec![
            vec!["a".to_string(), "bb".to_string()],
            vec!["ccc".to_string(), "d".to_string()],
        ];
        assert_eq!(super::table(&rows), "a    bb\n-------\nccc  d\n");
    }
}
