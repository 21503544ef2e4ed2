//! A third engine through a matrix cell to the report, by the trait and the registry alone: the
//! test-only `fake` engine (`measure::browser::engines::fake`, which replays a recorded load) is planned
//! by name, made by the registry, driven by the real run protocol (`testbed::measure`, over a
//! link and a server that stand in for the namespaces), its observation derived and validated
//! (`runner::assemble`), stored, summarised and reported — and every table names it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::execute::{PlanContext, RunTarget, TestbedExecutor};
use crate::config::capacity::TraceStart;
use crate::config::identity::{ServerId, View};
use crate::config::plan::{self, PlanSpec};
use crate::config::profile::Profile;
use crate::config::protocol::{H3Mode, Protocol};
use crate::config::workload::Manifest;
use crate::embedded_server::Certificate;
use crate::evidence::run_record::RunRecord;
use crate::evidence::validate::Outcome;
use crate::link::LinkStats;
use crate::measure::browser::engines::fake;
use crate::measure::browser::ClientSide;
use crate::measure::fault::{self, FaultInjection};
use crate::measure::runner::{self, RunSpec};
use crate::measure::testbed::{self, LaunchEach, LinkSide};
use crate::results::store::Meta;
use crate::results::summary;
use crate::servers::{ServerDescription, ServerEvidence, ServerUnderTest, ServerView};
use crate::support::snmp;

/// The client side of a link that carries nothing (the fake loads nothing).
struct QuietLink;

impl ClientSide for QuietLink {
    fn command(&self, program: &str) -> Command {
        Command::new(program)
    }
    fn connect(
        &self,
        _: std::net::SocketAddr,
        _: Duration,
    ) -> std::io::Result<std::net::TcpStream> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

impl LinkSide for QuietLink {
    fn server_ip(&self) -> IpAddr {
        "10.9.0.2".parse().unwrap()
    }
    fn client(&self) -> &dyn ClientSide {
        self
    }
    fn take_stats(&self) -> Result<LinkStats> {
        Ok(LinkStats {
            profile: "wired".into(),
            ..LinkStats::default()
        })
    }
    fn start_timeline(&self, _: TraceStart, _: Option<u64>) {}
    fn namespace_counters(&self) -> (snmp::Counters, snmp::Counters) {
        Default::default()
    }
    fn arm_fault(&self, _: &FaultInjection, _: Option<i32>) -> Option<fault::Armed> {
        None
    }
}

/// A server whose log is the recorded load's requests, served over h2.
struct RecordedServer(Vec<ServerView>);

impl ServerUnderTest for RecordedServer {
    fn name(&self) -> ServerId {
        ServerId::new("embedded")
    }
    fn port(&self) -> u16 {
        8443
    }
    fn offers(&self, p: Protocol) -> bool {
        p == Protocol::H2
    }
    fn mark(&mut self) {}
    fn collect(&mut self) -> ServerEvidence {
        ServerEvidence {
            views: Some(self.0.clone()),
            ..ServerEvidence::default()
        }
    }
    fn exited(&mut self) -> Option<String> {
        None
    }
    fn process_group(&self) -> Option<i32> {
        None
    }
    fn describe(&self) -> ServerDescription {
        unreachable!("not part of a run")
    }
}

/// The testbed of this matrix: the run protocol over the quiet link and the recorded server,
/// each run's browser made by the registry.
struct StandIn {
    server: RecordedServer,
    cert: Certificate,
}

impl RunTarget for StandIn {
    fn set_profile(&mut self, _: &Profile) -> Result<()> {
        Ok(())
    }
    fn run(&mut self, spec: &RunSpec) -> Result<RunRecord> {
        let req = runner::load_request(spec);
        let parts = testbed::measure(
            &QuietLink,
            &mut self.server,
            &mut LaunchEach,
            &self.cert,
            &req,
            None,
        )?;
        Ok(runner::assemble(spec, parts))
    }
    fn broken(&mut self) -> Option<String> {
        None
    }
}

#[test]
fn a_third_engine_goes_through_a_matrix_cell_to_the_report_by_the_registry_alone() {
    let recording = fake::recording();
    let manifest = crate::evidence::validate::tests::manifest_of(&recording, "page10");
    let views = crate::evidence::validate::tests::server_view(&recording, "h2");
    let spec = PlanSpec {
        profiles: vec!["wired".into()],
        workloads: vec!["page10".into()],
        servers: vec!["embedded".into()],
        browsers: crate::measure::browser::parse_browsers("fake").unwrap(),
        views: vec![View::First],
        devices: vec![Default::default()],
        variants: crate::config::protocol::parse_variants("h2", H3Mode::Forced).unwrap(),
        runs: 5,
        warmup: 0,
        seed: 3,
        adaptive: None,
    };
    let planned = plan::plan(&spec);
    assert_eq!(planned.len(), 5);
    let tmp = crate::support::tempdir::create("engine-test").unwrap();
    let dir = tmp.path().join("results");
    let mut meta = Meta::fixture(spec, planned.len(), 60.0);
    meta.machine.browsers = crate::measure::browser::installed_versions();
    meta.engines = crate::measure::browser::tells_of(&meta.plan.browsers);
    let profiles = vec![Profile::simple("wired", 40.0, 5.0, 0.0)];
    let manifests: BTreeMap<String, Manifest> = [("page10".to_string(), manifest)].into();
    let ctx = PlanContext::quiet(&profiles, &manifests, Duration::from_secs(60), 0, &[]);
    let cert = Certificate::generate().unwrap();
    let mut executor = TestbedExecutor::with_factory(&profiles[0], move |_| {
        Ok(StandIn {
            server: RecordedServer(views.clone()),
            cert: cert.clone(),
        })
    })
    .unwrap();
    let (s, md) = super::test_matrix::run_and_report(&mut executor, &ctx, &planned, &meta, &dir);

    // Every run is the fake's, valid on its three viewpoints, with the recording's numbers.
    let rows = summary::read_runs(&dir).unwrap();
    assert_eq!(rows.len(), 5);
    let load_event_end =
        crate::evidence::metrics::EntryTiming::parse(recording.navigation.as_ref().unwrap())
            .load_event_end;
    for r in &rows {
        assert_eq!(r.browser, fake::ID);
        assert_eq!(
            r.outcome,
            Outcome::Valid,
            "{}: {:?}",
            r.run_id,
            r.invalid_kinds
        );
        assert_eq!(r.viewpoints, 3);
        assert_eq!(r.completion_ms(), Some(load_event_end));
    }
    let record: RunRecord = serde_json::from_slice(
        &std::fs::read(dir.join("runs").join(format!("{}.json", rows[0].run_id))).unwrap(),
    )
    .unwrap();
    assert_eq!(record.browser_version.as_deref(), Some(fake::VERSION));
    assert_eq!(record.viewpoints, 3);
    assert_eq!(record.observation.network.protocol, fake::PROTOCOL);
    assert_eq!(record.resources.len(), 10);

    // Summarised and reported under its own name.
    assert_eq!(s.series.len(), 1);
    assert_eq!(s.series[0].key.browser, fake::ID);
    assert!(
        md.contains(&format!("| **browser** | {} |", fake::VERSION)),
        "{md}"
    );
    assert!(
        md.contains("| wired | page10 | embedded, Fake | 0 of 5 rejected |"),
        "{md}"
    );
    assert!(
        md.contains("— Fake**"),
        "its tables are titled with its name:\n{md}"
    );
    assert!(
        md.contains("(Resource Timing, FakeTools and the server's own log)"),
        "the DevTools viewpoint by its name:\n{md}"
    );
}
