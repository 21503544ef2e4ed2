use super::*;

/// A recorded load: `perf` (timeOrigin, nav, res, pb) and `events`.
pub(crate) fn fixture(name: &str) -> Observation {
    let path = format!(
        "{}/tests/fixtures/browser/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Observation {
        time_origin: v["perf"]["timeOrigin"].as_f64(),
        navigation: Some(v["perf"]["nav"].clone()),
        resources: v["perf"]["res"].as_array().unwrap().clone(),
        page_result: v["perf"].get("pb").cloned().filter(|p| !p.is_null()),
        network: crate::measure::browser::engines::chromium::network::view(
            serde_json::from_value(v["events"].clone()).unwrap(),
        ),
        paint: v["perf"]
            .get("paint")
            .map(|p| serde_json::from_value(p.clone()).unwrap()),
        chunks: v
            .get("chunks")
            .map(|c| serde_json::from_value(c.clone()).unwrap())
            .unwrap_or_default(),
        ..Default::default()
    }
}

fn res(start: f64, req: f64, end: f64) -> ResourceMetrics {
    ResourceMetrics {
        initiator: "img".into(),
        transfer_size: 0.0,
        encoded_body_size: 0.0,
        ..ResourceMetrics::fixture("/x", start, req, (req, end))
    }
}

#[test]
fn onwire_counts_request_to_response_end() {
    // Window 0..100, mid 50. In flight at 50: b (40..60) and c (50..90); a ends at 30,
    // d is queued until 55 (its startTime variant would count it: that one saturates).
    let r = vec![
        res(0.0, 0.0, 30.0),
        res(0.0, 40.0, 60.0),
        res(0.0, 50.0, 90.0),
        res(0.0, 55.0, 100.0),
    ];
    assert_eq!(onwire(&r), (Some(2), Some(3)));
    let tl = onwire_timeline(&r);
    assert_eq!(tl.first(), Some(&(0.0, 1)));
    assert_eq!(tl.last(), Some(&(100.0, 0)));
    assert_eq!(tl.iter().map(|x| x.1).max(), Some(3));
}

#[test]
fn url_paths() {
    assert_eq!(
        url_path("https://pagebench.test:8443/page10/a.css?x=1"),
        "/page10/a.css"
    );
    assert_eq!(url_path("https://pagebench.test"), "/");
}

#[test]
fn h2_page10_fixture() {
    let obs = fixture("h2-page10");
    let kind = WorkloadKind::Page {
        files: 10,
        file_bytes: None,
    };
    let (m, r) = derive(&obs, &kind, 0.0);
    assert_eq!(m.resources, 10);
    assert_eq!(r.iter().filter(|r| r.protocol == "h2").count(), 10);
    assert_eq!(m.completion_ms, m.load_event_end_ms);
    assert!(m.load_event_end_ms.unwrap() > 0.0);
    // One h2 connection carries everything.
    assert_eq!(m.connections, 1);
    assert_eq!(m.new_connections, 0);
    assert!(m.nav_connect_ms.unwrap() > 0.0);
    assert_eq!(m.handshake_rtts, None);
    let q = m.queueing_median_ms.unwrap();
    assert!(q >= 0.0 && q <= m.queueing_p95_ms.unwrap());
    assert!(m.onwire_peak.unwrap() >= m.onwire_mid.unwrap());
    assert!(r.iter().all(|r| r.connection_id.is_some()));
}

#[test]
fn h1_page10_fixture_opens_several_connections() {
    let obs = fixture("h1-page10");
    let (m, r) = derive(
        &obs,
        &WorkloadKind::Page {
            files: 10,
            file_bytes: None,
        },
        40.0,
    );
    assert!(r.iter().all(|r| r.protocol == "http/1.1"));
    assert!(m.connections > 1 && m.connections <= 6, "{}", m.connections);
    assert!(m.new_connections >= 1);
    assert!(m.handshake_rtts.is_some());
}

#[test]
fn download_fixture() {
    let obs = fixture("h2-download");
    let (m, r) = derive(&obs, &WorkloadKind::Download { bytes: 3_000_000 }, 0.0);
    assert_eq!(r.len(), 1);
    assert_eq!(m.transfer_bytes, Some(3_000_000));
    let c = m.completion_ms.unwrap();
    assert_eq!(c, r[0].response_end_ms);
    let t = m.transfer_ms.unwrap();
    assert!((m.goodput_mbit.unwrap() - 3_000_000.0 * 8.0 / (t * 1000.0)).abs() < 1e-9);
    // A body the page found corrupt has no completion.
    let mut bad = obs.clone();
    bad.page_result = Some(serde_json::json!({"done": true, "ok": false}));
    let (m, _) = derive(&bad, &WorkloadKind::Download { bytes: 3_000_000 }, 0.0);
    assert_eq!(m.completion_ms, None);
}

#[test]
fn cls_is_the_largest_session_window() {
    let shift = |t: f64, v: f64, input: bool| LayoutShift {
        start_time: t,
        value: v,
        had_recent_input: input,
    };
    assert_eq!(cumulative_layout_shift(&[]), 0.0);
    // 0.1 + 0.2 within a second; 1.5 s later a new window of 0.25; input shifts never count.
    let shifts = [
        shift(100.0, 0.1, false),
        shift(900.0, 0.2, false),
        shift(2400.0, 0.25, false),
        shift(2500.0, 0.5, true),
    ];
    assert!((cumulative_layout_shift(&shifts) - 0.3).abs() < 1e-12);
    // A window closes after 5 s even without a 1 s gap.
    let steady: Vec<LayoutShift> = (0..12)
        .map(|i| shift(i as f64 * 900.0, 0.1, false))
        .collect();
    assert!((cumulative_layout_shift(&steady) - 0.6).abs() < 1e-9);
}

#[test]
fn paint_metrics_come_from_the_last_lcp_and_the_hero() {
    let mut obs = fixture("h2-page10");
    obs.paint = Some(PaintEntries {
        supported: None,
        first_paint: Some(80.0),
        first_contentful_paint: Some(96.0),
        largest_contentful_paint: vec![
            LcpCandidate {
                start_time: 96.0,
                size: 4000.0,
                url: String::new(),
                selector: "body > h1".into(),
            },
            LcpCandidate {
                start_time: 120.0,
                size: 204_800.0,
                url: "https://pagebench.test/page10/img/image003.png".into(),
                selector: "body > img:nth-of-type(1)".into(),
            },
        ],
        layout_shifts: vec![],
        elements: vec![ElementPaint {
            identifier: "hero".into(),
            render_time: 0.0,
            load_time: 118.0,
            url: String::new(),
        }],
        head_blocking: vec![],
    });
    let kind = WorkloadKind::Page {
        files: 10,
        file_bytes: None,
    };
    let (m, _) = derive(&obs, &kind, 0.0);
    assert_eq!((m.fcp_ms, m.lcp_ms), (Some(96.0), Some(120.0)));
    assert_eq!(m.lcp_element.as_deref(), Some("body > img:nth-of-type(1)"));
    assert!(m.lcp_url.unwrap().ends_with("image003.png"));
    // A hidden render time falls back to the load time.
    assert_eq!(m.hero_ms, Some(118.0));
    assert_eq!(m.cls, Some(0.0));
    // Without paint entries there are no paint metrics (not zeros).
    let (none, _) = derive(&fixture("h2-page10"), &kind, 0.0);
    assert_eq!((none.fcp_ms, none.lcp_ms, none.cls), (None, None, None));
    // An engine without Layout Instability (Firefox) has no CLS, not a CLS of 0.
    obs.paint.as_mut().unwrap().supported =
        Some(vec!["paint".into(), "largest-contentful-paint".into()]);
    let (ff, _) = derive(&obs, &kind, 0.0);
    assert_eq!((ff.lcp_ms, ff.cls), (Some(120.0), None));
}

#[test]
fn paint_order_problems_name_what_is_out_of_order() {
    let m = RunMetrics {
        fcp_ms: Some(300.0),
        lcp_ms: Some(250.0),
        load_event_end_ms: Some(280.0),
        ..Default::default()
    };
    let p = paint_order_problems(&m, true);
    assert_eq!(
        p,
        [
            "LCP (250 ms) before FCP (300 ms)",
            "FCP (300 ms) after loadEventEnd (280 ms) on a generated page"
        ]
    );
    // A real site may paint after its load event.
    assert_eq!(paint_order_problems(&m, false).len(), 1);
    let fine = RunMetrics {
        fcp_ms: Some(100.0),
        lcp_ms: Some(200.0),
        load_event_end_ms: Some(280.0),
        ..Default::default()
    };
    assert!(paint_order_problems(&fine, true).is_empty());
}

#[test]
fn priorities_and_chunks_are_placed_on_the_navigation_clock() {
    let mut obs = fixture("h2-page10");
    let kind = WorkloadKind::Page {
        files: 10,
        file_bytes: None,
    };
    let (_, before) = derive(&obs, &kind, 0.0);
    assert!(before.iter().all(|r| r.initial_priority.is_some()));
    assert!(before.iter().all(|r| r.chunks.is_empty()));
    // One chunk of a stylesheet 1 ms before its responseEnd on CDP's clock, and a change of
    // its priority at its requestStart.
    let css = before.iter().find(|r| r.path.ends_with(".css")).unwrap();
    let reqs = obs.network.requests.clone();
    let c = reqs.iter().find(|c| c.url.ends_with(".css")).unwrap();
    // Navigation start on CDP's clock, from this request alone.
    let nav = c.request_time.unwrap() * 1000.0 + c.send_start_ms.unwrap() - css.request_start_ms;
    let at = |t_ms: f64| (nav + t_ms) / 1000.0;
    obs.chunks.push(DataChunk {
        request_id: c.request_id.clone(),
        timestamp: at(css.response_end_ms - 1.0),
        data_length: 1234,
        encoded_data_length: 0,
    });
    obs.chunks.push(DataChunk {
        request_id: c.request_id.clone(),
        timestamp: at(css.response_end_ms),
        data_length: 0,
        encoded_data_length: 0,
    });
    let changed = obs
        .network
        .requests
        .iter_mut()
        .find(|r| r.request_id == c.request_id)
        .unwrap();
    changed
        .priority_changes
        .push((at(css.request_start_ms), "Low".into()));
    let (_, after) = derive(&obs, &kind, 0.0);
    let css2 = after.iter().find(|r| r.path == css.path).unwrap();
    // The median offset over all resources is within a millisecond of this one's.
    assert_eq!(css2.chunks.len(), 1, "the empty last chunk is left out");
    assert!((css2.chunks[0].t_ms - (css.response_end_ms - 1.0)).abs() < 1.0);
    assert_eq!(css2.chunks[0].bytes, 1234);
    assert_eq!(css2.priority.as_deref(), Some("Low"));
    assert_eq!(css2.initial_priority, css.initial_priority);
    assert!((css2.priority_changes[0].t_ms - css.request_start_ms).abs() < 1.0);
}

#[test]
fn server_sends_join_by_path_in_start_order_on_the_navigation_clock() {
    use crate::packets::streams::{
        PriorityUpdate, WireConnection, WireProtocol, WireStream, WireStreams,
    };
    use crate::packets::WireEvidence;
    let stream = |id: u64, path: &str, at: f64, spans: Vec<(f64, f64, u64)>| WireStream {
        id,
        path: Some(path.into()),
        priority: Some("u=3".into()),
        requested_ms: Some(at),
        body_bytes: spans.iter().map(|s| s.2).sum(),
        spans,
        ..WireStream::default()
    };
    let mut late = stream(5, "/late.css?v=1", 30.0, vec![(140.0, 150.0, 10)]);
    late.updates.push(PriorityUpdate {
        sent_ms: 31.0,
        arrived_ms: None,
        value: "u=0".into(),
    });
    let wire = WireEvidence {
        order: Default::default(),
        streams: WireStreams {
            connections: vec![WireConnection {
                protocol: WireProtocol::H2,
                client: "10.0.0.1:5000".parse().unwrap(),
                server: "10.0.0.2:443".parse().unwrap(),
                opened_ms: 0.0,
                streams: vec![
                    stream(1, "/a.png", 20.0, vec![(120.0, 125.0, 5)]),
                    stream(3, "/a.png", 25.0, vec![(126.0, 130.0, 5)]),
                    late,
                ],
            }],
            ..Default::default()
        },
        navigation_ms: Some(100.0),
    };
    let mut first = res(1.0, 2.0, 40.0);
    first.path = "/a.png".into();
    let mut second = res(5.0, 6.0, 40.0);
    second.path = "/a.png".into();
    let mut css = res(8.0, 9.0, 60.0);
    css.path = "/late.css".into();
    let mut unseen = res(9.0, 10.0, 60.0);
    unseen.path = "/h1.js".into();
    let mut resources = vec![second.clone(), first.clone(), css, unseen];
    resources[0].start_ms = 5.0;
    add_server_sends(&mut resources, &wire);
    assert_eq!(
        resources[1].server_sent_ms,
        Some((20.0, 25.0)),
        "first started, first stream"
    );
    assert_eq!(resources[0].server_sent_ms, Some((26.0, 30.0)));
    assert_eq!(resources[2].server_sent_ms, Some((40.0, 50.0)));
    assert_eq!(
        resources[2].wire_priority.as_deref(),
        Some("u=0"),
        "the update wins"
    );
    assert_eq!(resources[1].wire_priority.as_deref(), Some("u=3"));
    assert_eq!(resources[3].server_sent_ms, None);
    // Without the navigation on the wire's clock nothing is placed.
    let mut again = vec![first];
    add_server_sends(
        &mut again,
        &WireEvidence {
            navigation_ms: None,
            ..wire
        },
    );
    assert_eq!(again[0].server_sent_ms, None);
}
