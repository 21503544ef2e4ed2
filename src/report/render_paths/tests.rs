use super::*;
use crate::evidence::render_path::{Group, RenderPaths};
use crate::report::sharding::tests::{data, row};

fn stylesheet(ahead: Option<Ahead>, updates: &[&str]) -> PathRequest {
    PathRequest {
        path: "/style.css".into(),
        start_ms: 30.0,
        response_start_ms: 2050.0,
        end_ms: 2100.0,
        browser_priority: Some("Highest".into()),
        browser_priority_changes: vec![],
        wire_priority: Some("u=2".into()),
        wire_updates: updates.iter().map(|u| u.to_string()).collect(),
        server_sent_ms: Some((1902.0, 2000.0)),
        ahead,
    }
}

fn raised_images() -> Ahead {
    Ahead {
        more_urgent: Group {
            responses: 40,
            bytes: 1_200_000,
            raised: 40,
        },
        not_more_urgent: Group::default(),
    }
}

#[test]
fn the_sentence_names_the_request_its_urgency_and_why_others_went_first() {
    let r = stylesheet(Some(raised_images()), &[]);
    let path = RenderPath {
        paint_ms: 2180.0,
        requests: vec![r.clone()],
    };
    assert_eq!(
        sentence("FCP", &path, &r),
        "FCP (2180 ms) waited for /style.css (u=2), which ended at 2100 ms: the server sent 40 \
responses (1.20 MB) ahead of it on its connection: 40 more urgent by the browser's signal (40 \
raised by PRIORITY_UPDATE)"
    );
    let own_order = Ahead {
        more_urgent: Group::default(),
        not_more_urgent: Group {
            responses: 3,
            bytes: 90_000,
            raised: 0,
        },
    };
    let r = stylesheet(Some(own_order), &[]);
    assert!(sentence("FCP", &path, &r)
        .ends_with("3 responses (90 KB) ahead of it on its connection: 3 as or less urgent, by the server's own order"));
    let r = stylesheet(Some(Ahead::default()), &[]);
    assert!(sentence("FCP", &path, &r)
        .ends_with("the server sent nothing ahead of it on its connection"));
    let r = stylesheet(None, &[]);
    assert!(sentence("FCP", &path, &r).contains("the wire was not read"));
}

#[test]
fn each_series_median_run_gets_a_row_per_paint_and_its_sentence() {
    let rows: Vec<_> = (1..=3)
        .flat_map(|r| {
            [
                row("wired", "page50", "h1", r, 300.0 + r as f64),
                row("wired", "page50", "h2", r, 250.0 + r as f64),
            ]
        })
        .collect();
    let mut d = data(&rows, &["page50"]);
    assert!(tables(&d).is_empty(), "no render paths read: no table");
    let median = d.summary.series[1].median_run.clone().unwrap();
    let r = stylesheet(Some(raised_images()), &["u=1"]);
    d.median_render_paths.insert(
        median,
        RenderPaths {
            fcp: Some(RenderPath {
                paint_ms: 2180.0,
                requests: vec![r],
            }),
            ..RenderPaths::default()
        },
    );
    let t = tables(&d);
    assert_eq!(t.len(), 1);
    let cells: Vec<&str> = t[0].rows[0].iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        cells,
        [
            "wired · h2",
            "FCP",
            "2180",
            "/style.css",
            "u=2 → u=1",
            "Highest",
            "1902",
            "40 (1.20 MB)",
            "none"
        ]
    );
    assert!(t[0].notes[0].starts_with("`wired · h2`: FCP (2180 ms) waited for /style.css (u=1)"));
}

#[test]
fn a_paint_s_difference_says_what_each_side_waited_for() {
    let rows: Vec<_> = (1..=3)
        .map(|r| row("wired", "page50", "h2", r, 250.0 + r as f64))
        .collect();
    let mut d = data(&rows, &["page50"]);
    let path = |r: PathRequest| RenderPaths {
        fcp: Some(RenderPath {
            paint_ms: 2180.0,
            requests: vec![r],
        }),
        lcp: None,
        visual: None,
    };
    d.median_render_paths.insert(
        "h3-run".into(),
        path(stylesheet(Some(raised_images()), &["u=2"])),
    );
    d.median_render_paths.insert(
        "h2-run".into(),
        path(stylesheet(Some(Ahead::default()), &[])),
    );
    let (h3, h2) = ("h3-run".to_string(), "h2-run".to_string());
    let fcp = crate::evidence::metric_registry::FCP_MS.name;
    let said = contrast(&d, fcp, ("h3", Some(&h3)), ("h2", Some(&h2))).unwrap();
    assert_eq!(
        said,
        "h3 waited for /style.css (u=2), which ended at 2100 ms: the server sent 40 responses \
(1.20 MB) ahead of it on its connection: 40 more urgent by the browser's signal (40 raised by \
PRIORITY_UPDATE); h2 waited for /style.css (u=2), which ended at 2100 ms: the server sent \
nothing ahead of it on its connection"
    );
    // Another metric, or no median run with a path: nothing to say.
    let load = crate::evidence::metric_registry::COMPLETION_MS.name;
    assert_eq!(
        contrast(&d, load, ("h3", Some(&h3)), ("h2", Some(&h2))),
        None
    );
    assert_eq!(contrast(&d, fcp, ("h3", None), ("h2", None)), None);
}

fn change(at_ms: f64, gain_pct: f64, after: &str) -> VisualChange {
    VisualChange {
        at_ms,
        gain_pct,
        after: after.into(),
    }
}

#[test]
fn speed_index_s_difference_says_what_each_side_s_screen_changes_followed() {
    let rows: Vec<_> = (1..=3)
        .map(|r| row("wired", "page50", "h2", r, 250.0 + r as f64))
        .collect();
    let mut d = data(&rows, &["page50"]);
    // The three largest changes, in time order; a fourth, smaller, counted.
    let h3 = vec![
        change(900.0, 2.0, "/page50/"),
        change(1180.0, 62.0, "/style.css"),
        change(1500.0, -5.0, "/app.js"),
        change(2110.0, 41.0, "/img/3.png"),
    ];
    assert_eq!(
        changes_words(&h3),
        "changed most at 1180 ms after /style.css (+62 %), at 1500 ms after /app.js (-5 %), \
at 2110 ms after /img/3.png (+41 %) and 1 more time"
    );
    d.median_visual_changes.insert("h3-run".into(), h3);
    d.median_visual_changes
        .insert("h2-run".into(), vec![change(400.0, 100.0, "/style.css")]);
    let (h3, h2) = ("h3-run".to_string(), "h2-run".to_string());
    let si = crate::evidence::metric_registry::SPEED_INDEX_MS.name;
    let said = contrast(&d, si, ("h3", Some(&h3)), ("h2", Some(&h2))).unwrap();
    assert!(
        said.ends_with("; h2's screen changed most at 400 ms after /style.css (+100 %)"),
        "{said}"
    );
    assert!(
        said.starts_with("h3's screen changed most at 1180 ms"),
        "{said}"
    );
    assert_eq!(contrast(&d, si, ("h3", None), ("h2", None)), None);
    // The section's notes say it per series with changes.
    d.summary.series[0].median_run = Some("h2-run".into());
    let t = tables(&d);
    assert!(t[0]
        .notes
        .iter()
        .any(|n| n.contains("the screen changed most at 400 ms")));
}
