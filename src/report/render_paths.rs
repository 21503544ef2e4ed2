//! What the paints waited for (pure): per workload, each series' median run's render paths
//! (`evidence::render_path`) — the request first contentful paint waited for longest among
//! those that can block it, and the LCP element's — with its urgency as the browser sent it,
//! and what the server sent ahead of it on its connection, by the browser's signal or by the
//! server's own order; each in a sentence; and the screen's largest changes (what Speed Index
//! is made of) with the response each followed.

use super::doc::{Cell, Table};
use super::report_data::ReportData;
use crate::evidence::paint_round_trips::VisualChange;
use crate::evidence::render_path::{Ahead, PathRequest, RenderPath};
use crate::results::summary::SeriesStats;

/// What the section says before its tables.
pub const INTRO: &str = "Each series' median run: the request each paint waited for — for first contentful paint the last to end before it of the requests that can block a first render (those the browser marked render-blocking, the head's stylesheets and synchronous scripts, and every stylesheet: one in the body blocks what follows it), for largest contentful paint the LCP element's — with its urgency on the wire (the request's `priority`, then each PRIORITY_UPDATE) and what the server sent on the same connection after it could read that request and before its last byte: more urgent by the browser's last signal (the browser's order), or as or less urgent (the server's own order). With `--visual`, each median run's largest screen changes too (Speed Index is their times weighted by how much of the screen each completed), each with the response that ended last before it.";

/// One table per workload with render paths; none without.
pub fn tables(data: &ReportData) -> Vec<Table> {
    data.workloads
        .iter()
        .filter_map(|w| table(data, w))
        .collect()
}

fn table(data: &ReportData, w: &str) -> Option<Table> {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for s in data.summary.series.iter().filter(|s| s.key.workload == w) {
        let Some(paths) = s
            .median_run
            .as_ref()
            .and_then(|id| data.median_render_paths.get(id))
        else {
            continue;
        };
        let paths = [
            ("FCP", &paths.fcp),
            ("LCP", &paths.lcp),
            ("visually complete", &paths.visual),
        ];
        for (metric, path) in paths {
            let Some((path, last)) = path.as_ref().and_then(|p| Some((p, p.last()?))) else {
                continue;
            };
            rows.push(row(&series_name(data, s), metric, path, last));
            notes.push(format!(
                "`{}`: {}.",
                series_name(data, s),
                sentence(metric, path, last)
            ));
        }
    }
    for s in data.summary.series.iter().filter(|s| s.key.workload == w) {
        if let Some(changes) = median_changes(data, s.median_run.as_ref()) {
            let name = series_name(data, s);
            notes.push(format!("`{name}`: the screen {}.", changes_words(changes)));
        }
    }
    (!rows.is_empty() || !notes.is_empty()).then(|| Table {
        id: format!("render-paths-{w}"),
        title: format!("{w}: what the paints waited for"),
        intro: vec![],
        header: [
            "series",
            "paint",
            "at (ms)",
            "waited for",
            "urgency (wire)",
            "browser's priority",
            "server's first byte (ms)",
            "ahead: more urgent",
            "ahead: as or less urgent",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes,
    })
}

/// `profile · variant`, with the server, browser and view where the matrix has more than one.
fn series_name(data: &ReportData, s: &SeriesStats) -> String {
    let mut name = format!("{} · {}", s.key.profile, s.key.variant);
    if data.servers.len() > 1 {
        name.push_str(&format!(" · {}", s.key.server));
    }
    if data.browsers.len() > 1 {
        name.push_str(&format!(" · {}", s.key.browser));
    }
    if data.views.len() > 1 {
        name.push_str(&format!(" · {}", s.key.view));
    }
    name
}

fn row(series: &str, metric: &str, path: &RenderPath, r: &PathRequest) -> Vec<Cell> {
    let group = |g: &crate::evidence::render_path::Group| {
        if g.responses == 0 {
            "none".to_string()
        } else {
            format!("{} ({})", g.responses, kb(g.bytes))
        }
    };
    vec![
        Cell::label(series),
        Cell::text(metric),
        Cell::text(format!("{:.0}", path.paint_ms)),
        Cell::text(r.path.clone()),
        Cell::text(urgency_story(r)),
        Cell::text(r.browser_priority.clone().unwrap_or_else(|| "-".into())),
        Cell::text(
            r.server_sent_ms
                .map_or("-".into(), |(first, _)| format!("{first:.0}")),
        ),
        Cell::text(
            r.ahead
                .as_ref()
                .map_or("-".into(), |a| group(&a.more_urgent)),
        ),
        Cell::text(
            r.ahead
                .as_ref()
                .map_or("-".into(), |a| group(&a.not_more_urgent)),
        ),
    ]
}

fn kb(bytes: u64) -> String {
    if bytes >= 1_000_000 {
        format!("{:.2} MB", bytes as f64 / 1e6)
    } else {
        format!("{:.0} KB", bytes as f64 / 1e3)
    }
}

/// `u=2`, or `u=3 → u=1` when PRIORITY_UPDATE frames changed it; `-` without the wire.
fn urgency_story(r: &PathRequest) -> String {
    let Some(first) = r
        .wire_priority
        .clone()
        .or_else(|| (!r.wire_updates.is_empty()).then(|| "(none: u=3)".to_string()))
    else {
        return "-".into();
    };
    std::iter::once(first)
        .chain(r.wire_updates.iter().cloned())
        .collect::<Vec<_>>()
        .join(" → ")
}

/// "FCP (502 ms) waited for /style.css (u=2), which ended at 480 ms: the server sent 40
/// responses (1.20 MB) ahead of it on its connection, all more urgent by the browser's
/// signal (40 raised by PRIORITY_UPDATE)".
pub fn sentence(metric: &str, path: &RenderPath, r: &PathRequest) -> String {
    let mut s = format!(
        "{metric} ({:.0} ms) waited for {}{}, which ended at {:.0} ms",
        path.paint_ms,
        r.path,
        r.wire_priority
            .as_ref()
            .map_or(String::new(), |_| format!(" (u={})", r.urgency())),
        r.end_ms
    );
    match &r.ahead {
        Some(a) => s.push_str(&format!(": {}", ahead_words(a))),
        None => s.push_str(" (the wire was not read: what went ahead of it is unknown)"),
    }
    s
}

fn median_changes<'a>(data: &'a ReportData, run: Option<&String>) -> Option<&'a [VisualChange]> {
    data.median_visual_changes.get(run?).map(Vec::as_slice)
}

/// How many of the largest changes a sentence names.
const CHANGES_NAMED: usize = 3;

/// "changed most at 1180 ms after /style.css (62 %), at 2110 ms after /img/3.png (20 %) and
/// 6 more times": the largest changes, in time order, and what each followed.
pub fn changes_words(changes: &[VisualChange]) -> String {
    let mut largest: Vec<&VisualChange> = changes.iter().collect();
    largest.sort_by(|a, b| b.gain_pct.abs().total_cmp(&a.gain_pct.abs()));
    largest.truncate(CHANGES_NAMED);
    largest.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    let named: Vec<String> = largest
        .iter()
        .map(|c| {
            format!(
                "at {:.0} ms after {} ({:+.0} %)",
                c.at_ms, c.after, c.gain_pct
            )
        })
        .collect();
    let more = changes.len() - largest.len();
    let tail = match more {
        0 => String::new(),
        1 => " and 1 more time".to_string(),
        n => format!(" and {n} more times"),
    };
    format!("changed most {}{tail}", named.join(", "))
}

/// What each side's paint waited for, for a difference on that paint (`metric`: `fcp_ms` or
/// `lcp_ms`): "h3: /style.css (u=2) ended at 2100 ms; the server sent 40 responses … ahead of
/// it …; h2: …"; for Speed Index and visual completeness, what each side's screen changes
/// followed — None for another metric or when neither side's median run has the path.
pub fn contrast(
    data: &ReportData,
    metric: &str,
    (a_name, a_run): (&str, Option<&String>),
    (b_name, b_run): (&str, Option<&String>),
) -> Option<String> {
    let pick = |run: Option<&String>| {
        let paths = data.median_render_paths.get(run?)?;
        let path = match metric {
            m if m == crate::evidence::metric_registry::FCP_MS.name => paths.fcp.as_ref(),
            m if m == crate::evidence::metric_registry::LCP_MS.name => paths.lcp.as_ref(),
            _ => None,
        }?;
        Some((path, path.last()?))
    };
    if metric == crate::evidence::metric_registry::SPEED_INDEX_MS.name
        || metric == crate::evidence::metric_registry::VISUAL_COMPLETE_MS.name
    {
        let side = |name: &str, run| {
            median_changes(data, run).map(|c| format!("{name}'s screen {}", changes_words(c)))
        };
        let (a, b) = (side(a_name, a_run), side(b_name, b_run));
        return (a.is_some() || b.is_some())
            .then(|| [a, b].into_iter().flatten().collect::<Vec<_>>().join("; "));
    }
    let side = |name: &str, run: Option<&String>| {
        pick(run).map(|(path, r)| {
            let words = sentence("it", path, r);
            // "it (… ms) waited for …": the side's name instead, and no paint time again.
            let rest = words
                .split_once(" waited for ")
                .map_or(words.as_str(), |w| w.1);
            format!("{name} waited for {rest}")
        })
    };
    let (a, b) = (side(a_name, a_run), side(b_name, b_run));
    (a.is_some() || b.is_some())
        .then(|| [a, b].into_iter().flatten().collect::<Vec<_>>().join("; "))
}

fn ahead_words(a: &Ahead) -> String {
    let (m, n) = (&a.more_urgent, &a.not_more_urgent);
    let total = m.responses + n.responses;
    if total == 0 {
        return "the server sent nothing ahead of it on its connection".into();
    }
    let raised = |g: &crate::evidence::render_path::Group| {
        if g.raised > 0 {
            format!(" ({} raised by PRIORITY_UPDATE)", g.raised)
        } else {
            String::new()
        }
    };
    let mut parts = Vec::new();
    if m.responses > 0 {
        parts.push(format!(
            "{} more urgent by the browser's signal{}",
            m.responses,
            raised(m)
        ));
    }
    if n.responses > 0 {
        parts.push(format!(
            "{} as or less urgent, by the server's own order{}",
            n.responses,
            raised(n)
        ));
    }
    format!(
        "the server sent {total} responses ({}) ahead of it on its connection: {}",
        kb(m.bytes + n.bytes),
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests;
