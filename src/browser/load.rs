//! One navigation in a launched browser: navigate, wait for the load (and for the page's own
//! transfer on download/upload pages), then collect Navigation Timing, Resource Timing, the
//! page's result and the CDP events. Ends as completed, timed out, crashed or failed.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use super::cdp::{self, CdpError};
use super::launch::ChromiumProcess;
use crate::metrics::{CdpEvent, DataChunk, Observation, PaintEntries, ScreencastFrame};
use crate::signals;
use crate::validate::LoadEnd;
use crate::workload::WorkloadKind;

/// CDP events kept in the run record as they came (`Network.dataReceived` is kept compacted, as
/// [`DataChunk`]s; the rest is noise for our metrics).
const KEPT_EVENTS: [&str; 7] = [
    "Network.requestWillBeSent",
    "Network.resourceChangedPriority",
    "Network.responseReceived",
    "Network.loadingFinished",
    "Network.loadingFailed",
    "Page.loadEventFired",
    "Page.domContentEventFired",
];

/// How long a page may keep loading subresources after its load event before we stop waiting
/// for the ones still missing (they are then reported missing by validation).
const AFTER_LOAD_GRACE_MS: u32 = 1000;

/// When a load is over (after which the timings, events and bodies are collected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    /// The load event, then (within a grace period) `expected` Resource Timing entries and, on
    /// transfer pages, the page's own end of transfer.
    Resources { expected: usize, transfer: bool },
    /// The load event, then no request in flight for `quiet`.
    NetworkIdle { quiet: Duration },
    /// A fixed time after the navigation started (load event or not).
    Elapsed(Duration),
}

/// What a load does besides measuring.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadExtras<'a> {
    /// Keep every response body (after the load).
    pub keep_bodies: bool,
    /// Run before the page's own scripts in every document.
    pub init_script: Option<&'a str>,
    /// Record a screencast of the load (`--visual`): frames until the page stops changing.
    pub visual: bool,
}

/// Screencast frames: JPEG, small enough to be cheap, large enough for a filmstrip.
const SCREENCAST: (u32, u32, u32) = (640, 360, 70);

/// After the load, the screencast goes on until no frame came for this long…
const VISUAL_QUIET: Duration = Duration::from_millis(1000);
/// …or this long after the load (a page that never stops animating).
const VISUAL_TAIL_MAX: Duration = Duration::from_secs(5);

/// Loads `url` (a workload page of `kind` with `expected_resources` subresources) and returns
/// what the browser reported. Errors only for interruption by a signal; every other failure is
/// a [`LoadEnd`].
pub fn load(
    browser: &mut ChromiumProcess,
    url: &str,
    kind: &WorkloadKind,
    expected_resources: usize,
    timeout: Duration,
    extras: LoadExtras,
) -> Result<(Observation, LoadEnd)> {
    let wait = WaitFor::Resources {
        expected: expected_resources,
        transfer: !kind.is_page(),
    };
    load_until(browser, url, wait, timeout, extras)
}

/// Loads `url` until `wait` says the load is over.
pub fn load_until(
    browser: &mut ChromiumProcess,
    url: &str,
    wait: WaitFor,
    timeout: Duration,
    extras: LoadExtras,
) -> Result<(Observation, LoadEnd)> {
    let LoadExtras {
        keep_bodies,
        init_script,
        visual,
    } = extras;
    let deadline = Instant::now() + timeout;
    let short = Duration::from_secs(10);
    let mut obs = Observation::default();

    let session = match attach(browser, short, init_script) {
        Ok(s) => s,
        Err(e) => return Ok((obs, crashed_or(browser, e))),
    };
    let _ = browser.cdp.drain_events();
    if visual {
        let (w, h, quality) = SCREENCAST;
        let r = browser.cdp.call(
            Some(&session),
            "Page.startScreencast",
            json!({ "format": "jpeg", "quality": quality, "maxWidth": w, "maxHeight": h }),
            short,
        );
        if let Err(e) = r {
            return Ok((obs, crashed_or(browser, e.into())));
        }
    }

    let started = Instant::now();
    let nav = browser.cdp.call(
        Some(&session),
        "Page.navigate",
        json!({ "url": url }),
        remaining(deadline),
    );
    match nav {
        Ok(r) => {
            if let Some(err) = r.get("errorText").and_then(Value::as_str) {
                collect_events(browser, &session, &mut obs);
                return Ok((
                    obs,
                    LoadEnd::NavigationFailed(format!("{err} loading {url}")),
                ));
            }
        }
        Err(CdpError::Timeout { .. }) => {
            collect(browser, &session, &mut obs);
            return Ok((obs, timed_out(timeout, "the navigation did not commit")));
        }
        Err(e) => return Ok((obs, crashed_or(browser, e.into()))),
    }

    if let WaitFor::Elapsed(d) = wait {
        let until = (started + d).min(deadline);
        loop {
            let left = remaining(until);
            if left.is_zero() {
                break;
            }
            if signals::interrupted() {
                return Err(signals::Interrupted.into());
            }
            match browser.cdp.next_event(left.min(Duration::from_millis(200))) {
                Some(e) => keep_event(&mut obs, &session, e),
                None if browser.cdp.is_closed() || browser.has_exited() => {
                    return Ok((obs, crashed(browser)))
                }
                None => {}
            }
        }
        return Ok(finish(browser, &session, obs, keep_bodies, visual));
    }

    // Wait for the load event without touching the page (polling would perturb the load).
    let mut loaded = false;
    while !loaded {
        if signals::interrupted() {
            return Err(signals::Interrupted.into());
        }
        let left = remaining(deadline);
        if left.is_zero() {
            collect(browser, &session, &mut obs);
            return Ok((obs, timed_out(timeout, "no load event")));
        }
        match browser.cdp.next_event(left.min(Duration::from_millis(200))) {
            Some(e) => {
                loaded = e.method == "Page.loadEventFired"
                    && e.session_id.as_deref() == Some(session.as_str());
                keep_event(&mut obs, &session, e);
            }
            None => {
                if browser.cdp.is_closed() || browser.has_exited() {
                    return Ok((obs, crashed(browser)));
                }
            }
        }
    }

    if let WaitFor::NetworkIdle { quiet } = wait {
        let mut flight = InFlight::default();
        for e in &obs.cdp_events {
            flight.see(e);
        }
        let mut quiet_since = Instant::now();
        loop {
            if signals::interrupted() {
                return Err(signals::Interrupted.into());
            }
            if flight.is_empty() && quiet_since.elapsed() >= quiet {
                break;
            }
            let left = remaining(deadline);
            if left.is_zero() {
                collect(browser, &session, &mut obs);
                let what = format!(
                    "the network did not go idle ({} request(s) still in flight)",
                    flight.len()
                );
                return Ok((obs, timed_out(timeout, &what)));
            }
            match browser.cdp.next_event(left.min(Duration::from_millis(50))) {
                Some(e) => {
                    let before = obs.cdp_events.len();
                    keep_event(&mut obs, &session, e);
                    if let Some(kept) = obs.cdp_events.get(before) {
                        if flight.see(kept) {
                            quiet_since = Instant::now();
                        }
                    }
                }
                None if browser.cdp.is_closed() || browser.has_exited() => {
                    return Ok((obs, crashed(browser)))
                }
                None => {}
            }
        }
        return Ok(finish(browser, &session, obs, keep_bodies, visual));
    }
    let WaitFor::Resources {
        expected: expected_resources,
        transfer,
    } = wait
    else {
        unreachable!("the other waits returned above")
    };

    // loadEventEnd is filled after the event; transfer pages finish after it.
    let wait = format!(
        "new Promise(function (resolve) {{\n\
           var want = {expected_resources}, transfer = {transfer};\n\
           (function check() {{\n\
             var nav = performance.getEntriesByType('navigation')[0];\n\
             var loaded = nav && nav.loadEventEnd > 0;\n\
             var pb = window.__pagebench;\n\
             var done = !transfer || (pb && pb.done);\n\
             var n = performance.getEntriesByType('resource').length;\n\
             var grace = loaded && performance.now() - nav.loadEventEnd > {AFTER_LOAD_GRACE_MS};\n\
             if (loaded && done && (n >= want || grace)) resolve(true); else setTimeout(check, 10);\n\
           }})();\n\
         }})"
    );
    let left = remaining(deadline);
    match cdp::evaluate(
        &browser.cdp,
        &session,
        &wait,
        left.max(Duration::from_millis(1)),
    ) {
        Ok(_) => {}
        Err(e) => {
            let closed = matches!(e.downcast_ref::<CdpError>(), Some(CdpError::Closed));
            if closed || browser.has_exited() {
                return Ok((obs, crashed(browser)));
            }
            collect(browser, &session, &mut obs);
            let what = if transfer {
                "the transfer did not complete"
            } else {
                "the page did not finish loading"
            };
            return Ok((obs, timed_out(timeout, what)));
        }
    }
    Ok(finish(browser, &session, obs, keep_bodies, visual))
}

/// The end of a load that completed: the rest of the screencast, timings and events, then
/// (outside the load) the bodies.
fn finish(
    browser: &ChromiumProcess,
    session: &str,
    mut obs: Observation,
    keep_bodies: bool,
    visual: bool,
) -> (Observation, LoadEnd) {
    if visual {
        screencast_tail(browser, session, &mut obs);
    }
    collect(browser, session, &mut obs);
    if obs.navigation.is_none() {
        return (
            obs,
            LoadEnd::NavigationFailed("no navigation entry after load".into()),
        );
    }
    if keep_bodies {
        response_bodies(browser, session, &mut obs);
    }
    (obs, LoadEnd::Completed)
}

/// The requests in flight, from the kept Network events (a redirect keeps its request id).
#[derive(Debug, Default)]
struct InFlight(std::collections::BTreeSet<String>);

impl InFlight {
    /// Takes `e` into account; true when it was network activity.
    fn see(&mut self, e: &CdpEvent) -> bool {
        let Some(id) = e.params["requestId"].as_str() else {
            return false;
        };
        match e.method.as_str() {
            "Network.requestWillBeSent" => {
                self.0.insert(id.to_string());
            }
            "Network.loadingFinished" | "Network.loadingFailed" => {
                self.0.remove(id);
            }
            _ => {}
        }
        e.method.starts_with("Network.")
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Asks the browser for the body of every response that finished (after the load, so the
/// measurement is not touched). A body the browser no longer has is left out: the HAR entry
/// then has no content, and an import lists it.
fn response_bodies(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    let finished: Vec<String> = obs
        .cdp_events
        .iter()
        .filter(|e| e.method == "Network.loadingFinished")
        .filter_map(|e| e.params["requestId"].as_str().map(String::from))
        .collect();
    for id in finished {
        let r = browser.cdp.call(
            Some(session),
            "Network.getResponseBody",
            json!({ "requestId": id }),
            Duration::from_secs(10),
        );
        match r {
            Ok(v) => {
                if let Some(body) = v["body"].as_str() {
                    let base64 = v["base64Encoded"].as_bool().unwrap_or(false);
                    obs.bodies.insert(
                        id,
                        crate::metrics::ResponseBody {
                            body: body.to_string(),
                            base64,
                        },
                    );
                }
            }
            Err(e) => tracing::debug!("no body for request {id}: {e}"),
        }
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn timed_out(timeout: Duration, what: &str) -> LoadEnd {
    LoadEnd::TimedOut(format!(
        "{what} within {}",
        humantime::format_duration(timeout)
    ))
}

fn crashed(browser: &mut ChromiumProcess) -> LoadEnd {
    LoadEnd::Crashed(format!(
        "the browser exited during the load; stderr: {}",
        browser.stderr_tail()
    ))
}

fn crashed_or(browser: &mut ChromiumProcess, e: anyhow::Error) -> LoadEnd {
    if browser.has_exited() || browser.cdp.is_closed() {
        crashed(browser)
    } else {
        LoadEnd::Crashed(format!("DevTools failed: {e:#}"))
    }
}

/// Attaches to the browser's first page (in the default context: the primed profile state only
/// applies there) and enables the domains we need.
fn attach(browser: &ChromiumProcess, t: Duration, init_script: Option<&str>) -> Result<String> {
    let targets = browser.cdp.call(None, "Target.getTargets", json!({}), t)?;
    let target = targets["targetInfos"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["targetId"].as_str())
        .map(str::to_string);
    let target = match target {
        Some(t) => t,
        None => browser.cdp.call(
            None,
            "Target.createTarget",
            json!({ "url": "about:blank" }),
            t,
        )?["targetId"]
            .as_str()
            .ok_or_else(|| anyhow!("Target.createTarget returned no targetId"))?
            .to_string(),
    };
    let s = browser.cdp.call(
        None,
        "Target.attachToTarget",
        json!({ "targetId": target, "flatten": true }),
        t,
    )?;
    let session = s["sessionId"]
        .as_str()
        .ok_or_else(|| anyhow!("Target.attachToTarget returned no sessionId"))?
        .to_string();
    let call = |m: &str, p: Value| browser.cdp.call(Some(&session), m, p, t);
    call("Network.enable", json!({}))?;
    call("Page.enable", json!({}))?;
    // Keep every Resource Timing entry, also on pages with more than 250 files.
    call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": "performance.setResourceTimingBufferSize(100000);" }),
    )?;
    if let Some(source) = init_script {
        call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": source }),
        )?;
    }
    Ok(session)
}

/// Takes frames until the page has not changed for [`VISUAL_QUIET`] (at most
/// [`VISUAL_TAIL_MAX`]), then stops the screencast. A page that paints after its load is
/// still painting: its Visually Complete is later than loadEventEnd.
fn screencast_tail(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    let end = Instant::now() + VISUAL_TAIL_MAX;
    let mut last_frame = Instant::now();
    loop {
        let now = Instant::now();
        if now >= end || now.duration_since(last_frame) >= VISUAL_QUIET || signals::interrupted() {
            break;
        }
        let wait = (last_frame + VISUAL_QUIET)
            .min(end)
            .saturating_duration_since(now);
        match browser.cdp.next_event(wait.max(Duration::from_millis(1))) {
            Some(e) => {
                if e.method == "Page.screencastFrame" {
                    last_frame = Instant::now();
                }
                keep_event(obs, session, e);
            }
            None if browser.cdp.is_closed() => break,
            None => {}
        }
    }
    let _ = browser.cdp.call(
        Some(session),
        "Page.stopScreencast",
        json!({}),
        Duration::from_secs(5),
    );
}

fn keep_event(obs: &mut Observation, session: &str, e: cdp::Event) {
    if e.session_id.as_deref() != Some(session) {
        return;
    }
    if e.method == "Page.screencastFrame" {
        let p = &e.params;
        let jpeg = p["data"].as_str().and_then(|d| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(d).ok()
        });
        if let (Some(ts), Some(jpeg)) = (
            p.pointer("/metadata/timestamp").and_then(Value::as_f64),
            jpeg,
        ) {
            obs.frames.push(ScreencastFrame {
                timestamp: ts,
                jpeg,
            });
        }
    } else if e.method == "Network.dataReceived" {
        let p = &e.params;
        let n = |k: &str| p.get(k).and_then(Value::as_f64).unwrap_or(0.0).max(0.0) as u64;
        if let (Some(id), Some(ts)) = (
            p.get("requestId").and_then(Value::as_str),
            p.get("timestamp").and_then(Value::as_f64),
        ) {
            obs.chunks.push(DataChunk {
                request_id: id.to_string(),
                timestamp: ts,
                data_length: n("dataLength"),
                encoded_data_length: n("encodedDataLength"),
            });
        }
    } else if KEPT_EVENTS.contains(&e.method.as_str()) {
        obs.cdp_events.push(CdpEvent {
            method: e.method,
            params: e.params,
        });
    }
}

fn collect_events(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    for e in browser.cdp.drain_events() {
        keep_event(obs, session, e);
    }
}

/// Reads the timing entries and the page result (whatever exists, also after a timeout).
fn collect(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    let expr = "JSON.stringify({ timeOrigin: performance.timeOrigin, \
                nav: performance.getEntriesByType('navigation')[0] || null, \
                res: performance.getEntriesByType('resource'), \
                pb: window.__pagebench || null })";
    if let Ok(Value::String(s)) =
        cdp::evaluate(&browser.cdp, session, expr, Duration::from_secs(10))
    {
        if let Ok(v) = serde_json::from_str::<Value>(&s) {
            obs.time_origin = v["timeOrigin"].as_f64();
            obs.navigation = Some(v["nav"].clone()).filter(|n| !n.is_null());
            obs.resources = v["res"].as_array().cloned().unwrap_or_default();
            obs.page_result = Some(v["pb"].clone()).filter(|p| !p.is_null());
        }
    }
    obs.paint = paint_entries(browser, session);
    // Let the last loadingFinished events arrive.
    std::thread::sleep(Duration::from_millis(50));
    collect_events(browser, session, obs);
}

/// Reads the buffered paint entries after a frame (so the last paints are reported). A buffered
/// observer hands over what the browser kept; `takeRecords` makes it synchronous.
const PAINT_ENTRIES: &str = r#"new Promise(function (resolve) {
  function take(type) {
    try {
      var po = new PerformanceObserver(function () {});
      po.observe({ type: type, buffered: true });
      var r = po.takeRecords();
      po.disconnect();
      return r;
    } catch (e) { return []; }
  }
  function selector(el) {
    var parts = [];
    while (el && el.nodeType === 1 && el !== document.documentElement) {
      var s = el.tagName.toLowerCase();
      if (el.id) { parts.unshift(s + '#' + el.id); break; }
      var p = el.parentElement;
      if (p && p.tagName !== 'HTML') {
        var same = Array.prototype.filter.call(p.children, function (c) { return c.tagName === el.tagName; });
        if (same.length > 1) s += ':nth-of-type(' + (same.indexOf(el) + 1) + ')';
      }
      parts.unshift(s);
      el = p;
    }
    return parts.join(' > ');
  }
  function read() {
    var paint = {};
    take('paint').forEach(function (e) { paint[e.name] = e.startTime; });
    resolve(JSON.stringify({
      firstPaint: paint['first-paint'] || null,
      firstContentfulPaint: paint['first-contentful-paint'] || null,
      largestContentfulPaint: take('largest-contentful-paint').map(function (e) {
        return { startTime: e.startTime, size: e.size, url: e.url || '', selector: selector(e.element) };
      }),
      layoutShifts: take('layout-shift').map(function (e) {
        return { startTime: e.startTime, value: e.value, hadRecentInput: e.hadRecentInput };
      }),
      elements: take('element').map(function (e) {
        return { identifier: e.identifier, renderTime: e.renderTime, loadTime: e.loadTime, url: e.url || '' };
      })
    }));
  }
  // Paint entries arrive with the frame's presentation, after the load on a fast link: wait
  // (at most a second) for the first contentful and largest paints, then a frame more.
  var t0 = performance.now();
  function has(type) {
    try { return PerformanceObserver.supportedEntryTypes.indexOf(type) < 0 || take(type).length > 0; }
    catch (e) { return true; }
  }
  // …and for every element Element Timing follows (a late image paints after the load).
  var tracked = document.querySelectorAll('[elementtiming]').length;
  var painted = function () {
    return performance.getEntriesByName('first-contentful-paint').length > 0 &&
      has('largest-contentful-paint') && take('element').length >= tracked;
  };
  (function wait() {
    if (painted() || performance.now() - t0 > 1000) {
      var done = false;
      var once = function () { if (!done) { done = true; read(); } };
      requestAnimationFrame(function () { setTimeout(once, 0); });
      setTimeout(once, 200);
    } else {
      setTimeout(wait, 20);
    }
  })();
})"#;

fn paint_entries(browser: &ChromiumProcess, session: &str) -> Option<PaintEntries> {
    match cdp::evaluate(&browser.cdp, session, PAINT_ENTRIES, Duration::from_secs(5)) {
        Ok(Value::String(s)) => match serde_json::from_str(&s) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!("unreadable paint entries: {e}");
                None
            }
        },
        Ok(_) => None,
        Err(e) => {
            tracing::debug!("no paint entries: {e:#}");
            None
        }
    }
}
