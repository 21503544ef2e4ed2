use super::*;
use crate::evidence::metrics::{LcpCandidate, PaintEntries};
use crate::packets::order::OrderSummary;
use crate::packets::streams::{PriorityUpdate, WireProtocol, WireStreams};

fn resource(path: &str, start: f64, end: f64) -> ResourceMetrics {
    ResourceMetrics {
        path: path.into(),
        initiator: "link".into(),
        protocol: "h3".into(),
        start_ms: start,
        request_start_ms: start,
        response_start_ms: end - 5.0,
        response_end_ms: end,
        queueing_ms: 0.0,
        connect_ms: None,
        dns_ms: None,
        ttfb_ms: 0.0,
        download_ms: 5.0,
        transfer_size: 1000.0,
        encoded_body_size: 1000.0,
        status: 200,
        connection_id: Some(7),
        connection_reused: Some(true),
        initial_priority: Some("Highest".into()),
        priority: None,
        priority_changes: vec![],
        chunks: vec![],
        server_sent_ms: None,
        wire_priority: None,
    }
}

fn stream(id: u64, path: &str, priority: &str, spans: Vec<(f64, f64, u64)>) -> WireStream {
    WireStream {
        id,
        path: Some(path.into()),
        priority: Some(priority.into()),
        arrived_ms: Some(10.0),
        spans,
        ..WireStream::default()
    }
}

fn update(value: &str) -> PriorityUpdate {
    PriorityUpdate {
        sent_ms: 50.0,
        arrived_ms: Some(70.0),
        value: value.into(),
    }
}

/// The page over h3: a late stylesheet (u=2) and images the browser raised to u=1
/// after layout, sent first by an obedient server; one image left at u=3 went first too.
fn page() -> (Observation, Vec<ResourceMetrics>, WireEvidence) {
    let raw = |path: &str, status: &str| {
        let name = format!("https://a.test{path}");
        serde_json::json!({ "name": name, "renderBlockingStatus": status })
    };
    let obs = Observation {
        resources: vec![
            raw("/style.css", "blocking"),
            raw("/late.js", "blocking"),
            raw("/img/1.jpg", "non-blocking"),
            raw("/img/2.jpg", "non-blocking"),
        ],
        paint: Some(PaintEntries {
            first_contentful_paint: Some(500.0),
            largest_contentful_paint: vec![LcpCandidate {
                start_time: 700.0,
                size: 9e4,
                url: "https://a.test/img/1.jpg".into(),
                selector: "img".into(),
            }],
            ..PaintEntries::default()
        }),
        ..Observation::default()
    };
    let resources = vec![
        resource("/style.css", 20.0, 480.0),
        // Blocking, but it ended after the paint: not what the paint waited for.
        resource("/late.js", 20.0, 900.0),
        resource("/img/1.jpg", 20.0, 300.0),
        resource("/img/2.jpg", 20.0, 450.0),
    ];
    (obs, resources, wire())
}

/// The page's one connection: the stylesheet (u=2) sent after the images, the first raised
/// to u=1 by a PRIORITY_UPDATE, the second at u=3.
fn wire() -> WireEvidence {
    let mut img1 = stream(4, "/img/1.jpg", "u=3", vec![(20.0, 200.0, 90_000)]);
    img1.updates = vec![update("u=1")];
    let conn = WireConnection {
        protocol: WireProtocol::H3,
        client: "10.0.0.1:5000".parse().unwrap(),
        server: "10.0.0.2:443".parse().unwrap(),
        opened_ms: 0.0,
        streams: vec![
            stream(0, "/style.css", "u=2", vec![(300.0, 310.0, 5_000)]),
            img1,
            stream(8, "/img/2.jpg", "u=3", vec![(200.0, 290.0, 40_000)]),
            stream(12, "/late.js", "u=2", vec![(400.0, 800.0, 1_000)]),
        ],
    };
    WireEvidence {
        order: OrderSummary::default(),
        streams: WireStreams {
            connections: vec![conn],
            ..WireStreams::default()
        },
        navigation_ms: Some(0.0),
    }
}

#[test]
fn first_paint_waited_for_its_blocking_stylesheet_behind_images_the_browser_raised() {
    let (obs, resources, wire) = page();
    let paths = of(&obs, &resources, Some(&wire), &[]);
    let fcp = paths.fcp.unwrap();
    assert_eq!(fcp.paint_ms, 500.0);
    let on: Vec<&str> = fcp.requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(on, ["/style.css"], "late.js ended after the paint");
    let css = fcp.last().unwrap();
    assert_eq!(
        (css.wire_priority.as_deref(), css.urgency()),
        (Some("u=2"), 2)
    );
    let ahead = css.ahead.as_ref().unwrap();
    // img1, raised to u=1, went ahead by the browser's signal; img2 (u=3) by the server's.
    assert_eq!(
        (
            ahead.more_urgent.responses,
            ahead.more_urgent.bytes,
            ahead.more_urgent.raised
        ),
        (1, 90_000, 1)
    );
    assert_eq!(
        (ahead.not_more_urgent.responses, ahead.not_more_urgent.bytes),
        (1, 40_000)
    );
    // The LCP: the hero image's own request, raised on the wire.
    let lcp = paths.lcp.unwrap();
    assert_eq!(lcp.requests[0].path, "/img/1.jpg");
    assert_eq!(lcp.requests[0].wire_updates, ["u=1"]);
    assert_eq!(lcp.requests[0].urgency(), 1);
}

#[test]
fn without_the_wire_or_any_list_of_blocking_requests_nothing_is_guessed() {
    let (mut obs, mut resources, _) = page();
    let paths = of(&obs, &resources, None, &[]);
    let css = &paths.fcp.unwrap().requests[0];
    assert_eq!(
        (css.ahead.as_ref(), css.wire_priority.as_ref()),
        (None, None)
    );
    assert_eq!(css.urgency(), DEFAULT_URGENCY);
    // Firefox marks nothing render-blocking: without the head's blocking list, no FCP path;
    // with it (the early-hints rule, read from the page), the head's stylesheet.
    for r in &mut obs.resources {
        r.as_object_mut().unwrap().remove("renderBlockingStatus");
    }
    assert_eq!(of(&obs, &resources, None, &[]).fcp, None);
    obs.paint.as_mut().unwrap().head_blocking = vec!["https://a.test/style.css".into()];
    let fcp = of(&obs, &resources, None, &[]).fcp.unwrap();
    assert_eq!(fcp.requests[0].path, "/style.css");
    // A stylesheet in the body, marked non-blocking, still blocks what follows it.
    obs.paint.as_mut().unwrap().head_blocking.clear();
    obs.resources.push(serde_json::json!({
        "name": "https://a.test/body.css", "renderBlockingStatus": "non-blocking",
        "contentType": "text/css"
    }));
    resources.push(resource("/body.css", 20.0, 490.0));
    assert_eq!(
        of(&obs, &resources, None, &[])
            .fcp
            .unwrap()
            .last()
            .unwrap()
            .path,
        "/body.css"
    );
    obs.paint = None;
    assert_eq!(of(&obs, &resources, None, &[]), RenderPaths::default());
}

#[test]
fn urgency_reads_rfc9218_fields() {
    assert_eq!(urgency("u=1"), 1);
    assert_eq!(urgency("i, u=5"), 5);
    assert_eq!(urgency("i"), DEFAULT_URGENCY);
    assert_eq!(urgency("u=9"), DEFAULT_URGENCY);
}

#[test]
fn the_screen_s_changes_followed_the_responses_that_ended_last_before_each() {
    let (obs, resources, wire) = page();
    // Changes at 100 ms (before any response: the page itself, not listed), 320 (after
    // img/1), 460 and 470 (both after img/2: once) and 950 (after late.js).
    let visual = of(
        &obs,
        &resources,
        Some(&wire),
        &[100.0, 320.0, 460.0, 470.0, 950.0],
    )
    .visual
    .unwrap();
    assert_eq!(visual.paint_ms, 950.0, "visually complete: the last change");
    let followed: Vec<&str> = visual.requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(followed, ["/img/1.jpg", "/img/2.jpg", "/late.js"]);
    // Each with its urgency on the wire and what went ahead of it.
    assert_eq!(visual.last().unwrap().urgency(), 2);
    assert!(visual.last().unwrap().ahead.is_some());
    // Without a screencast, or with changes before any response, no visual path.
    assert_eq!(of(&obs, &resources, None, &[]).visual, None);
    assert_eq!(of(&obs, &resources, None, &[10.0]).visual, None);
    // A run without paint entries still has the screen's.
    let bare = Observation::default();
    assert!(of(&bare, &resources, None, &[500.0]).visual.is_some());
}
