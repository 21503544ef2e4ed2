//! What an engine can tell of a run ([`EngineTells`]): its DevTools view and what that view
//! holds, the metrics it has no way to measure, how it reaches HTTP/3. Every record and
//! `meta.json` keep it, so a results directory explains itself without the code that made it:
//! the metric registry and the report read it from there.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// What one engine tells of a run, as its records and `meta.json` keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineTells {
    /// What its DevTools protocol, the network view's source, is called (`CDP`, `BiDi`).
    pub devtools: Cow<'static, str>,
    /// Its network view tells which connection carried each request.
    pub connections: bool,
    /// Its network view tells each request's priority and when it changed.
    pub priorities: bool,
    /// Its network view tells when each chunk of a response body arrived.
    pub body_chunks: bool,
    /// The metrics (registry names) it has no way to measure, each with why.
    pub cannot_measure: Cow<'static, [Unmeasurable]>,
    /// How it reaches forced and primed HTTP/3, when that differs from Chromium's flags.
    pub forced_h3: Option<Cow<'static, str>>,
    pub primed_h3: Option<Cow<'static, str>>,
    /// What a run's `--har` file lacks with it, if anything.
    pub har_lacks: Option<Cow<'static, str>>,
}

/// A metric an engine cannot measure, and why (an API it lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmeasurable {
    pub metric: Cow<'static, str>,
    pub why: Cow<'static, str>,
}

impl Unmeasurable {
    pub const fn new(metric: &'static str, why: &'static str) -> Unmeasurable {
        Unmeasurable {
            metric: Cow::Borrowed(metric),
            why: Cow::Borrowed(why),
        }
    }
}

impl EngineTells {
    /// Why this engine cannot measure `metric` (None: it can).
    pub fn cannot_measure(&self, metric: &str) -> Option<&str> {
        self.cannot_measure
            .iter()
            .find(|u| u.metric == metric)
            .map(|u| u.why.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_an_engine_tells_reads_back_as_written() {
        const MISSING: &[Unmeasurable] = &[Unmeasurable::new("cls", "no Layout Instability API")];
        let tells = EngineTells {
            devtools: Cow::Borrowed("BiDi"),
            connections: false,
            priorities: false,
            body_chunks: false,
            cannot_measure: Cow::Borrowed(MISSING),
            forced_h3: Some(Cow::Borrowed("the alt-svc testing mapping")),
            primed_h3: None,
            har_lacks: None,
        };
        let text = serde_json::to_string(&tells).unwrap();
        let back: EngineTells = serde_json::from_str(&text).unwrap();
        assert_eq!(back, tells);
        assert_eq!(
            back.cannot_measure("cls"),
            Some("no Layout Instability API")
        );
        assert_eq!(back.cannot_measure("lcp_ms"), None);
    }
}
