//! Tests of a testbed run's protocol: what is measured, and in what order the fake link,
//! server and browser are started, loaded and collected.

use super::*;
use crate::config::protocol::Protocol;
use crate::config::workload::WorkloadKind;
use crate::measure::browser::Browser;
use crate::servers::ServerView;
use std::cell::RefCell;
use std::rc::Rc;

type Log = Rc<RefCell<Vec<String>>>;

struct FakeLink(Log);
struct FakeServer(Log);
struct FakeBrowser {
    log: Log,
    launch_fails: bool,
    /// The URL it was asked to load.
    seen_url: Rc<RefCell<Option<String>>>,
}

/// Launches the fake browser at the run's start, writing down when the window closed.
struct FakeSource {
    browser: Option<FakeBrowser>,
    log: Log,
}

impl BrowserSource for FakeSource {
    fn acquire(
        &mut self,
        _: BrowserId,
        client: &dyn ClientSide,
        opts: &LaunchOptions,
    ) -> Result<Ready> {
        let b = self.browser.take().expect("one run");
        prelaunch::launch_now(Box::new(b), client, opts)
    }

    fn window_closed(&mut self) {
        self.log.borrow_mut().push("window closed".into());
    }
}

impl LinkSide for FakeLink {
    fn server_ip(&self) -> IpAddr {
        "10.9.0.2".parse().unwrap()
    }
    fn client(&self) -> &dyn ClientSide {
        self
    }
    fn take_stats(&self) -> Result<LinkStats> {
        self.0.borrow_mut().push("link take".into());
        Ok(LinkStats {
            profile: "wired".into(),
            ..LinkStats::default()
        })
    }
    fn start_timeline(&self, _trace_start: TraceStart, _draws: Option<u64>) {
        self.0.borrow_mut().push("link timeline".into());
    }
    fn namespace_counters(&self) -> (snmp::Counters, snmp::Counters) {
        self.0.borrow_mut().push("counters".into());
        Default::default()
    }
    fn arm_fault(&self, _: &FaultInjection, group: Option<i32>) -> Option<fault::Armed> {
        self.0.borrow_mut().push(format!("arm {group:?}"));
        None
    }
}

impl ClientSide for FakeLink {
    fn command(&self, program: &str) -> Command {
        self.0.borrow_mut().push(format!("command {program}"));
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

impl ServerUnderTest for FakeServer {
    fn name(&self) -> ServerId {
        ServerId::new("fake")
    }
    fn port(&self) -> u16 {
        8443
    }
    fn offers(&self, _: Protocol) -> bool {
        true
    }
    fn mark(&mut self) {
        self.0.borrow_mut().push("server mark".into());
    }
    fn collect(&mut self) -> ServerEvidence {
        self.0.borrow_mut().push("server collect".into());
        ServerEvidence {
            views: Some(vec![ServerView::logged(
                "h2",
                "GET",
                "/page10/index.html",
                200,
                1,
            )]),
            ..ServerEvidence::default()
        }
    }
    fn exited(&mut self) -> Option<String> {
        self.0.borrow_mut().push("server exited?".into());
        None
    }
    fn process_group(&self) -> Option<i32> {
        Some(4242)
    }
    fn describe(&self) -> ServerDescription {
        unreachable!("not part of a run")
    }
}

impl Browser for FakeBrowser {
    fn id(&self) -> BrowserId {
        BrowserId::default()
    }
    fn launch(&mut self, client: &dyn ClientSide, opts: &LaunchOptions) -> Result<()> {
        let _ = client.command("fake-browser");
        self.log.borrow_mut().push(format!(
            "launch {} {} port {}",
            opts.protocol, opts.server_ip, opts.port
        ));
        if self.launch_fails {
            anyhow::bail!("FakeBrowser did not start: no display")
        }
        Ok(())
    }
    fn process_group(&self) -> Option<i32> {
        None
    }
    fn version(&self) -> Option<String> {
        Some("Fake 1".into())
    }
    fn load(
        &mut self,
        url: &str,
        _: &WorkloadKind,
        expected: usize,
        _: Duration,
    ) -> Result<(Observation, LoadEnd)> {
        *self.seen_url.borrow_mut() = Some(url.to_string());
        self.log.borrow_mut().push(format!("load {expected}"));
        Ok((Observation::default(), LoadEnd::Completed))
    }
    fn close(&mut self) -> BrowserOverhead {
        self.log.borrow_mut().push("close".into());
        BrowserOverhead {
            teardown_ms: 7.0,
            ..BrowserOverhead::default()
        }
    }
}

fn run(launch_fails: bool, fault: Option<&FaultInjection>) -> (Vec<String>, RunParts) {
    let log: Log = Rc::default();
    let link = FakeLink(log.clone());
    let mut server = FakeServer(log.clone());
    let seen_url = Rc::new(RefCell::new(None));
    let mut browsers = FakeSource {
        browser: Some(FakeBrowser {
            log: log.clone(),
            launch_fails,
            seen_url: seen_url.clone(),
        }),
        log: log.clone(),
    };
    let m = Manifest::empty_page10();
    let server_id = ServerId::new("fake");
    let req = LoadRequest {
        server: &server_id,
        browser: BrowserId::default(),
        variant: Variant::new(Protocol::H2, H3Mode::Forced),
        manifest: &m,
        timeout: Duration::from_secs(1),
        settle_max: Duration::from_secs(1),
        fault,
        keep_bodies: false,
        visual: None,
        capture: &CaptureSet::none(),
        packet_tap: true,
        repeat: None,
        device: &crate::config::device::Device::desktop(),
        cpu_benchmark: false,
        trace_start: TraceStart::default(),
        draws: None,
    };
    let cert = Certificate::generate().unwrap();
    let parts = measure(&link, &mut server, &mut browsers, &cert, &req, None).unwrap();
    if !launch_fails {
        assert_eq!(
            seen_url.borrow().as_deref(),
            Some("https://pagebench.test:8443/page10/index.html")
        );
    }
    let log = log.borrow().clone();
    (log, parts)
}

#[test]
fn the_protocol_measures_only_the_load() {
    let fault: FaultInjection = "x=stall:300ms@50ms".parse().unwrap();
    let (log, parts) = run(false, Some(&fault));
    assert_eq!(
        log,
        [
            "command fake-browser",
            "launch h2 10.9.0.2 port 8443",
            // Counters start once the browser settled…
            "server mark",
            "link take",
            "link timeline",
            "counters",
            "arm Some(4242)",
            "load 0",
            // …and the link's interval ends with the load, and the kernel's counters with
            // it, before the next browser may start and this one closes.
            "link take",
            "counters",
            "window closed",
            "close",
            "server exited?",
            "server collect",
        ]
    );
    assert_eq!(parts.end, LoadEnd::Completed);
    assert_eq!(parts.browser, BrowserId::default());
    assert_eq!(parts.browser_version.as_deref(), Some("Fake 1"));
    assert_eq!(parts.overhead.teardown_ms, 7.0);
    assert_eq!(parts.url, "https://pagebench.test:8443/page10/index.html");
    assert_eq!(parts.link_stats.unwrap().profile, "wired");
    assert_eq!(parts.server.views.unwrap().len(), 1);
}

#[test]
fn a_browser_that_does_not_start_is_a_crashed_run_with_the_link_still_read() {
    let (log, parts) = run(true, None);
    assert!(!log
        .iter()
        .any(|l| l.starts_with("load") || l == "close" || l == "window closed"));
    assert_eq!(log.iter().filter(|l| *l == "link take").count(), 2);
    assert_eq!(
        parts.end,
        LoadEnd::Crashed("FakeBrowser did not start: no display".into())
    );
    assert!(parts.link_stats.is_ok());
    assert_eq!(log.last().unwrap(), "server collect");
}
