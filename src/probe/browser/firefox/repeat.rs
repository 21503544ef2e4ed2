//! A returning visitor's repeat view in Firefox, prepared during the launch (outside the
//! measured window) as Chromium's is: the page once, then every connection closed while the TLS
//! session cache, QUIC's resumption tokens and the alt-svc knowledge stay, and the HTTP cache
//! cleared unless kept. BiDi has no such command, but Firefox started with
//! `--remote-allow-system-access` lets a BiDi client run privileged script in a chrome context:
//! there the `net:prune-all-connections` notification closes the connections (as Firefox's own
//! shift-reload does) and `Services.cache2.clear()` empties the cache.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::{load, FirefoxProcess};
use crate::probe::browser::{process, LaunchOptions, RepeatCache, RepeatView};
use crate::probe::metrics::FirstView;
use crate::probe::validate::LoadEnd;

/// The flag that opens chrome contexts to the BiDi client (added only for repeat views).
pub const SYSTEM_ACCESS: &str = "--remote-allow-system-access";
/// The first navigation may take this long (a lossy profile's page).
const FIRST_VIEW_TIMEOUT: Duration = Duration::from_secs(120);
/// Time after the first view's load event for its last requests (as Chromium's network idle).
const FIRST_VIEW_QUIET: Duration = Duration::from_millis(500);
/// Time for the closed connections to be gone before the mark. Firefox drains a closed QUIC
/// connection (three probe timeouts) before it opens a new one to the same origin: after a
/// 300 ms wait, the repeat view's first byte came 2.6 round trips late at 150 ms RTT (4.68
/// against 2.06 RTTs to the first byte); after 3 s, 2.06–2.10. Enough for the shipped
/// profiles; an RTT above ~500 ms would need more.
const CLOSE_DRAIN: Duration = Duration::from_secs(3);

/// A launched Firefox's repeat view, when `o` asks for one: the first navigation (timed as
/// `first_view_ms`), then a second settle. Part of the launch (outside the measured window).
pub fn first_view(browser: &mut FirefoxProcess, o: &LaunchOptions) -> Result<()> {
    let Some(repeat) = &o.repeat else {
        return Ok(());
    };
    let t = Instant::now();
    let first = prepare(browser, repeat);
    browser.overhead.first_view_ms = t.elapsed().as_secs_f64() * 1e3;
    browser.first_view = Some(first?);
    let settle = process::settle(browser.pgid, o.settle_max);
    browser.overhead.settle_ms += settle.waited.as_secs_f64() * 1e3;
    browser.overhead.settled = settle.settled;
    browser.overhead.settle_cpu = settle.last_cpu;
    Ok(())
}

/// Loads the page once, closes every connection, clears the HTTP cache unless kept, and leaves
/// the tab on `about:blank`.
fn prepare(browser: &mut FirefoxProcess, repeat: &RepeatView) -> Result<FirstView> {
    let (obs, end) = load(browser, &repeat.url, 0, false, FIRST_VIEW_TIMEOUT)?;
    if end != LoadEnd::Completed {
        bail!(
            "the repeat view's first navigation to {} did not complete: {end:?}",
            repeat.url
        );
    }
    std::thread::sleep(FIRST_VIEW_QUIET);
    let first = FirstView::of(&obs, repeat.cache == RepeatCache::Keep);
    let t = Duration::from_secs(10);
    browser.bidi.call(
        "browsingContext.navigate",
        json!({ "context": browser.context, "url": "about:blank", "wait": "complete" }),
        t,
    )?;
    let script = close_script(repeat.cache);
    let chrome = chrome_context(browser)?;
    let done = browser
        .bidi
        .call(
            "script.evaluate",
            json!({ "expression": script, "target": { "context": chrome }, "awaitPromise": false }),
            t,
        )
        .context("closing Firefox's connections")?;
    match done.pointer("/result/value").and_then(Value::as_str) {
        Some("ok") => {}
        _ => bail!("closing Firefox's connections failed: {done}"),
    }
    std::thread::sleep(CLOSE_DRAIN);
    let _ = browser.bidi.drain_events();
    Ok(first)
}

/// The privileged script that closes the connections (and clears the cache unless kept).
fn close_script(cache: RepeatCache) -> String {
    let clear = match cache {
        RepeatCache::Clear => " Services.cache2.clear();",
        RepeatCache::Keep => "",
    };
    format!(
        "(() => {{ Services.obs.notifyObservers(null, 'net:prune-all-connections');{clear} return 'ok'; }})()"
    )
}

/// A chrome (parent-process) browsing context, where privileged script runs.
fn chrome_context(browser: &FirefoxProcess) -> Result<String> {
    let tree = browser
        .bidi
        .call(
            "browsingContext.getTree",
            json!({ "moz:scope": "chrome", "maxDepth": 0 }),
            Duration::from_secs(10),
        )
        .with_context(|| format!("listing Firefox's chrome contexts (needs {SYSTEM_ACCESS})"))?;
    tree.pointer("/contexts/0/context")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| anyhow!("Firefox lists no chrome context ({SYSTEM_ACCESS} missing?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_cleared_only_when_not_kept() {
        let clear = close_script(RepeatCache::Clear);
        let keep = close_script(RepeatCache::Keep);
        for s in [&clear, &keep] {
            assert!(s.contains("'net:prune-all-connections'"), "{s}");
        }
        assert!(clear.contains("Services.cache2.clear()"), "{clear}");
        assert!(!keep.contains("cache2"), "{keep}");
    }
}
