//! A busy machine that sends one protocol's attempts back through the gate, end to end but for
//! the testbed: the fault hook picks 30 % of h3's first attempts, a fake testbed makes those
//! loads slower and their link late (as a stalled emulator does), the plan loop runs them
//! again, the store keeps every attempt, and the summary and the report must mark the
//! comparison and print its first-attempt verdict beside the counted one — and, without the
//! injection, mark nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;

use super::execute::{Executor, PlanContext};
use crate::config::identity::{BrowserId, View};
use crate::config::plan::{self, PlanSpec};
use crate::config::profile::Profile;
use crate::config::protocol::H3Mode;
use crate::config::workload::Manifest;
use crate::evidence::metrics::RunMetrics;
use crate::evidence::run_record::RunRecord;
use crate::evidence::validate::{Outcome, Reason, ReasonKind};
use crate::measure::fault::{Fault, FaultInjection};
use crate::measure::runner::RunSpec;
use crate::results::attrition::Mark;
use crate::results::store::Meta;
use crate::results::summary;
use crate::support::stats::Side;

/// A testbed whose loads take 400 ms ± a few (the same for h2 and h3: no true difference),
/// and whose injected emulator stalls make the load that much slower and the link late.
struct StallingTestbed;

impl Executor for StallingTestbed {
    fn set_profile(&mut self, _: &Profile) -> Result<()> {
        Ok(())
    }

    fn execute(&mut self, spec: &RunSpec) -> Result<RunRecord> {
        // A deterministic spread from the attempt's id.
        let spread = spec
            .id
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
            % 41;
        let mut ms = 380.0 + spread as f64;
        let mut outcome = Outcome::Valid;
        let mut reasons = Vec::new();
        if let Some(FaultInjection {
            fault: Fault::StallEmulator(d),
            ..
        }) = &spec.fault
        {
            ms += d.as_secs_f64() * 1e3;
            outcome = Outcome::Invalid;
            reasons.push(Reason {
                kind: ReasonKind::Link,
                detail: "down: the emulator was behind its schedule".into(),
            });
        }
        Ok(RunRecord {
            plan_id: spec.plan_id.clone(),
            attempt: spec.attempt,
            protocol: spec.variant.protocol,
            h3_mode: spec.variant.h3_mode,
            variant: spec.variant,
            workload: spec.manifest.workload.name.clone(),
            profile: spec.profile.name.clone(),
            server: spec.server.clone(),
            phase: spec.phase,
            round: spec.round,
            position: spec.position,
            outcome,
            reasons,
            metrics: RunMetrics {
                completion_ms: Some(ms),
                ..RunMetrics::default()
            },
            ..RunRecord::fixture(&spec.id)
        })
    }

    fn recover(&mut self, _: &Profile) -> Result<Option<String>> {
        Ok(None)
    }
}

/// Runs 30 rounds of h2 and h3 on wired/page10 with `faults`, then summarises and reports.
fn matrix(faults: &[&str]) -> (summary::Summary, String) {
    let tmp = crate::support::tempdir::create("selection-test").unwrap();
    let spec = PlanSpec {
        profiles: vec!["wired".into()],
        workloads: vec!["page10".into()],
        servers: vec!["embedded".into()],
        browsers: vec![BrowserId::default()],
        views: vec![View::First],
        devices: vec![Default::default()],
        variants: crate::config::protocol::parse_variants("h2,h3", H3Mode::Forced).unwrap(),
        runs: 30,
        warmup: 0,
        seed: 3,
        adaptive: None,
    };
    let planned = plan::plan(&spec);
    let faults: Vec<FaultInjection> = faults.iter().map(|f| f.parse().unwrap()).collect();
    crate::measure::fault::check_targets(&faults, planned.iter().map(|p| p.id.as_str()), 2)
        .unwrap();
    let dir = tmp.path().join("results");
    let meta = Meta::fixture(spec, planned.len(), 60.0);
    let profiles = vec![Profile::simple("wired", 40.0, 5.0, 0.0)];
    let manifests: BTreeMap<String, Manifest> =
        [("page10".to_string(), Manifest::empty_page10())].into();
    let ctx = PlanContext::quiet(&profiles, &manifests, Duration::from_secs(60), 2, &faults);
    super::test_matrix::run_and_report(&mut StallingTestbed, &ctx, &planned, &meta, &dir)
}

fn h3_vs_h2(s: &summary::Summary) -> &summary::CellComparison {
    s.comparisons
        .iter()
        .find(|c| c.a.name() == "h3" && c.b.name() == "h2")
        .unwrap()
}

#[test]
fn a_protocol_sent_back_through_the_gate_more_often_is_marked_and_its_first_attempts_shown() {
    let (s, md) = matrix(&["*-h3%30=stall:300ms@50ms"]);
    let c = h3_vs_h2(&s);
    let a = c.attrition.as_ref().unwrap();
    // About 30 % of h3's 30 first attempts were hit, rejected and run again; h2 never.
    let rejected = a.rejections.events_a;
    assert!(
        (5..=15).contains(&rejected),
        "{rejected} h3 attempts rejected"
    );
    assert_eq!(a.rejections.trials_a, 30 + rejected);
    assert_eq!(a.rejections.events_b, 0);
    assert!(
        a.marks.contains(&Mark::Selection {
            more_rejected: Side::A
        }),
        "{:?}",
        a.marks
    );
    // The first attempts carry the slowed loads: their ratio is above the counted one.
    let first = a.first_attempts.ratio.unwrap();
    assert!(
        first > c.comparison.ratio.unwrap(),
        "{first} vs {:?}",
        c.comparison.ratio
    );
    let line = md
        .lines()
        .find(|l| l.contains("`wired/page10` h3 vs h2 †"))
        .unwrap_or_else(|| panic!("no marked comparison in the report:\n{md}"));
    assert!(
        line.contains("counted runs: ") && line.contains("first attempts: "),
        "{line}"
    );
    assert!(
        line.contains("Selection: h3's attempts were rejected more often"),
        "{line}"
    );
}

#[test]
fn without_the_injection_nothing_is_marked() {
    let (s, md) = matrix(&[]);
    let a = h3_vs_h2(&s).attrition.as_ref().unwrap();
    assert_eq!(a.rejections.events_a + a.rejections.events_b, 0);
    assert!(a.marks.is_empty(), "{:?}", a.marks);
    assert!(md.contains("No comparison is marked"), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("- `") && l.contains('†')));
}
