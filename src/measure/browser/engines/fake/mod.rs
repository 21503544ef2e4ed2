//! A test-only third engine, `fake`: it opens no window and loads nothing; it replays a
//! recorded load — the typed evidence of one page10 load over h2 (`tests/fixtures/browser/
//! fake-page10.json`: Resource Timing entries and a network view of typed requests) — as if it
//! had made it. It proves the recipe for an engine: this folder, `pub mod fake;` and its line
//! in `browser::ENGINES`; nothing else in pagebench names it, and a matrix of it goes through
//! plan, run protocol, metrics, validation, store, statistics and report like any engine's
//! (`matrix::engine_tests`).

use std::time::Duration;

use anyhow::{ensure, Result};

use crate::config::identity::BrowserId;
use crate::config::protocol::Protocol;
use crate::config::workload::WorkloadKind;
use crate::evidence::engine_tells::EngineTells;
use crate::evidence::har_document::{
    self, Cache, Content, Entry, Request, Response, Timings, PAGE_ID,
};
use crate::evidence::metrics::Observation;
use crate::evidence::run_record::BrowserOverhead;
use crate::evidence::validate::LoadEnd;
use crate::measure::browser::{Browser, ClientSide, Engine, LaunchOptions};
use std::borrow::Cow;

/// Its name in flags and files.
pub const ID: BrowserId = BrowserId::new("fake");

/// What its network view is called.
pub const PROTOCOL: &str = "FakeTools";

/// The version it reports.
pub const VERSION: &str = "Fake 1.0";

/// The fake in the browser registry.
pub static ENGINE: Engine = Engine {
    id: ID,
    make,
    installed: || Ok(VERSION.into()),
    cannot: |asked| asked.visual.map(|_| "--visual: the fake paints nothing"),
    har: entries,
    tells: EngineTells {
        devtools: Cow::Borrowed(PROTOCOL),
        connections: false,
        priorities: false,
        body_chunks: false,
        cannot_measure: Cow::Borrowed(&[]),
        forced_h3: None,
        primed_h3: None,
        har_lacks: Some(Cow::Borrowed("the fake's HAR files have no bodies")),
    },
    https_records_since: None,
};

fn make() -> Box<dyn Browser + Send> {
    Box::new(Fake::default())
}

/// The recorded load it replays.
pub fn recording() -> Observation {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/browser/fake-page10.json"
    );
    let text = std::fs::read_to_string(path).expect("the fake's recording");
    serde_json::from_str(&text).expect("the fake's recording parses")
}

/// The fake; "launched" between `launch` and `close`.
#[derive(Default)]
pub struct Fake {
    launched: Option<LaunchOptions>,
}

impl Browser for Fake {
    fn id(&self) -> BrowserId {
        ID
    }

    fn launch(&mut self, _: &dyn ClientSide, opts: &LaunchOptions) -> Result<()> {
        ensure!(
            opts.protocol == Protocol::H2,
            "the fake replays an h2 load; it cannot load over {}",
            opts.protocol
        );
        self.launched = Some(opts.clone());
        Ok(())
    }

    fn version(&self) -> Option<String> {
        Some(VERSION.into())
    }

    fn process_group(&self) -> Option<i32> {
        None
    }

    fn load(
        &mut self,
        url: &str,
        kind: &WorkloadKind,
        _expected_resources: usize,
        _timeout: Duration,
    ) -> Result<(Observation, LoadEnd)> {
        ensure!(self.launched.is_some(), "the fake is not launched");
        ensure!(
            kind.is_page() && url.ends_with("/page10/index.html"),
            "the fake replays page10, not {url}"
        );
        Ok((recording(), LoadEnd::Completed))
    }

    fn close(&mut self) -> BrowserOverhead {
        self.launched = None;
        BrowserOverhead::default()
    }
}

/// Its HAR entries: one per request of its network view.
fn entries(obs: &Observation) -> Vec<Entry> {
    obs.network
        .requests
        .iter()
        .map(|r| Entry {
            pageref: PAGE_ID,
            started_date_time: har_document::iso(0.0),
            time: 0.0,
            request: Request {
                method: r.method.clone(),
                url: r.url.clone(),
                http_version: har_document::http_version(r.protocol.as_deref().unwrap_or("")),
                cookies: vec![],
                headers: vec![],
                query_string: har_document::query_string(&r.url),
                headers_size: -1.0,
                body_size: 0.0,
            },
            response: Response {
                status: r.status.map_or(0, u64::from),
                status_text: String::new(),
                http_version: har_document::http_version(r.protocol.as_deref().unwrap_or("")),
                cookies: vec![],
                headers: vec![],
                content: Content {
                    size: r.encoded_data_length.unwrap_or(0.0),
                    mime_type: "x-unknown".into(),
                    text: None,
                    encoding: None,
                },
                redirect_url: String::new(),
                headers_size: -1.0,
                body_size: r.encoded_data_length.unwrap_or(-1.0),
            },
            cache: Cache {},
            timings: Timings {
                blocked: -1.0,
                dns: -1.0,
                connect: -1.0,
                ssl: -1.0,
                send: 0.0,
                wait: 0.0,
                receive: 0.0,
            },
            server_ip_address: None,
            server_port: None,
            connection: None,
            transfer_size: r.encoded_data_length,
            priority: None,
            error: r.failed.clone(),
            initiator: None,
            resource_type: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recording is the typed evidence of Chromium's h2 page10 fixture, under the fake's
    /// own name: `PAGEBENCH_BLESS=1` writes it anew.
    #[test]
    fn the_recording_is_a_recorded_load_typed() {
        let mut obs = crate::evidence::metrics::tests::fixture("h2-page10");
        obs.network.protocol = PROTOCOL.into();
        obs.network.events.clear();
        let text = serde_json::to_string_pretty(&obs).unwrap() + "\n";
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/browser/fake-page10.json"
        );
        if std::env::var_os("PAGEBENCH_BLESS").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            text,
            "PAGEBENCH_BLESS=1 writes it"
        );
        let r = recording();
        assert_eq!(r.network.requests.len(), 11);
        assert!(r.network.events.is_empty(), "typed: no engine's events");
        assert_eq!(entries(&r).len(), 11);
    }
}
