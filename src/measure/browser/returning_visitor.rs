//! What a returning visitor's repeat view is in every engine, prepared during the launch
//! (outside the measured window): the page once, then every connection closed while the TLS
//! session cache and the alt-svc knowledge stay, the HTTP cache cleared unless kept, then a
//! second settle. Each engine says how it closes connections ([`ReturningVisitor::prepare`]).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::{LaunchOptions, RepeatView};
use crate::evidence::metrics::FirstView;
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;

/// The first navigation may take this long (a lossy profile's page).
pub const FIRST_VIEW_TIMEOUT: Duration = Duration::from_secs(120);
/// Time after the first view's load event for its last requests (network idle).
pub const FIRST_VIEW_QUIET: Duration = Duration::from_millis(500);

/// A launched browser that can make a repeat view's first visit.
pub trait ReturningVisitor {
    /// Loads `repeat.url` once, closes every connection, clears the HTTP cache unless kept,
    /// and leaves the tab on `about:blank`.
    fn prepare(&mut self, repeat: &RepeatView, o: &LaunchOptions) -> Result<FirstView>;
    /// The process group whose CPU the settle wait watches.
    fn process_group(&self) -> i32;
    /// Where the launch's timings go.
    fn overhead(&mut self) -> &mut BrowserOverhead;
    /// Keeps the first view for the run's record.
    fn keep(&mut self, first: FirstView);
}

/// A repeat view's first visit, when `o` asks for one: timed as `first_view_ms`, then a
/// second settle, since the first view's work is over before the measurement.
pub fn first_view(browser: &mut impl ReturningVisitor, o: &LaunchOptions) -> Result<()> {
    let Some(repeat) = &o.repeat else {
        return Ok(());
    };
    let t = Instant::now();
    let first = browser.prepare(repeat, o);
    browser.overhead().first_view_ms = t.elapsed().as_secs_f64() * 1e3;
    browser.keep(first?);
    let settle =
        super::process_group::settle(browser.process_group(), o.settle_max, o.device.cpu_share());
    settle.count_into(browser.overhead());
    Ok(())
}

/// Errors when the first navigation did not complete: without it the measured navigation
/// would not be a returning visitor's.
pub fn completed(end: &LoadEnd, repeat: &RepeatView) -> Result<()> {
    if *end != LoadEnd::Completed {
        bail!(
            "the repeat view's first navigation to {} did not complete: {end:?}",
            repeat.url
        );
    }
    Ok(())
}
