//! aioquic as a server under test (`--servers aioquic`): pagebench's static HTTP/3 server on
//! aioquic 1.7.2 (`src/servers/helpers/aioquic_server.py`, compiled in and written into the
//! server's work directory; `./setup.sh` installs aioquic into a virtual environment), with h1
//! and h2 of the same port from the embedded server (see [`crate::servers::split`]).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::config::protocol::Protocol;
use crate::embedded_server::{QuicCongestion, ServerKnobs};
use crate::servers::split::{self, H3Helper};
use crate::servers::{Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "aioquic",
    speaks: &Protocol::ALL,
    cannot_serve: "",
    start,
};

/// The server script.
pub const SCRIPT: &str = include_str!("../helpers/aioquic_server.py");
/// Overrides which Python (one with aioquic) runs it.
pub const PYTHON_ENV: &str = "PAGEBENCH_AIOQUIC_PYTHON";
/// The virtual environment `./setup.sh` makes.
const VENV_PYTHON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/target/aioquic-venv/bin/python"
);

/// The Python with aioquic: `$PAGEBENCH_AIOQUIC_PYTHON`, else the checkout's virtual
/// environment.
pub fn python() -> Result<PathBuf> {
    if let Some(p) = split::configured_program(PYTHON_ENV, VENV_PYTHON) {
        return Ok(p);
    }
    bail!("--servers aioquic needs aioquic in a virtual environment: run ./setup.sh (it installs aioquic 1.7.2 into target/aioquic-venv/), or set {PYTHON_ENV} to a Python that has it")
}

/// aioquic's name for a controller: it has reno and cubic, no BBR.
pub fn congestion(c: QuicCongestion) -> Result<&'static str> {
    match c {
        QuicCongestion::Cubic => Ok("cubic"),
        QuicCongestion::Newreno => Ok("reno"),
        QuicCongestion::Bbr => bail!(
            "--servers aioquic: aioquic has no BBR (it has reno and cubic): use --quic-congestion cubic or newreno"
        ),
    }
}

/// The script's knob flags.
pub fn knob_args(knobs: &ServerKnobs) -> Result<Vec<String>> {
    let e = knobs.effective();
    let mut a = split::flow_args(&e, congestion(e.quic_congestion)?);
    a.extend(split::socket_args(&e));
    Ok(a)
}

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let knob_args = knob_args(ctx.knobs)?;
    let python = python()?;
    std::fs::create_dir_all(&ctx.work)
        .with_context(|| format!("cannot create {}", ctx.work.display()))?;
    let script = ctx.work.join("aioquic_server.py");
    std::fs::write(&script, SCRIPT)
        .with_context(|| format!("cannot write {}", script.display()))?;
    split::start(
        ctx,
        H3Helper {
            name: SERVER.name,
            command: vec![OsString::from(python), script.into_os_string()],
            knob_args,
            knobs_applied: vec![
                "protocols",
                "h3_max_concurrent_streams",
                "h3_stream_receive_window (initial: aioquic doubles it once half is used)",
                "h3_connection_receive_window (initial, doubled the same way)",
                "quic_congestion (cubic or newreno → reno)",
                "udp_recv_buffer",
                "udp_send_buffer",
                "alt_svc_over_h3",
            ],
            knobs_not_applicable: vec!["h3_send_buffer", "gso", "priorities", "early_hints",
                "early_hints_links",
                "page_think_ms"],
            windows: Vec::new(),
            note: "aioquic 1.7.2 on Python's asyncio: one thread, aioquic's pacer, 1200-byte datagrams (aioquic's default, no path MTU discovery), no GSO, no request priorities (streams sent round-robin), a response's whole body handed to the stream at once".into(),
            beside: &super::embedded::SERVER,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_map_onto_the_script_and_bbr_is_refused() {
        let a = knob_args(&ServerKnobs::default()).unwrap().join(" ");
        assert!(a.ends_with("--cc cubic"), "{a}");
        let k = ServerKnobs {
            quic_congestion: Some(QuicCongestion::Newreno),
            ..Default::default()
        };
        assert!(knob_args(&k).unwrap().join(" ").contains("--cc reno"));
        let k = ServerKnobs {
            quic_congestion: Some(QuicCongestion::Bbr),
            ..Default::default()
        };
        let e = knob_args(&k).unwrap_err().to_string();
        assert!(e.contains("aioquic has no BBR"), "{e}");
        // The script takes exactly these flags.
        for flag in [
            "--max-streams",
            "--stream-window",
            "--conn-window",
            "--cc",
            "--udp-recv-buffer",
            "--udp-send-buffer",
            "--alt-svc",
            "--listen",
            "--ready",
        ] {
            assert!(SCRIPT.contains(&format!("\"{flag}\"")), "{flag}");
        }
    }
}
