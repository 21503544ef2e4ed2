//! rustls configurations (ring provider): the server's for TCP (ALPN h2 / http/1.1 as offered)
//! and QUIC (TLS 1.3, ALPN h3), and a client's that trusts exactly one certificate — what
//! Chromium's SPKI pin does — for pagebench's own probe client.

use std::sync::Arc;

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::SingleCertAndKey;
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::cert::Certificate;
use super::knobs::{EffectiveKnobs, Protocol};

pub const ALPN_H1: &[u8] = b"http/1.1";
pub const ALPN_H2: &[u8] = b"h2";
pub const ALPN_H3: &[u8] = b"h3";

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS over TCP: ALPN offers h2 before http/1.1 (when both are offered), like real servers.
pub(crate) fn tcp_server_config(
    cert: &Certificate,
    knobs: &EffectiveKnobs,
    key_log: Arc<dyn rustls::KeyLog>,
) -> Result<Arc<rustls::ServerConfig>> {
    let mut alpn = Vec::new();
    if knobs.offers(Protocol::H2) {
        alpn.push(ALPN_H2.to_vec());
    }
    if knobs.offers(Protocol::H1) {
        alpn.push(ALPN_H1.to_vec());
    }
    tcp_config(cert, alpn, key_log, knobs.tls_resumption)
}

/// The same with HTTP/1.1 only: for an origin a replayed site used over HTTP/1.1 when
/// recorded (its `as-recorded` arm), chosen by the client's SNI.
pub(crate) fn tcp_server_config_h1_only(
    cert: &Certificate,
    knobs: &EffectiveKnobs,
    key_log: Arc<dyn rustls::KeyLog>,
) -> Result<Arc<rustls::ServerConfig>> {
    tcp_config(cert, vec![ALPN_H1.to_vec()], key_log, knobs.tls_resumption)
}

fn tcp_config(
    cert: &Certificate,
    alpn: Vec<Vec<u8>>,
    key_log: Arc<dyn rustls::KeyLog>,
    resumption: bool,
) -> Result<Arc<rustls::ServerConfig>> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS versions")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(cert.certified_key())));
    cfg.alpn_protocols = alpn;
    cfg.key_log = key_log;
    set_resumption(&mut cfg, resumption);
    Ok(Arc::new(cfg))
}

/// rustls resumes by default (TLS 1.3 tickets naming sessions it keeps in memory); off: no
/// ticket is sent and no session is kept, so every handshake is a full one.
fn set_resumption(cfg: &mut rustls::ServerConfig, on: bool) {
    if !on {
        cfg.send_tls13_tickets = 0;
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    }
}

/// TLS 1.3 inside QUIC, ALPN h3; with 0-RTT a resuming client's early data is accepted (quinn
/// takes early data only with rustls's `max_early_data_size` at its QUIC value, u32::MAX).
pub(crate) fn quic_server_config(
    cert: &Certificate,
    knobs: &EffectiveKnobs,
    key_log: Arc<dyn rustls::KeyLog>,
) -> Result<quinn::crypto::rustls::QuicServerConfig> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS versions")?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SingleCertAndKey::from(cert.certified_key())));
    cfg.alpn_protocols = vec![ALPN_H3.to_vec()];
    cfg.key_log = key_log;
    set_resumption(&mut cfg, knobs.tls_resumption);
    if knobs.quic_0rtt {
        cfg.max_early_data_size = u32::MAX;
    }
    quinn::crypto::rustls::QuicServerConfig::try_from(cfg)
        .context("the TLS configuration is not usable for QUIC")
}

/// Trusts exactly the given end-entity certificate (and checks handshake signatures with it).
#[derive(Debug)]
pub struct PinnedCert {
    expected: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl PinnedCert {
    pub fn new(expected: CertificateDer<'static>) -> Arc<PinnedCert> {
        Arc::new(PinnedCert {
            expected,
            provider: provider(),
        })
    }
}

impl ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.expected.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the server's certificate is not the pinned one".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client configuration that trusts only `cert` and offers `alpn`.
pub fn pinned_client_config(
    cert: &CertificateDer<'static>,
    alpn: &[&[u8]],
    tls13_only: bool,
) -> Result<rustls::ClientConfig> {
    let versions: &[&'static rustls::SupportedProtocolVersion] = if tls13_only {
        &[&rustls::version::TLS13]
    } else {
        &[&rustls::version::TLS13, &rustls::version::TLS12]
    };
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .context("TLS versions")?
        .dangerous()
        .with_custom_certificate_verifier(PinnedCert::new(cert.clone()))
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Ok(cfg)
}
