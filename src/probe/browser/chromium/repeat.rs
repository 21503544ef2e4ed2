//! A returning visitor's repeat view, prepared during the launch (outside the measured window):
//! the page is loaded once, then every connection is closed while the TLS session cache, the
//! QUIC server configs (0-RTT) and the Alt-Svc knowledge stay, and the HTTP cache is cleared
//! unless kept. Chromium's `--enable-net-benchmarking` gives the page `chrome.benchmarking`,
//! whose `closeConnections()` closes every socket and QUIC session of the network service
//! without touching those caches.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::cdp;
use super::launch::{ChromiumProcess, NET_BENCHMARKING};
use super::load::{self, LoadExtras, WaitFor};
use crate::probe::browser::{process, LaunchOptions, RepeatCache, RepeatView};
use crate::probe::metrics::FirstView;
use crate::probe::validate::LoadEnd;

/// The first navigation may take this long (a lossy profile's page).
const FIRST_VIEW_TIMEOUT: Duration = Duration::from_secs(120);
/// The first view is over when no request was in flight for this long after its load event.
const FIRST_VIEW_QUIET: Duration = Duration::from_millis(500);
/// Time for the closing packets (FIN, CONNECTION_CLOSE) to cross the link before the mark.
const CLOSE_DRAIN: Duration = Duration::from_millis(300);

/// A launched browser's repeat view, when `o` asks for one: the first navigation (timed as
/// `first_view_ms`), then a second settle, since the first view's work is over before the
/// measurement. Part of the launch (outside the measured window).
pub fn first_view(browser: &mut ChromiumProcess, o: &LaunchOptions) -> Result<()> {
    let Some(repeat) = &o.repeat else {
        return Ok(());
    };
    let t = Instant::now();
    let first = prepare(browser, repeat, o.init_script.as_deref());
    browser.overhead.first_view_ms = t.elapsed().as_secs_f64() * 1e3;
    browser.first_view = Some(first?);
    let settle = process::settle(browser.pgid(), o.settle_max);
    browser.overhead.settle_ms += settle.waited.as_secs_f64() * 1e3;
    browser.overhead.settled = settle.settled;
    browser.overhead.settle_cpu = settle.last_cpu;
    Ok(())
}

/// Loads the page once, closes every connection, clears the HTTP cache unless kept, and leaves
/// the tab on `about:blank`. Errors when the first navigation did not complete: without it the
/// measured navigation would not be a returning visitor's.
pub fn prepare(
    browser: &mut ChromiumProcess,
    repeat: &RepeatView,
    init_script: Option<&str>,
) -> Result<FirstView> {
    let (obs, end) = load::load_until(
        browser,
        &repeat.url,
        WaitFor::NetworkIdle {
            quiet: FIRST_VIEW_QUIET,
        },
        FIRST_VIEW_TIMEOUT,
        LoadExtras {
            init_script,
            ..LoadExtras::default()
        },
    )?;
    if end != LoadEnd::Completed {
        bail!(
            "the repeat view's first navigation to {} did not complete: {end:?}",
            repeat.url
        );
    }
    let first = FirstView::of(&obs, repeat.cache == RepeatCache::Keep);
    in_page(browser, |b, session| {
        let mut script = "chrome.benchmarking.closeConnections();".to_string();
        if repeat.cache == RepeatCache::Clear {
            script.push_str(" chrome.benchmarking.clearCache();");
        }
        let expr = format!(
            "(function () {{ if (!window.chrome || !chrome.benchmarking) return 'no chrome.benchmarking'; {script} return 'ok'; }})()"
        );
        match cdp::evaluate(&b.cdp, session, &expr, Duration::from_secs(10))? {
            Value::String(s) if s == "ok" => {}
            other => bail!("closing the connections failed: {other} (Chromium lacks {NET_BENCHMARKING}?)"),
        }
        b.cdp.call(
            Some(session),
            "Page.navigate",
            json!({ "url": "about:blank" }),
            Duration::from_secs(10),
        )?;
        Ok(())
    })
    .context("preparing the repeat view")?;
    std::thread::sleep(CLOSE_DRAIN);
    Ok(first)
}

/// Runs `f` in a DevTools session on the browser's page, detached afterwards.
fn in_page<T>(
    browser: &ChromiumProcess,
    f: impl FnOnce(&ChromiumProcess, &str) -> Result<T>,
) -> Result<T> {
    let t = Duration::from_secs(10);
    let targets = browser.cdp.call(None, "Target.getTargets", json!({}), t)?;
    let target = targets["targetInfos"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["targetId"].as_str())
        .ok_or_else(|| anyhow!("the browser has no page"))?
        .to_string();
    let attached = browser.cdp.call(
        None,
        "Target.attachToTarget",
        json!({ "targetId": target, "flatten": true }),
        t,
    )?;
    let session = attached["sessionId"]
        .as_str()
        .ok_or_else(|| anyhow!("Target.attachToTarget returned no sessionId"))?
        .to_string();
    let result = f(browser, &session);
    let _ = browser.cdp.call(
        None,
        "Target.detachFromTarget",
        json!({ "sessionId": session }),
        t,
    );
    result
}
