// Dev probe: launch Chromium in namespace $NS, load $URL, print metrics and validation.
use pagebench::browser::*;
use std::process::Command;
use std::time::Duration;

fn main() -> anyhow::Result<()> {
    let ns = std::env::var("NS")?;
    let url = std::env::var("URL")?;
    let wl: pagebench::workload::Workload = std::env::var("WL")?.parse()?;
    let manifest = pagebench::workload::read_manifest(std::path::Path::new("/tmp/pg1"), &wl.name)?;
    let proto: Protocol = std::env::var("PROTO")?.parse()?;
    let mode = if std::env::var("PRIMED").is_ok() {
        H3Mode::Primed
    } else {
        H3Mode::Forced
    };
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns, CHROMIUM]);
    let o = LaunchOptions {
        protocol: proto,
        h3_mode: mode,
        server_ip: "127.0.0.1".parse()?,
        port: std::env::var("PORT")?.parse()?,
        spki: std::env::var("SPKI")?,
        settle_max: Duration::from_secs(3),
        extra_args: vec![],
    };
    let mut b = Browser::launch(cmd, &o)?;
    let (obs, end) = load::load(
        &mut b,
        &url,
        &wl.kind,
        manifest.files.len(),
        Duration::from_secs(30),
    )?;
    b.close();
    println!("overhead {:?}", b.overhead);
    let (m, _r) = pagebench::metrics::derive(&obs, &wl.kind, 0.0);
    println!("{end:?} {m:?}");
    let v = pagebench::validate::validate(proto.alpn(), &manifest, &obs, &end, None);
    println!("{:?} {} {:?}", v.outcome, v.reason_text(), v.warnings);
    Ok(())
}
