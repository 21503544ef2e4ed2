//! The identity and outcome columns of a `runs.csv` row, as one type: the writer serializes
//! it and the reader deserializes it, so a column cannot be written one way and read another.

use serde::{Deserialize, Serialize};

use crate::config::device::DeviceId;
use crate::config::identity::{BrowserId, Phase, ServerId, View};
use crate::config::protocol::{H3Mode, Protocol, Variant};
use crate::evidence::run_record::RunRecord;
use crate::evidence::validate::{self, Outcome, ReasonKind};

/// The columns of `runs.csv` before the metrics, in the order of [`RowIdentity`]'s fields (a
/// test holds the two together).
pub const COLUMNS: &[&str] = &[
    "run_id",
    "plan_id",
    "attempt",
    "profile",
    "workload",
    "server",
    "browser",
    "view",
    "device",
    "phase",
    "round",
    "position",
    "protocol",
    "h3_mode",
    "variant",
    "outcome",
    "invalid_kinds",
    "measurement_failure",
    "invalid_reason",
    "viewpoints",
    "lane",
    "lane_shared",
];

/// Who ran what, and how it came out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowIdentity {
    pub run_id: String,
    pub plan_id: String,
    pub attempt: u32,
    pub profile: String,
    pub workload: String,
    pub server: ServerId,
    /// Absent in results from before there was a choice: Chromium.
    #[serde(default)]
    pub browser: BrowserId,
    #[serde(default)]
    pub view: View,
    /// Absent in results from before there was a choice: desktop.
    #[serde(default)]
    pub device: DeviceId,
    pub phase: Phase,
    pub round: u32,
    pub position: u32,
    /// The protocol forced (empty in hand-made rows: the variant says it too).
    #[serde(default)]
    pub protocol: Option<Protocol>,
    #[serde(default)]
    pub h3_mode: Option<H3Mode>,
    #[serde(with = "crate::config::protocol::variant_name")]
    pub variant: Variant,
    pub outcome: Outcome,
    /// Each kind once, in the order first seen; empty unless the run is invalid.
    #[serde(serialize_with = "write_kinds", deserialize_with = "read_kinds")]
    pub invalid_kinds: Vec<ReasonKind>,
    pub measurement_failure: bool,
    #[serde(default)]
    pub invalid_reason: String,
    pub viewpoints: u8,
    /// The lane it ran on when its plan ran on several (`--jobs`; empty: a serial walk), and
    /// whether its round shared the machine with other lanes'.
    #[serde(default)]
    pub lane: Option<u32>,
    #[serde(default)]
    pub lane_shared: Option<bool>,
}

impl RowIdentity {
    pub fn of(rec: &RunRecord) -> RowIdentity {
        // Two checks can report the same kind: each once.
        let mut kinds: Vec<ReasonKind> = Vec::new();
        if rec.outcome == Outcome::Invalid {
            for r in &rec.reasons {
                if !kinds.contains(&r.kind) {
                    kinds.push(r.kind);
                }
            }
        }
        RowIdentity {
            run_id: rec.id.clone(),
            plan_id: rec.plan_id.clone(),
            attempt: rec.attempt,
            profile: rec.profile.clone(),
            workload: rec.workload.clone(),
            server: rec.server.clone(),
            browser: rec.browser,
            view: rec.view,
            device: rec.device.clone(),
            phase: rec.phase,
            round: rec.round,
            position: rec.position,
            protocol: Some(rec.protocol),
            h3_mode: rec.h3_mode,
            variant: rec.variant,
            outcome: rec.outcome,
            invalid_kinds: kinds,
            measurement_failure: rec.is_measurement_failure(),
            invalid_reason: validate::reason_text(&rec.reasons),
            viewpoints: rec.viewpoints,
            lane: rec.lane.map(|l| l.lane),
            lane_shared: rec.lane.map(|l| l.shared),
        }
    }

    /// Its fields as `runs.csv` spells them, in [`COLUMNS`]' order.
    pub fn fields(&self) -> Vec<String> {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        // Serializing plain strings, numbers and enums into memory cannot fail.
        w.serialize(self).expect("a row identity serializes");
        let bytes = w.into_inner().expect("an in-memory writer flushes");
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(&bytes[..]);
        let record = r.records().next().and_then(|x| x.ok()).unwrap_or_default();
        record.iter().map(str::to_string).collect()
    }
}

fn write_kinds<S: serde::Serializer>(kinds: &[ReasonKind], s: S) -> Result<S::Ok, S::Error> {
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    s.serialize_str(&names.join(" "))
}

fn read_kinds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ReasonKind>, D::Error> {
    let text = String::deserialize(d)?;
    text.split_whitespace()
        .map(|k| k.parse().map_err(serde::de::Error::custom))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RowIdentity {
        RowIdentity {
            run_id: "wired-page10-r01-h3.a2".into(),
            plan_id: "wired-page10-r01-h3".into(),
            attempt: 2,
            profile: "wired".into(),
            workload: "page10".into(),
            server: ServerId::new("embedded"),
            browser: BrowserId::new("firefox"),
            view: View::Repeat,
            device: Default::default(),
            phase: Phase::Measure,
            round: 1,
            position: 2,
            protocol: Some(Protocol::H3),
            h3_mode: Some(H3Mode::Primed),
            variant: Variant::H3_PRIMED,
            outcome: Outcome::Invalid,
            invalid_kinds: vec![ReasonKind::Link, ReasonKind::Timeout],
            measurement_failure: true,
            invalid_reason: "link: late, \"quoted\"".into(),
            viewpoints: 3,
            lane: Some(2),
            lane_shared: Some(true),
        }
    }

    #[test]
    fn the_header_is_the_columns_and_a_row_reads_back_as_written() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(sample()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let header = text.lines().next().unwrap();
        assert_eq!(header, COLUMNS.join(","));
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let back: RowIdentity = r.deserialize().next().unwrap().unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn fields_are_spelled_as_runs_csv_has_them() {
        let f = sample().fields();
        assert_eq!(f.len(), COLUMNS.len());
        let at = |c: &str| f[COLUMNS.iter().position(|x| *x == c).unwrap()].as_str();
        assert_eq!(at("browser"), "firefox");
        assert_eq!(at("h3_mode"), "primed");
        assert_eq!(at("variant"), "h3-primed");
        assert_eq!(at("invalid_kinds"), "link timeout");
        assert_eq!(at("measurement_failure"), "true");
        assert_eq!(at("invalid_reason"), "link: late, \"quoted\"");
        assert_eq!((at("lane"), at("lane_shared")), ("2", "true"));
        let plain = RowIdentity {
            protocol: Some(Protocol::H2),
            h3_mode: None,
            ..sample()
        };
        assert_eq!(
            plain.fields()[COLUMNS.iter().position(|x| *x == "h3_mode").unwrap()],
            ""
        );
    }
}
