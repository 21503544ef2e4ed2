//! `pagebench bench server`: loopback throughput of one body (3 MB by default) per protocol,
//! a fresh connection per transfer, protocols interleaved, medians over several repetitions.
//! Loopback (MTU 64 KiB, no delay) measures the server's and the stacks' CPU cost, not what a
//! browser sees on a real path.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::embedded_server::client::ProbeConnection;
use crate::embedded_server::{
    ByteSize, Certificate, EmbeddedServer, Protocol, ServerConfig, ServerKnobs,
};

#[derive(clap::Args, Debug, Clone)]
pub struct BenchServerArgs {
    /// Body size of each transfer.
    #[arg(long, default_value = "3MB")]
    pub size: ByteSize,
    /// Transfers per protocol.
    #[arg(long, default_value_t = 9)]
    pub reps: usize,
    /// Server knobs from the `[server]` table of a TOML file (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the result as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Server knobs; every offered protocol is measured.
    #[command(flatten)]
    pub knobs: ServerKnobs,
}

/// One protocol's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProtocolFigures {
    pub protocol: String,
    pub reps: usize,
    /// Median request→last byte, ms.
    pub transfer_ms_median: f64,
    pub transfer_ms_min: f64,
    pub transfer_ms_max: f64,
    /// Median connection set-up (TCP+TLS or QUIC), ms.
    pub connect_ms_median: f64,
    /// Body bytes / median transfer time, MB/s (10^6 bytes).
    pub mb_per_s_median: f64,
    /// Server side, summed over the protocol's connections: TCP segments retransmitted or QUIC
    /// packets lost.
    pub server_retrans_or_lost: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub size_bytes: u64,
    pub applied: serde_json::Value,
    pub figures: Vec<ProtocolFigures>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs the benchmark; stops early (with an error) on Ctrl-C.
pub fn run(args: &BenchServerArgs) -> Result<BenchReport> {
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if args.size.0 == 0 || args.size.0 > 1_000_000_000 {
        bail!("--size must be 1 byte to 1GB");
    }
    let mut knobs = match &args.config {
        Some(p) => ServerKnobs::load_toml(p)?,
        None => ServerKnobs::default(),
    };
    knobs = knobs.overlay(&args.knobs).with_default_tcp_congestion();
    // The body lives in a scratch directory, removed on every exit path.
    let tmp = crate::support::tempdir::create("bench-server")?;
    let dir = tmp.path().to_path_buf();
    let body = {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut b = vec![0u8; args.size.0 as usize];
        rng.fill_bytes(&mut b);
        b
    };
    std::fs::create_dir_all(dir.join("bench"))?;
    std::fs::write(dir.join("bench/body.bin"), &body)?;
    let cert = Certificate::generate()?;
    let cert_der = cert.cert_der().clone();
    let mut server = EmbeddedServer::start(ServerConfig {
        root: dir.clone(),
        bind: "127.0.0.1:0".parse()?,
        knobs,
        cert,
        log_path: None,
        extra_ports: Vec::new(),
    })?;
    let protocols = server.knobs_applied().knobs.protocols.clone();
    let addr = server.addr();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut samples: Vec<(Protocol, f64, f64, u64)> = Vec::new();
    let result = rt.block_on(async {
        // Warm-up: page cache, code paths, allocator.
        for &p in &protocols {
            transfer(addr, p, &cert_der, &body).await?;
        }
        for rep in 0..args.reps {
            // Interleave, and rotate the order so no protocol always goes first.
            for i in 0..protocols.len() {
                if crate::support::signals::interrupted() {
                    return Err(crate::support::signals::Interrupted.into());
                }
                let p = protocols[(i + rep) % protocols.len()];
                let mark = server.connection_mark();
                let (connect, took) = transfer(addr, p, &cert_der, &body).await?;
                // The connection's server-side numbers (closed a moment after the client left).
                tokio::time::sleep(Duration::from_millis(20)).await;
                let lost: u64 = server
                    .transport_stats_since(mark)
                    .iter()
                    .map(|s| {
                        s.tcp.as_ref().map_or(0, |t| t.total_retrans as u64)
                            + s.quic.as_ref().map_or(0, |q| q.lost_packets)
                    })
                    .sum();
                samples.push((
                    p,
                    connect.as_secs_f64() * 1e3,
                    took.as_secs_f64() * 1e3,
                    lost,
                ));
            }
        }
        Ok::<(), anyhow::Error>(())
    });
    let applied = server.knobs_applied().to_json();
    server.shutdown();
    result?;
    let figures = figures_of(&protocols, &samples, args.size.0);
    Ok(BenchReport {
        size_bytes: args.size.0,
        applied,
        figures,
    })
}

/// Each protocol's figures from the interleaved `samples` (protocol, connect ms, transfer ms,
/// server-side retransmissions or losses) of a `size`-byte body.
fn figures_of(
    protocols: &[Protocol],
    samples: &[(Protocol, f64, f64, u64)],
    size: u64,
) -> Vec<ProtocolFigures> {
    protocols
        .iter()
        .map(|&p| {
            let mine: Vec<_> = samples.iter().filter(|s| s.0 == p).collect();
            let mut connect: Vec<f64> = mine.iter().map(|s| s.1).collect();
            let mut took: Vec<f64> = mine.iter().map(|s| s.2).collect();
            let med = median(&mut took);
            ProtocolFigures {
                protocol: p.alpn().to_string(),
                reps: mine.len(),
                transfer_ms_median: med,
                transfer_ms_min: took.first().copied().unwrap_or(f64::NAN),
                transfer_ms_max: took.last().copied().unwrap_or(f64::NAN),
                connect_ms_median: median(&mut connect),
                mb_per_s_median: size as f64 / 1e6 / (med / 1e3),
                server_retrans_or_lost: mine.iter().map(|s| s.3).sum(),
            }
        })
        .collect()
}

async fn transfer(
    addr: std::net::SocketAddr,
    p: Protocol,
    cert: &rustls::pki_types::CertificateDer<'static>,
    body: &[u8],
) -> Result<(Duration, Duration)> {
    let mut c = ProbeConnection::connect(addr, p, cert)
        .await
        .with_context(|| format!("{p} connection"))?;
    if c.protocol() != p {
        bail!("asked for {p}, got {}", c.protocol());
    }
    let f = c.get("/bench/body.bin").await?;
    if f.status != 200 || f.body.as_ref() != body {
        bail!(
            "{p}: status {} with {} of {} bytes (or different bytes)",
            f.status,
            f.body.len(),
            body.len()
        );
    }
    let connect = c.connect_time;
    c.close().await;
    Ok((connect, f.elapsed))
}

/// The human table.
pub fn table(r: &BenchReport) -> String {
    let mut rows = vec![vec![
        "protocol".to_string(),
        "reps".into(),
        "median MB/s".into(),
        "median ms".into(),
        "min–max ms".into(),
        "connect ms".into(),
        "server retrans/lost".into(),
    ]];
    for f in &r.figures {
        rows.push(vec![
            f.protocol.clone(),
            f.reps.to_string(),
            format!("{:.0}", f.mb_per_s_median),
            format!("{:.1}", f.transfer_ms_median),
            format!("{:.1}–{:.1}", f.transfer_ms_min, f.transfer_ms_max),
            format!("{:.1}", f.connect_ms_median),
            f.server_retrans_or_lost.to_string(),
        ]);
    }
    crate::support::textfmt::table(&rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(super::median(&mut []).is_nan());
    }
}
