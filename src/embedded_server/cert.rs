//! The server's self-signed certificate for `pagebench.test` (ECDSA P-256), as PEM files that
//! external servers (Caddy, nginx) can use too, and the base64 SHA-256 of its public key (SPKI)
//! that Chromium's `--ignore-certificate-errors-spki-list` accepts for h1, h2 and h3 alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::{CertifiedKey, SigningKey};
use sha2::{Digest, Sha256};

/// The host name every experiment uses (mapped by Chromium's resolver rules).
pub const HOST: &str = "pagebench.test";
pub const CERT_FILE: &str = "cert.pem";
pub const KEY_FILE: &str = "key.pem";

/// A certificate and its private key.
#[derive(Clone)]
pub struct Certificate {
    cert_pem: String,
    key_pem: String,
    cert_der: CertificateDer<'static>,
    key: Arc<dyn SigningKey>,
    spki_sha256_base64: String,
    /// Where the PEM files are, once written or loaded.
    dir: Option<PathBuf>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("spki_sha256_base64", &self.spki_sha256_base64)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Certificate {
    /// A fresh self-signed certificate for `pagebench.test` (and `localhost`, 127.0.0.1), kept in
    /// memory only.
    pub fn generate() -> Result<Certificate> {
        Self::generate_for(&[])
    }

    /// The same, valid for `hosts` too and for every `*.pagebench.test` (sharded pages): one
    /// certificate for all the origins of the replayed sites, so the browser may coalesce
    /// HTTP/2 and HTTP/3 connections of origins that share an address, as it did when recorded.
    pub fn generate_for(hosts: &[String]) -> Result<Certificate> {
        let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .context("cannot generate an ECDSA P-256 key")?;
        let mut names = vec![
            HOST.to_string(),
            format!("*.{HOST}"),
            "localhost".to_string(),
        ];
        names.extend(
            hosts
                .iter()
                .filter(|h| !names.contains(h))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let mut params = rcgen::CertificateParams::new(names)
            .with_context(|| format!("bad certificate names among {hosts:?}"))?;
        params.subject_alt_names.push(rcgen::SanType::IpAddress(
            std::net::Ipv4Addr::LOCALHOST.into(),
        ));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, HOST);
        let cert = params
            .self_signed(&key_pair)
            .context("cannot self-sign the certificate")?;
        Self::from_pem(cert.pem(), key_pair.serialize_pem(), None)
    }

    /// Builds from PEM text; checks that the key belongs to the certificate.
    fn from_pem(cert_pem: String, key_pem: String, dir: Option<PathBuf>) -> Result<Certificate> {
        let cert_der =
            CertificateDer::from_pem_slice(cert_pem.as_bytes()).context("no certificate in PEM")?;
        let key_der =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).context("no private key in PEM")?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key_der)
            .context("unsupported private key")?;
        CertifiedKey::new(vec![cert_der.clone()], key.clone())
            .keys_match()
            .context("the private key does not belong to the certificate")?;
        let spki = key
            .public_key()
            .context("cannot derive the public key (SPKI)")?;
        let spki_sha256_base64 =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(spki.as_ref()));
        Ok(Certificate {
            cert_pem,
            key_pem,
            cert_der,
            key,
            spki_sha256_base64,
            dir,
        })
    }

    /// Loads `cert.pem` and `key.pem` from `dir`.
    pub fn load(dir: &Path) -> Result<Certificate> {
        let (cp, kp) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        let cert_pem = std::fs::read_to_string(&cp)
            .with_context(|| format!("cannot read {}", cp.display()))?;
        let key_pem = std::fs::read_to_string(&kp)
            .with_context(|| format!("cannot read {}", kp.display()))?;
        Self::from_pem(cert_pem, key_pem, Some(dir.to_path_buf())).with_context(|| {
            format!(
                "{} / {} are not a usable certificate and key (delete them to get new ones)",
                cp.display(),
                kp.display()
            )
        })
    }

    /// The certificate cached in `dir`: loaded when both files are there and valid, otherwise
    /// generated and written (so the SPKI stays the same from run to run).
    pub fn load_or_create(dir: &Path) -> Result<Certificate> {
        let (cp, kp) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        if cp.exists() || kp.exists() {
            match Self::load(dir) {
                Ok(c) => return Ok(c),
                Err(e) => {
                    if cp.exists() && kp.exists() {
                        return Err(e);
                    }
                    tracing::warn!(
                        "incomplete certificate cache in {}: regenerating",
                        dir.display()
                    );
                }
            }
        }
        let mut c = Self::generate()?;
        c.write_pem(dir)?;
        Ok(c)
    }

    /// Writes `cert.pem` and `key.pem` (mode 0600) into `dir`, creating it, and remembers it.
    pub fn write_pem(&mut self, dir: &Path) -> Result<(PathBuf, PathBuf)> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create certificate directory {}", dir.display()))?;
        let (cp, kp) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        std::fs::write(&cp, &self.cert_pem)
            .with_context(|| format!("cannot write {}", cp.display()))?;
        let _ = std::fs::remove_file(&kp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&kp)
            .with_context(|| format!("cannot write {}", kp.display()))?;
        f.write_all(self.key_pem.as_bytes())
            .with_context(|| format!("cannot write {}", kp.display()))?;
        self.dir = Some(dir.to_path_buf());
        Ok((cp, kp))
    }

    /// base64(SHA-256(SubjectPublicKeyInfo DER)): the value for Chromium's
    /// `--ignore-certificate-errors-spki-list` and curl's `--pinnedpubkey sha256//…`.
    pub fn spki_sha256_base64(&self) -> &str {
        &self.spki_sha256_base64
    }

    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The PEM paths, if the certificate was written or loaded from a directory.
    pub fn cert_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(CERT_FILE))
    }

    pub fn key_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(KEY_FILE))
    }

    /// The key and certificate as rustls serves them.
    pub(crate) fn certified_key(&self) -> Arc<CertifiedKey> {
        Arc::new(CertifiedKey::new(
            vec![self.cert_der.clone()],
            self.key.clone(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_certificate_round_trips_through_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let c1 = Certificate::load_or_create(dir.path()).unwrap();
        assert_eq!(c1.spki_sha256_base64().len(), 44);
        assert!(c1.cert_pem().contains("BEGIN CERTIFICATE"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        // Cached: the same key comes back.
        let c2 = Certificate::load_or_create(dir.path()).unwrap();
        assert_eq!(c1.spki_sha256_base64(), c2.spki_sha256_base64());
        assert_eq!(c1.cert_der(), c2.cert_der());
        // A fresh one differs.
        let c3 = Certificate::generate().unwrap();
        assert_ne!(c1.spki_sha256_base64(), c3.spki_sha256_base64());
    }

    #[test]
    fn mismatched_key_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Certificate::generate().unwrap();
        a.write_pem(dir.path()).unwrap();
        let b = Certificate::generate().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), b.key_pem()).unwrap();
        let err = format!("{:#}", Certificate::load(dir.path()).unwrap_err());
        assert!(err.contains("does not belong"), "{err}");
        assert!(Certificate::load_or_create(dir.path()).is_err());
    }
}
