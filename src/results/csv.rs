//! The flat forms of a run record: its `runs.csv` row (identity, outcome, every metric of the
//! registry, start time and warnings) and its `resources.csv` rows.

use std::sync::LazyLock;

use crate::evidence::run_record::RunRecord;

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{:.3}", x)).unwrap_or_default()
}

/// The columns after the metrics.
const TRAILING_COLUMNS: &[&str] = &["started_at", "warnings"];

/// Columns of `runs.csv`, in order: identity, every metric of the [registry](crate::evidence::metric_registry),
/// then when the run started and its warnings.
pub static RUN_COLUMNS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    super::row_identity::COLUMNS
        .iter()
        .copied()
        .chain(crate::evidence::metric_registry::ALL.iter().map(|m| m.name))
        .chain(TRAILING_COLUMNS.iter().copied())
        .collect()
});

/// The `runs.csv` row of `rec` (same order as [`RUN_COLUMNS`]).
pub fn run_row(rec: &RunRecord) -> Vec<String> {
    let mut warnings = rec.warnings.clone();
    if let Some(l) = &rec.link {
        warnings.extend(l.self_check_warnings.iter().cloned());
    }
    let mut row = super::row_identity::RowIdentity::of(rec).fields();
    row.extend(
        crate::evidence::metric_registry::ALL
            .iter()
            .map(|m| m.csv_field(rec)),
    );
    row.push(rec.started_at.clone());
    row.push(warnings.join("; "));
    row
}

/// The `resources.csv` rows of `rec` (same order as [`RESOURCE_COLUMNS`]).
pub fn resource_rows(rec: &RunRecord) -> Vec<Vec<String>> {
    rec.resources
        .iter()
        .map(|r| {
            vec![
                rec.id.clone(),
                rec.profile.clone(),
                rec.workload.clone(),
                rec.server.to_string(),
                rec.browser.name().to_string(),
                rec.view.name().to_string(),
                rec.variant.name(),
                rec.phase.name().to_string(),
                rec.outcome.name().to_string(),
                r.path.clone(),
                r.initiator.clone(),
                r.protocol.clone(),
                format!("{:.3}", r.start_ms),
                format!("{:.3}", r.request_start_ms),
                format!("{:.3}", r.response_start_ms),
                format!("{:.3}", r.response_end_ms),
                format!("{:.3}", r.queueing_ms),
                opt(r.connect_ms),
                format!("{:.3}", r.ttfb_ms),
                format!("{:.3}", r.download_ms),
                format!("{}", r.encoded_body_size as u64),
                format!("{}", r.transfer_size as u64),
                r.status.to_string(),
                r.connection_id.map(|c| c.to_string()).unwrap_or_default(),
                r.connection_reused
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
                r.initial_priority.clone().unwrap_or_default(),
                r.priority.clone().unwrap_or_default(),
                r.chunks.len().to_string(),
                opt(r.chunks.first().map(|c| c.t_ms)),
                opt(r.chunks.last().map(|c| c.t_ms)),
                opt(r.server_sent_ms.map(|s| s.0)),
                opt(r.server_sent_ms.map(|s| s.1)),
                r.wire_priority.clone().unwrap_or_default(),
                opt(r.dns_ms),
            ]
        })
        .collect()
}

/// Columns of `resources.csv`, in order.
pub const RESOURCE_COLUMNS: &[&str] = &[
    "run_id",
    "profile",
    "workload",
    "server",
    "browser",
    "view",
    "variant",
    "phase",
    "outcome",
    "path",
    "initiator",
    "protocol",
    "start_ms",
    "request_start_ms",
    "response_start_ms",
    "response_end_ms",
    "queueing_ms",
    "connect_ms",
    "ttfb_ms",
    "download_ms",
    "encoded_body_size",
    "transfer_size",
    "status",
    "connection_id",
    "connection_reused",
    "initial_priority",
    "priority",
    "chunks",
    "first_chunk_ms",
    "last_chunk_ms",
    "server_first_byte_ms",
    "server_last_byte_ms",
    "wire_priority",
    "dns_ms",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_columns_are_identity_then_the_registry_then_the_trailer() {
        let metrics: Vec<&str> = crate::evidence::metric_registry::ALL
            .iter()
            .map(|m| m.name)
            .collect();
        let n = super::super::row_identity::COLUMNS.len();
        assert_eq!(&RUN_COLUMNS[..n], super::super::row_identity::COLUMNS);
        assert_eq!(&RUN_COLUMNS[n..n + metrics.len()], &metrics[..]);
        assert_eq!(&RUN_COLUMNS[n + metrics.len()..], TRAILING_COLUMNS);
        let mut rec = RunRecord::fixture("r1");
        rec.metrics.completion_ms = Some(100.0);
        let row = run_row(&rec);
        assert_eq!(row.len(), RUN_COLUMNS.len());
        let at = RUN_COLUMNS
            .iter()
            .position(|c| *c == "completion_ms")
            .unwrap();
        assert_eq!(row[at], "100.000");
    }

    #[test]
    fn resource_rows_have_a_field_per_column_with_priorities_and_chunks() {
        let mut rec = RunRecord::fixture("r1");
        rec.resources = crate::evidence::metrics::derive(
            &crate::evidence::metrics::tests::fixture("h2-page10"),
            &"page10"
                .parse::<crate::config::workload::Workload>()
                .unwrap()
                .kind,
            0.0,
        )
        .1;
        rec.resources[0].chunks = vec![
            crate::evidence::metrics::ChunkArrival {
                t_ms: 12.5,
                bytes: 100,
            },
            crate::evidence::metrics::ChunkArrival {
                t_ms: 20.0,
                bytes: 50,
            },
        ];
        let rows = resource_rows(&rec);
        assert!(rows.iter().all(|r| r.len() == RESOURCE_COLUMNS.len()));
        let col = |name: &str| RESOURCE_COLUMNS.iter().position(|c| *c == name).unwrap();
        assert!(!rows[0][col("initial_priority")].is_empty());
        assert_eq!(rows[0][col("chunks")], "2");
        assert_eq!(rows[0][col("first_chunk_ms")], "12.500");
        assert_eq!(rows[0][col("last_chunk_ms")], "20.000");
    }
}
