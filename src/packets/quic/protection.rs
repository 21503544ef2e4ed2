//! QUIC packet protection (RFC 9001 §5): cipher suites, HKDF-Expand-Label, the Initial keys,
//! header protection and the AEAD of each key phase generation, and packet number decoding.

use std::fmt;

use ring::aead::{self, quic as hp};
use ring::hkdf;

/// RFC 9001 §5.2.
pub(super) const INITIAL_SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
pub(super) const SAMPLE_LEN: usize = 16;
pub(super) const TAG_LEN: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CipherSuite {
    Aes128Gcm,
    Aes256Gcm,
    ChaCha20Poly1305,
}

impl CipherSuite {
    /// The key log does not name the suite: the secret length narrows it down (SHA-256 → 32
    /// bytes, SHA-384 → 48), the AEAD tag picks among the rest.
    pub(crate) fn candidates(secret_len: usize) -> &'static [CipherSuite] {
        match secret_len {
            32 => &[CipherSuite::Aes128Gcm, CipherSuite::ChaCha20Poly1305],
            48 => &[CipherSuite::Aes256Gcm],
            _ => &[],
        }
    }
    pub(crate) fn aead(self) -> &'static aead::Algorithm {
        match self {
            CipherSuite::Aes128Gcm => &aead::AES_128_GCM,
            CipherSuite::Aes256Gcm => &aead::AES_256_GCM,
            CipherSuite::ChaCha20Poly1305 => &aead::CHACHA20_POLY1305,
        }
    }
    fn header_protection(self) -> &'static hp::Algorithm {
        match self {
            CipherSuite::Aes128Gcm => &hp::AES_128,
            CipherSuite::Aes256Gcm => &hp::AES_256,
            CipherSuite::ChaCha20Poly1305 => &hp::CHACHA20,
        }
    }
    pub(crate) fn hkdf(self) -> hkdf::Algorithm {
        match self {
            CipherSuite::Aes256Gcm => hkdf::HKDF_SHA384,
            _ => hkdf::HKDF_SHA256,
        }
    }
}

impl fmt::Display for CipherSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CipherSuite::Aes128Gcm => "AES-128-GCM",
            CipherSuite::Aes256Gcm => "AES-256-GCM",
            CipherSuite::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        })
    }
}

struct OkmLen(usize);

impl hkdf::KeyType for OkmLen {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
pub(crate) fn expand_label(
    hash: hkdf::Algorithm,
    secret: &[u8],
    label: &[u8],
    len: usize,
) -> Vec<u8> {
    let prk = hkdf::Prk::new_less_safe(hash, secret);
    expand_label_prk(&prk, label, len)
}

pub(super) fn expand_label_prk(prk: &hkdf::Prk, label: &[u8], len: usize) -> Vec<u8> {
    let out_len = (len as u16).to_be_bytes();
    let label_len = [(b"tls13 ".len() + label.len()) as u8];
    let info: [&[u8]; 5] = [&out_len, &label_len, b"tls13 ", label, &[0]];
    let mut out = vec![0; len];
    // Lengths here are at most 48 bytes, far below HKDF's 255 * hash length limit.
    prk.expand(&info, OkmLen(len))
        .and_then(|okm| okm.fill(&mut out))
        .expect("HKDF-Expand-Label output of at most 48 bytes");
    out
}

/// Packet protection keys of one key phase generation.
pub(super) struct Generation {
    pub(super) secret: Vec<u8>,
    pub(super) key: aead::LessSafeKey,
    pub(super) iv: [u8; 12],
}

impl Generation {
    fn new(suite: CipherSuite, secret: Vec<u8>) -> Generation {
        let key_bytes = expand_label(suite.hkdf(), &secret, b"quic key", suite.aead().key_len());
        let key = aead::UnboundKey::new(suite.aead(), &key_bytes)
            .expect("key length matches the AEAD algorithm");
        let iv_bytes = expand_label(suite.hkdf(), &secret, b"quic iv", 12);
        let mut iv = [0; 12];
        iv.copy_from_slice(&iv_bytes);
        Generation {
            secret,
            key: aead::LessSafeKey::new(key),
            iv,
        }
    }

    /// RFC 9001 §6.1: the next generation after a key update.
    pub(super) fn next(&self, suite: CipherSuite) -> Generation {
        let secret = expand_label(suite.hkdf(), &self.secret, b"quic ku", self.secret.len());
        Generation::new(suite, secret)
    }

    fn open(&self, header: &[u8], ciphertext: &[u8], pn: u64) -> Option<Vec<u8>> {
        let mut nonce = self.iv;
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let mut buf = ciphertext.to_vec();
        let len = self
            .key
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(header),
                &mut buf,
            )
            .ok()?
            .len();
        buf.truncate(len);
        Some(buf)
    }
}

/// Keys for one direction of one encryption level.
pub(super) struct DirectionKeys {
    pub(super) suite: CipherSuite,
    pub(super) header: hp::HeaderProtectionKey,
    pub(super) current: Generation,
    /// Key phase bit of `current` (1-RTT only).
    phase: bool,
    next: Option<Generation>,
    /// Kept after a key update for packets that were reordered across it.
    previous: Option<Generation>,
    pub(super) key_updates: u64,
}

impl DirectionKeys {
    pub(super) fn new(suite: CipherSuite, secret: Vec<u8>) -> DirectionKeys {
        let hp_bytes = expand_label(
            suite.hkdf(),
            &secret,
            b"quic hp",
            suite.header_protection().key_len(),
        );
        let header = hp::HeaderProtectionKey::new(suite.header_protection(), &hp_bytes)
            .expect("header protection key length matches the algorithm");
        DirectionKeys {
            suite,
            header,
            current: Generation::new(suite, secret),
            phase: false,
            next: None,
            previous: None,
            key_updates: 0,
        }
    }

    /// Removes header protection and the AEAD. `packet` ends where this packet ends.
    pub(super) fn open(
        &mut self,
        packet: &[u8],
        pn_offset: usize,
        short: bool,
        largest: Option<u64>,
    ) -> Result<Opened, OpenError> {
        let sample_at = pn_offset + 4;
        let Some(sample) = packet.get(sample_at..sample_at + SAMPLE_LEN) else {
            return Err(OpenError::TooShort);
        };
        let mask = self
            .header
            .new_mask(sample)
            .map_err(|_| OpenError::TooShort)?;
        let mut first = packet[0];
        first ^= mask[0] & if short { 0x1f } else { 0x0f };
        let pn_len = usize::from(first & 0x03) + 1;
        let mut header = packet[..pn_offset + pn_len].to_vec();
        header[0] = first;
        let mut truncated = 0u64;
        for i in 0..pn_len {
            header[pn_offset + i] ^= mask[1 + i];
            truncated = truncated << 8 | u64::from(header[pn_offset + i]);
        }
        let pn = decode_packet_number(largest, truncated, pn_len * 8);
        let ciphertext = &packet[pn_offset + pn_len..];
        if ciphertext.len() < TAG_LEN {
            return Err(OpenError::TooShort);
        }
        let phase = first & 0x04 != 0;
        if !short || phase == self.phase {
            return match self.current.open(&header, ciphertext, pn) {
                Some(payload) => Ok(Opened { pn, payload }),
                None => Err(OpenError::BadTag),
            };
        }
        // Flipped key phase: a key update, or a packet from before the last one.
        let suite = self.suite;
        let next = self.next.get_or_insert_with(|| self.current.next(suite));
        if let Some(payload) = next.open(&header, ciphertext, pn) {
            let next = self.next.take().expect("just inserted");
            self.previous = Some(std::mem::replace(&mut self.current, next));
            self.phase = !self.phase;
            self.key_updates += 1;
            return Ok(Opened { pn, payload });
        }
        if let Some(payload) = self
            .previous
            .as_ref()
            .and_then(|prev| prev.open(&header, ciphertext, pn))
        {
            return Ok(Opened { pn, payload });
        }
        Err(OpenError::BadTag)
    }
}

pub(super) struct Opened {
    pub(super) pn: u64,
    pub(super) payload: Vec<u8>,
}

pub(super) enum OpenError {
    TooShort,
    BadTag,
}

/// RFC 9000 §A.3.
pub(super) fn decode_packet_number(largest: Option<u64>, truncated: u64, bits: usize) -> u64 {
    let expected = largest.map_or(0, |l| l + 1);
    let window = 1u64 << bits;
    let half = window / 2;
    let candidate = (expected & !(window - 1)) | truncated;
    if candidate + half <= expected && candidate < (1 << 62) - window {
        candidate + window
    } else if candidate > expected + half && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

pub(super) fn initial_keys(dcid: &[u8]) -> [DirectionKeys; 2] {
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &INITIAL_SALT_V1).extract(dcid);
    let client = expand_label_prk(&prk, b"client in", 32);
    let server = expand_label_prk(&prk, b"server in", 32);
    [
        DirectionKeys::new(CipherSuite::Aes128Gcm, client),
        DirectionKeys::new(CipherSuite::Aes128Gcm, server),
    ]
}
