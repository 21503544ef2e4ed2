//! A run's name lookups as the record keeps them (pure): each query the resolver answered, on
//! the browser's clock, and how the browser came to use HTTP/3.

use serde::{Deserialize, Serialize};

use crate::config::protocol::{H3Mode, Protocol, Variant};
use crate::embedded_server::dns::{Lookup, Said};

/// One lookup, ms from navigation start (negative: before it, e.g. a browser's own lookups
/// during its launch; None: the page's clock was not known).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LookupRecord {
    #[serde(flatten)]
    pub said: Said,
    /// `udp` or `tcp`.
    pub transport: String,
    pub asked_ms: Option<f64>,
    pub answered_ms: Option<f64>,
}

/// `lookups` on the clock of a page whose navigation started at `time_origin` (Unix ms).
pub fn on_page_clock(lookups: &[Lookup], time_origin: Option<f64>) -> Vec<LookupRecord> {
    lookups
        .iter()
        .map(|l| LookupRecord {
            said: l.said.clone(),
            transport: l.transport.clone(),
            asked_ms: time_origin.map(|t| l.asked_unix_ms - t),
            answered_ms: time_origin.map(|t| l.answered_unix_ms - t),
        })
        .collect()
}

/// How the browser of a run came to use HTTP/3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum H3Hint {
    /// Told to (`--origin-to-force-quic-on`, Firefox's test mapping).
    Forced,
    /// A stored Alt-Svc of an earlier visit (primed).
    StoredAltSvc,
    /// An Alt-Svc its first view of the page received (discovered).
    AltSvc,
    /// The HTTPS record of its lookup, whose `alpn` named h3.
    HttpsRecord,
    /// Nothing announced h3 (an `h3-dns` run whose lookups have no such record).
    None,
}

/// The hint of a run of `variant`: for `h3-dns`, what its lookups show; else what the variant
/// gave the browser.
pub fn h3_hint(variant: Variant, lookups: &[LookupRecord]) -> Option<H3Hint> {
    if variant.protocol != Protocol::H3 || variant.as_recorded {
        return None;
    }
    Some(match variant.h3_mode? {
        H3Mode::Forced => H3Hint::Forced,
        H3Mode::Primed => H3Hint::StoredAltSvc,
        H3Mode::Discovered => H3Hint::AltSvc,
        H3Mode::Dns if lookups.iter().any(announces_h3) => H3Hint::HttpsRecord,
        H3Mode::Dns => H3Hint::None,
    })
}

/// An HTTPS answer whose `alpn` names h3.
fn announces_h3(l: &LookupRecord) -> bool {
    l.said.qtype == "HTTPS" && l.said.alpn.iter().any(|id| id == "h3")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(qtype: &str, answers: &[&str]) -> Lookup {
        let alpn = answers
            .iter()
            .flat_map(|a| a.split_whitespace())
            .filter_map(|p| p.strip_prefix("alpn="))
            .flat_map(|ids| ids.split(','))
            .map(str::to_string)
            .collect();
        Lookup {
            said: Said {
                name: "pagebench.test".into(),
                qtype: qtype.into(),
                rcode: "NOERROR".into(),
                answers: answers.iter().map(|a| a.to_string()).collect(),
                alpn,
            },
            transport: "udp".into(),
            asked_unix_ms: 1_000_010.0,
            answered_unix_ms: 1_000_050.5,
        }
    }

    #[test]
    fn times_are_put_on_the_page_clock() {
        let recs = on_page_clock(&[lookup("A", &["10.1.2.2"])], Some(1_000_000.0));
        assert_eq!(recs[0].asked_ms, Some(10.0));
        assert_eq!(recs[0].answered_ms, Some(50.5));
        assert_eq!(on_page_clock(&[lookup("A", &[])], None)[0].asked_ms, None);
    }

    #[test]
    fn an_h3_dns_run_learnt_h3_only_from_a_record_that_names_it() {
        let with = on_page_clock(&[lookup("HTTPS", &["1 . alpn=h3,h2"])], None);
        let h2_only = on_page_clock(&[lookup("HTTPS", &["1 . alpn=h2"])], None);
        assert_eq!(h3_hint(Variant::H3_DNS, &with), Some(H3Hint::HttpsRecord));
        assert_eq!(h3_hint(Variant::H3_DNS, &h2_only), Some(H3Hint::None));
        assert_eq!(h3_hint(Variant::H3_DNS, &[]), Some(H3Hint::None));
        assert_eq!(h3_hint(Variant::H3, &[]), Some(H3Hint::Forced));
        assert_eq!(h3_hint(Variant::H3_DISCOVERED, &[]), Some(H3Hint::AltSvc));
        assert_eq!(h3_hint(Variant::H2, &with), None);
    }
}
