//! A returning visitor's repeat view, prepared during the launch (outside the measured window):
//! the page is loaded once, then every connection is closed while the TLS session cache, the
//! QUIC server configs (0-RTT) and the Alt-Svc knowledge stay, and the HTTP cache is cleared
//! unless kept. Chromium's `--enable-net-benchmarking` gives the page `chrome.benchmarking`,
//! whose `closeConnections()` closes every socket and QUIC session of the network service
//! without touching those caches.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::cdp;
use super::launch::{ChromiumProcess, NET_BENCHMARKING};
use super::load::{self, LoadExtras, WaitFor};
use crate::config::identity::RepeatCache;
use crate::evidence::metrics::FirstView;
use crate::evidence::run_record::BrowserOverhead;
use crate::measure::browser::returning_visitor::{
    completed, ReturningVisitor, FIRST_VIEW_QUIET, FIRST_VIEW_TIMEOUT,
};
use crate::measure::browser::{LaunchOptions, RepeatView};

/// Time for the closing packets (FIN, CONNECTION_CLOSE) to cross the link before the mark.
const CLOSE_DRAIN: Duration = Duration::from_millis(300);

impl ReturningVisitor for ChromiumProcess {
    /// Connections closed (and the cache cleared) by `chrome.benchmarking` in the page.
    fn prepare(&mut self, repeat: &RepeatView, o: &LaunchOptions) -> Result<FirstView> {
        let (obs, end) = load::load_until(
            self,
            &repeat.url,
            WaitFor::NetworkIdle {
                quiet: FIRST_VIEW_QUIET,
            },
            FIRST_VIEW_TIMEOUT,
            LoadExtras {
                init_script: o.init_script.as_deref(),
                ..LoadExtras::default()
            },
        )?;
        completed(&end, repeat)?;
        let first = FirstView::of(&obs, repeat.cache == RepeatCache::Keep);
        in_page(self, |b, session| {
            close_connections(b, session, repeat.cache)
        })
        .context("preparing the repeat view")?;
        std::thread::sleep(CLOSE_DRAIN);
        Ok(first)
    }

    fn process_group(&self) -> i32 {
        self.pgid()
    }

    fn overhead(&mut self) -> &mut BrowserOverhead {
        &mut self.overhead
    }

    fn keep(&mut self, first: FirstView) {
        self.first_view = Some(first);
    }
}

/// Closes every connection (and clears the cache unless kept), then leaves for `about:blank`.
fn close_connections(b: &ChromiumProcess, session: &str, cache: RepeatCache) -> Result<()> {
    let mut script = "chrome.benchmarking.closeConnections();".to_string();
    if cache == RepeatCache::Clear {
        script.push_str(" chrome.benchmarking.clearCache();");
    }
    let expr = format!(
        "(function () {{ if (!window.chrome || !chrome.benchmarking) return 'no chrome.benchmarking'; {script} return 'ok'; }})()"
    );
    match cdp::evaluate(&b.cdp, session, &expr, Duration::from_secs(10))? {
        Value::String(s) if s == "ok" => {}
        other => {
            bail!("closing the connections failed: {other} (Chromium lacks {NET_BENCHMARKING}?)")
        }
    }
    b.cdp.call(
        Some(session),
        "Page.navigate",
        json!({ "url": "about:blank" }),
        Duration::from_secs(10),
    )?;
    Ok(())
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
