//! A returning visitor's repeat view in Firefox, prepared during the launch (outside the
//! measured window) as Chromium's is: the page once, then every connection closed while the TLS
//! session cache, QUIC's resumption tokens and the alt-svc knowledge stay, and the HTTP cache
//! cleared unless kept. BiDi has no such command, but Firefox started with
//! `--remote-allow-system-access` lets a BiDi client run privileged script in a chrome context:
//! there the `net:prune-all-connections` notification closes the connections (as Firefox's own
//! shift-reload does) and `Services.cache2.clear()` empties the cache.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::{load, FirefoxProcess, SYSTEM_ACCESS};
use crate::config::identity::RepeatCache;
use crate::evidence::metrics::FirstView;
use crate::evidence::run_record::BrowserOverhead;
use crate::measure::browser::returning_visitor::{
    completed, ReturningVisitor, FIRST_VIEW_QUIET, FIRST_VIEW_TIMEOUT,
};
use crate::measure::browser::{LaunchOptions, RepeatView};

/// Time for the closed connections to be gone before the mark. Firefox drains a closed QUIC
/// connection (three probe timeouts) before it opens a new one to the same origin: after a
/// 300 ms wait, the repeat view's first byte came 2.6 round trips late at 150 ms RTT (4.68
/// against 2.06 RTTs to the first byte); after 3 s, 2.06–2.10. Enough for the shipped
/// profiles; an RTT above ~500 ms would need more.
const CLOSE_DRAIN: Duration = Duration::from_secs(3);

impl ReturningVisitor for FirefoxProcess {
    /// Connections closed and the cache cleared by privileged script in a chrome context.
    fn prepare(&mut self, repeat: &RepeatView, _: &LaunchOptions) -> Result<FirstView> {
        let (obs, end) = load(self, &repeat.url, 0, false, FIRST_VIEW_TIMEOUT, None)?;
        completed(&end, repeat)?;
        std::thread::sleep(FIRST_VIEW_QUIET);
        let first = FirstView::of(&obs, repeat.cache == RepeatCache::Keep);
        let t = Duration::from_secs(10);
        self.bidi.call(
            "browsingContext.navigate",
            json!({ "context": self.context, "url": "about:blank", "wait": "complete" }),
            t,
        )?;
        let script = close_script(repeat.cache);
        let chrome = chrome_context(self)?;
        let done = self
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
        let _ = self.bidi.drain_events();
        Ok(first)
    }

    fn process_group(&self) -> i32 {
        self.pgid
    }

    fn overhead(&mut self) -> &mut BrowserOverhead {
        &mut self.overhead
    }

    fn keep(&mut self, first: FirstView) {
        self.first_view = Some(first);
    }
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
