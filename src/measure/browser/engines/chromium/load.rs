//! One navigation in a launched browser: navigate, wait for the load (and for the page's own
//! transfer on download/upload pages), then collect Navigation Timing, Resource Timing, the
//! page's result and the CDP events. Ends as completed, timed out, crashed or failed.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use serde_json::{json, Value};

use super::cdp::{self, CdpError};
use super::launch::ChromiumProcess;
use super::network;
use crate::config::workload::WorkloadKind;
use crate::evidence::metrics::{
    DataChunk, DevtoolsEvent, Observation, PaintEntries, ScreencastFrame,
};
use crate::evidence::validate::LoadEnd;
use crate::measure::browser::scripts;
use crate::measure::browser::video::{self, Recorder, VirtualDisplay};
// After the load, the screencast goes on as a video recording does.
use crate::evidence::visual::{TAIL_MAX as VISUAL_TAIL_MAX, TAIL_QUIET as VISUAL_QUIET};
use crate::support::signals;

/// CDP events kept in the run record as they came (`Network.dataReceived` is kept compacted, as
/// [`DataChunk`]s; the rest is noise for our metrics).
const KEPT_EVENTS: [&str; 8] = [
    "Network.requestWillBeSent",
    "Network.resourceChangedPriority",
    "Network.responseReceived",
    "Network.requestServedFromCache",
    "Network.loadingFinished",
    "Network.loadingFailed",
    "Page.loadEventFired",
    "Page.domContentEventFired",
];

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
    /// Record a screencast of the load (`--visual=screencast`): frames until the page stops
    /// changing.
    pub screencast: bool,
    /// The display whose screen is recorded during the load (`--visual`, video).
    pub display: Option<&'a VirtualDisplay>,
    /// DevTools' CPU throttling of the page at this rate (a `devtools-<N>x` device).
    pub cpu_throttle: Option<f64>,
    /// Time the page's CPU benchmark after a completed load, once the browser is idle (the
    /// share of a core it may use).
    pub cpu_benchmark: Option<f64>,
}

/// The longest wait for the browser to be idle before the CPU benchmark.
const IDLE_MAX: Duration = Duration::from_secs(3);

/// Screencast frames: JPEG, small enough to be cheap, large enough for a filmstrip.
const SCREENCAST: (u32, u32, u32) = (640, 360, 70);

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

/// Loads `url` until `wait` says the load is over, in a DevTools session of its own that is
/// detached afterwards (so a later load in the same browser — a repeat view's — starts clean:
/// its scripts and events are its own).
pub fn load_until(
    browser: &mut ChromiumProcess,
    url: &str,
    wait: WaitFor,
    timeout: Duration,
    extras: LoadExtras,
) -> Result<(Observation, LoadEnd)> {
    let short = Duration::from_secs(10);
    let session = match attach(browser, short, extras.init_script, extras.cpu_throttle) {
        Ok(s) => s,
        Err(e) => return Ok((Observation::default(), crashed_or(browser, e))),
    };
    // Whichever way the load ended, its events are typed into the network view.
    let loaded =
        load_in_session(browser, &session, url, wait, timeout, extras).map(|(mut obs, end)| {
            obs.network = network::view(std::mem::take(&mut obs.network.events));
            (obs, end)
        });
    let _ = browser.cdp.call(
        None,
        "Target.detachFromTarget",
        json!({ "sessionId": session }),
        short,
    );
    loaded
}

fn load_in_session(
    browser: &mut ChromiumProcess,
    session: &str,
    url: &str,
    wait: WaitFor,
    timeout: Duration,
    extras: LoadExtras,
) -> Result<(Observation, LoadEnd)> {
    let LoadExtras {
        keep_bodies,
        init_script: _,
        screencast: visual,
        display,
        cpu_throttle: _,
        cpu_benchmark,
    } = extras;
    let _ = browser.cdp.drain_events();
    let now = Instant::now();
    let mut load = Load {
        browser,
        session: session.to_string(),
        obs: Observation::default(),
        deadline: now + timeout,
        started: now,
        timeout,
    };
    let recording = video::start(display);
    let stopped = match load.start(url, visual)? {
        Some(end) => Some(end),
        None => match wait {
            WaitFor::Elapsed(d) => load.wait_elapsed(d)?,
            WaitFor::NetworkIdle { quiet } => match load.wait_load_event()? {
                Some(end) => Some(end),
                None => load.wait_network_idle(quiet)?,
            },
            WaitFor::Resources { expected, transfer } => match load.wait_load_event()? {
                Some(end) => Some(end),
                None => load.wait_resources(expected, transfer)?,
            },
        },
    };
    let Load {
        browser,
        session,
        obs,
        ..
    } = load;
    Ok(match stopped {
        Some(end) => {
            let mut obs = obs;
            video::finish_into(recording, &mut obs, false);
            (obs, end)
        }
        None => {
            let (mut obs, end) = finish(browser, &session, obs, keep_bodies, visual, recording);
            if let Some(share) = cpu_benchmark.filter(|_| end == LoadEnd::Completed) {
                // After the load's own work (as the launch waits for the start-up burst).
                crate::measure::browser::process_group::settle(browser.pgid(), IDLE_MAX, share);
                let t = Duration::from_secs(60);
                obs.cpu_benchmark_ms =
                    cdp::evaluate(&browser.cdp, &session, scripts::CPU_BENCHMARK, t)
                        .ok()
                        .and_then(|v| scripts::read_cpu_benchmark(&v));
            }
            (obs, end)
        }
    })
}

/// One load in progress in its DevTools session. Each step returns how the load ended when it
/// ended it (`Some`), or `None` to go on; an error only for interruption by a signal.
struct Load<'b> {
    browser: &'b mut ChromiumProcess,
    session: String,
    obs: Observation,
    deadline: Instant,
    /// When the navigation was sent.
    started: Instant,
    timeout: Duration,
}

impl Load<'_> {
    /// The screencast (with `visual`), then the navigation: until it commits.
    fn start(&mut self, url: &str, visual: bool) -> Result<Option<LoadEnd>> {
        let short = Duration::from_secs(10);
        if visual {
            let (w, h, quality) = SCREENCAST;
            let r = self.browser.cdp.call(
                Some(&self.session),
                "Page.startScreencast",
                json!({ "format": "jpeg", "quality": quality, "maxWidth": w, "maxHeight": h }),
                short,
            );
            if let Err(e) = r {
                return Ok(Some(crashed_or(self.browser, e.into())));
            }
        }
        self.started = Instant::now();
        let nav = self.browser.cdp.call(
            Some(&self.session),
            "Page.navigate",
            json!({ "url": url }),
            remaining(self.deadline),
        );
        Ok(match nav {
            Ok(r) => r.get("errorText").and_then(Value::as_str).map(|err| {
                collect_events(self.browser, &self.session, &mut self.obs);
                LoadEnd::NavigationFailed(format!("{err} loading {url}"))
            }),
            Err(CdpError::Timeout { .. }) => {
                collect(self.browser, &self.session, &mut self.obs);
                Some(timed_out(self.timeout, "the navigation did not commit"))
            }
            Err(e) => Some(crashed_or(self.browser, e.into())),
        })
    }

    /// The next event within `wait`, kept when it is this session's. `Err(end)` when the
    /// browser went away.
    fn next_event(&mut self, wait: Duration) -> std::result::Result<Option<cdp::Event>, LoadEnd> {
        match self.browser.cdp.next_event(wait) {
            Some(e) => Ok(Some(e)),
            None if self.browser.cdp.is_closed() || self.browser.has_exited() => {
                Err(crashed(self.browser))
            }
            None => Ok(None),
        }
    }

    /// A fixed time from the navigation's start (at most the deadline): the events it saw.
    fn wait_elapsed(&mut self, d: Duration) -> Result<Option<LoadEnd>> {
        let until = (self.started + d).min(self.deadline);
        loop {
            let left = remaining(until);
            if left.is_zero() {
                return Ok(None);
            }
            if signals::interrupted() {
                return Err(signals::Interrupted.into());
            }
            match self.next_event(left.min(Duration::from_millis(200))) {
                Ok(Some(e)) => keep_event(&mut self.obs, &self.session, e),
                Ok(None) => {}
                Err(end) => return Ok(Some(end)),
            }
        }
    }

    /// The load event, waited for without touching the page (polling would perturb the load).
    fn wait_load_event(&mut self) -> Result<Option<LoadEnd>> {
        loop {
            if signals::interrupted() {
                return Err(signals::Interrupted.into());
            }
            let left = remaining(self.deadline);
            if left.is_zero() {
                collect(self.browser, &self.session, &mut self.obs);
                return Ok(Some(timed_out(self.timeout, "no load event")));
            }
            match self.next_event(left.min(Duration::from_millis(200))) {
                Ok(Some(e)) => {
                    let loaded = e.method == "Page.loadEventFired"
                        && e.session_id.as_deref() == Some(self.session.as_str());
                    keep_event(&mut self.obs, &self.session, e);
                    if loaded {
                        return Ok(None);
                    }
                }
                Ok(None) => {}
                Err(end) => return Ok(Some(end)),
            }
        }
    }

    /// No request in flight for `quiet`.
    fn wait_network_idle(&mut self, quiet: Duration) -> Result<Option<LoadEnd>> {
        let mut flight = InFlight::default();
        for e in &self.obs.network.events {
            flight.see(e);
        }
        let mut quiet_since = Instant::now();
        loop {
            if signals::interrupted() {
                return Err(signals::Interrupted.into());
            }
            if flight.is_empty() && quiet_since.elapsed() >= quiet {
                return Ok(None);
            }
            let left = remaining(self.deadline);
            if left.is_zero() {
                collect(self.browser, &self.session, &mut self.obs);
                let what = format!(
                    "the network did not go idle ({} request(s) still in flight)",
                    flight.len()
                );
                return Ok(Some(timed_out(self.timeout, &what)));
            }
            match self.next_event(left.min(Duration::from_millis(50))) {
                Ok(Some(e)) => {
                    let before = self.obs.network.events.len();
                    keep_event(&mut self.obs, &self.session, e);
                    if let Some(kept) = self.obs.network.events.get(before) {
                        if flight.see(kept) {
                            quiet_since = Instant::now();
                        }
                    }
                }
                Ok(None) => {}
                Err(end) => return Ok(Some(end)),
            }
        }
    }

    /// The page's own completion: loadEventEnd is filled after the event, and transfer pages
    /// finish after it.
    fn wait_resources(&mut self, expected: usize, transfer: bool) -> Result<Option<LoadEnd>> {
        let wait = scripts::load_finished(expected, transfer);
        let left = remaining(self.deadline);
        let Err(e) = cdp::evaluate(
            &self.browser.cdp,
            &self.session,
            &wait,
            left.max(Duration::from_millis(1)),
        ) else {
            return Ok(None);
        };
        if matches!(
            e.downcast_ref::<CdpError>(),
            Some(CdpError::Interrupted { .. })
        ) {
            return Err(signals::Interrupted.into());
        }
        let closed = matches!(e.downcast_ref::<CdpError>(), Some(CdpError::Closed));
        if closed || self.browser.has_exited() {
            return Ok(Some(crashed(self.browser)));
        }
        collect(self.browser, &self.session, &mut self.obs);
        let what = if transfer {
            "the transfer did not complete"
        } else {
            "the page did not finish loading"
        };
        Ok(Some(timed_out(self.timeout, what)))
    }
}

/// The end of a load that completed: the rest of the screencast, timings and events, then
/// (outside the load) the bodies.
fn finish(
    browser: &ChromiumProcess,
    session: &str,
    mut obs: Observation,
    keep_bodies: bool,
    visual: bool,
    recording: Option<Result<Recorder>>,
) -> (Observation, LoadEnd) {
    if visual {
        screencast_tail(browser, session, &mut obs);
    }
    video::finish_into(recording, &mut obs, true);
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
    fn see(&mut self, e: &DevtoolsEvent) -> bool {
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
        .network
        .events
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
                        crate::evidence::metrics::ResponseBody {
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
fn attach(
    browser: &ChromiumProcess,
    t: Duration,
    init_script: Option<&str>,
    cpu_throttle: Option<f64>,
) -> Result<String> {
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
        json!({ "source": scripts::KEEP_RESOURCE_ENTRIES }),
    )?;
    if let Some(source) = init_script {
        call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": source }),
        )?;
    }
    if let Some(rate) = cpu_throttle {
        call("Emulation.setCPUThrottlingRate", json!({ "rate": rate }))?;
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
    } else if e.method == EXTRA_INFO {
        obs.network.events.extend(set_cookie_only(&e.params));
    } else if KEPT_EVENTS.contains(&e.method.as_str()) {
        obs.network.events.push(DevtoolsEvent {
            method: e.method,
            params: e.params,
        });
    }
}

/// The event with a response's raw headers: the only one that carries its `Set-Cookie`
/// (`responseReceived` leaves it out).
pub const EXTRA_INFO: &str = "Network.responseReceivedExtraInfo";

/// An extra-info event cut down to what a recording needs of it: its request, status and
/// `Set-Cookie` (None: the response set no cookie, and the event is not kept).
fn set_cookie_only(p: &Value) -> Option<DevtoolsEvent> {
    let (name, cookies) = p["headers"]
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))?;
    Some(DevtoolsEvent {
        method: EXTRA_INFO.into(),
        params: json!({
            "requestId": p["requestId"],
            "statusCode": p["statusCode"],
            "headers": { name.to_lowercase(): cookies },
        }),
    })
}

fn collect_events(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    for e in browser.cdp.drain_events() {
        keep_event(obs, session, e);
    }
}

/// Reads the timing entries and the page result (whatever exists, also after a timeout).
fn collect(browser: &ChromiumProcess, session: &str, obs: &mut Observation) {
    if let Ok(v) = cdp::evaluate(
        &browser.cdp,
        session,
        scripts::TIMING_ENTRIES,
        Duration::from_secs(10),
    ) {
        scripts::read_timing_entries(&v, obs);
    }
    obs.paint = paint_entries(browser, session);
    // Let the last loadingFinished events arrive.
    std::thread::sleep(Duration::from_millis(50));
    collect_events(browser, session, obs);
}

fn paint_entries(browser: &ChromiumProcess, session: &str) -> Option<PaintEntries> {
    scripts::read_paint_entries(cdp::evaluate(
        &browser.cdp,
        session,
        scripts::PAINT_ENTRIES,
        Duration::from_secs(5),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extra_info_event_is_kept_for_its_set_cookie_only() {
        let raw = json!({
            "requestId": "7", "statusCode": 200, "headersText": "HTTP/1.1 200 OK...",
            "headers": { "Set-Cookie": "a=1\na=2", "content-type": "text/html" },
            "blockedCookies": [], "resourceIPAddressSpace": "Local"
        });
        let kept = set_cookie_only(&raw).unwrap();
        assert_eq!(kept.method, EXTRA_INFO);
        assert_eq!(
            kept.params,
            json!({ "requestId": "7", "statusCode": 200, "headers": { "set-cookie": "a=1\na=2" } })
        );
        let no_cookie = json!({ "requestId": "8", "statusCode": 200, "headers": { "a": "b" } });
        assert!(set_cookie_only(&no_cookie).is_none());
    }
}
