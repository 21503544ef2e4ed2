//! Cloudflare's quiche as a server under test (`--servers quiche`): pagebench's static HTTP/3
//! server on quiche 0.30 (`src/servers/helpers/quiche-server`, its own package so quiche's
//! vendored BoringSSL stays out of pagebench's build; `./setup.sh` builds it), with h1 and h2 of
//! the same port from the embedded server (see [`crate::servers::split`]).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::config::protocol::Protocol;
use crate::embedded_server::{QuicCongestion, ServerKnobs};
use crate::servers::split::{self, H3Helper};
use crate::servers::{ConfiguredWindow, Registration, ServerUnderTest, StartContext};

pub const SERVER: Registration = Registration {
    name: "quiche",
    speaks: &Protocol::ALL,
    cannot_serve: "",
    start,
};

/// Overrides where the helper binary is.
pub const PROGRAM_ENV: &str = "PAGEBENCH_QUICHE_SERVER";
const BINARY: &str = "pagebench-quiche-server";
/// Where `./setup.sh` builds it.
const BUILT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/target/quiche-server/release/pagebench-quiche-server"
);

/// The helper binary: `$PAGEBENCH_QUICHE_SERVER`, else the checkout's build, else `PATH`.
pub fn program() -> Result<PathBuf> {
    if let Some(p) = split::configured_program(PROGRAM_ENV, BUILT) {
        return Ok(p);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(BINARY))
            .find(|p| p.is_file())
    });
    match on_path {
        Some(p) => Ok(p),
        None => bail!(
            "--servers quiche needs {BINARY}: run ./setup.sh (it builds src/servers/helpers/quiche-server into target/quiche-server/), or set {PROGRAM_ENV}"
        ),
    }
}

/// quiche's name for a controller (`bbr` is its BBRv2 from the gcongestion branch).
pub fn congestion(c: QuicCongestion) -> &'static str {
    match c {
        QuicCongestion::Cubic => "cubic",
        QuicCongestion::Newreno => "reno",
        QuicCongestion::Bbr => "bbr2",
    }
}

/// The helper's knob flags, and the windows they fix.
pub fn knob_args(knobs: &ServerKnobs) -> (Vec<String>, Vec<ConfiguredWindow>) {
    let e = knobs.effective();
    let mut a = split::flow_args(&e, congestion(e.quic_congestion));
    let mut windows = Vec::new();
    // quiche grows its receive windows (autotuning up to 16/24 MB); a window the user set is
    // kept as set.
    if knobs.h3_stream_receive_window.is_some() || knobs.h3_connection_receive_window.is_some() {
        a.push("--fixed-windows".into());
        windows.push(ConfiguredWindow {
            protocol: Protocol::H3,
            upload: true,
            bytes: e.h3_stream_receive_window,
            knob: "--h3-stream-receive-window".into(),
            setting: "quiche initial_max_stream_data_bidi_remote, not autotuned beyond it".into(),
        });
    }
    a.extend(split::socket_args(&e));
    (a, windows)
}

fn start(ctx: &StartContext) -> Result<Box<dyn ServerUnderTest>> {
    let (knob_args, windows) = knob_args(ctx.knobs);
    split::start(
        ctx,
        H3Helper {
            name: SERVER.name,
            command: vec![OsString::from(program()?)],
            knob_args,
            knobs_applied: vec![
                "protocols",
                "h3_max_concurrent_streams",
                "h3_stream_receive_window",
                "h3_connection_receive_window",
                "quic_congestion (newreno → reno, bbr → bbr2)",
                "udp_recv_buffer",
                "udp_send_buffer",
                "alt_svc_over_h3",
            ],
            knobs_not_applicable: vec![
                // quiche bounds a stream's unacknowledged data only by flow control and the
                // congestion window.
                "h3_send_buffer",
                "gso",
                // quiche always schedules by the request's priority header (RFC 9218).
                "priorities",
                "early_hints",
                "early_hints_links",
                "page_think_ms",
            ],
            windows,
            note: "quiche 0.30 with BoringSSL: one thread, quiche's pacing honoured to 1 ms, 1350-byte datagrams, no GSO, responses scheduled by the request's priority header; receive windows autotuned unless set; quiche does not count congestion events (0)".into(),
            beside: &super::embedded::SERVER,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded_server::ByteSize;

    #[test]
    fn knobs_map_onto_the_helper() {
        let (a, w) = knob_args(&ServerKnobs::default());
        assert_eq!(
            a.join(" "),
            "--max-streams 100 --stream-window 1250000 --conn-window 4611686018427387903 --cc cubic"
        );
        assert!(w.is_empty());
        let k = ServerKnobs {
            h3_stream_receive_window: Some(ByteSize(65536)),
            quic_congestion: Some(QuicCongestion::Bbr),
            udp_recv_buffer: Some(ByteSize(4096)),
            alt_svc_over_h3: Some(true),
            ..Default::default()
        };
        let (a, w) = knob_args(&k);
        let a = a.join(" ");
        assert!(a.contains("--stream-window 65536"), "{a}");
        assert!(a.contains("--cc bbr2 --fixed-windows"), "{a}");
        assert!(a.ends_with("--udp-recv-buffer 4096 --alt-svc"), "{a}");
        assert_eq!((w[0].bytes, w[0].upload), (65536, true));
    }
}
