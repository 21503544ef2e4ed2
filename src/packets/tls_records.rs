//! TLS 1.3 over TCP (RFC 8446 §5): one direction's records decrypted with the key log (pure).
//!
//! The handshake's own encrypted records (EncryptedExtensions … Finished) use handshake keys
//! this module does not need: the first record that opens with the traffic secret's keys at
//! sequence number 0 is the first of the application's, and the ones before it are skipped.
//! A client's 0-RTT records open with its early secret. KeyUpdate messages move a direction
//! to its next secret. Each plaintext byte keeps its place in the TCP stream (AEAD ciphers
//! here are stream ciphers: plaintext byte i is ciphertext byte i of its record).

use ring::aead;

use super::quic::{expand_label, CipherSuite, KeyLog, Sender};
use super::tls;

/// Record content types (RFC 8446 §5.1).
const CHANGE_CIPHER_SPEC: u8 = 20;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// Handshake message type of a KeyUpdate (RFC 8446 §4.6.3).
const KEY_UPDATE: u8 = 24;
/// A record's ciphertext is at most 2^14 + 256 bytes (RFC 8446 §5.2).
const MAX_RECORD: usize = (1 << 14) + 256;
/// Records skipped before the first application record opens: a handshake flight is a few
/// records; more means the key log's secret is not this connection's.
const MAX_SKIPPED: usize = 64;

/// One run of plaintext: its place in the plaintext and in the TCP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub plain: u64,
    pub stream: u64,
    pub len: u64,
    /// Where its record ends in the TCP stream (the receiver reads it then).
    pub record_end: u64,
}

/// The application data of one direction, decrypted.
#[derive(Debug, Default)]
pub struct Plaintext {
    pub bytes: Vec<u8>,
    pieces: Vec<Piece>,
    pub key_updates: u32,
    /// What could not be read, said once each.
    pub problems: Vec<String>,
}

impl Plaintext {
    fn piece(&self, offset: u64) -> Option<&Piece> {
        let i = self.pieces.partition_point(|p| p.plain + p.len <= offset);
        self.pieces.get(i).filter(|p| p.plain <= offset)
    }

    /// The TCP stream offset of plaintext byte `offset`.
    pub fn stream_offset(&self, offset: u64) -> Option<u64> {
        self.piece(offset).map(|p| p.stream + offset - p.plain)
    }

    /// The end in the TCP stream of the record holding plaintext byte `offset`.
    pub fn record_end(&self, offset: u64) -> Option<u64> {
        self.piece(offset).map(|p| p.record_end)
    }

    /// The TCP stream ranges that carried plaintext `[start, end)`.
    pub fn stream_ranges(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let i = self.pieces.partition_point(|p| p.plain + p.len <= start);
        let mut out = Vec::new();
        for p in self.pieces[i..].iter().take_while(|p| p.plain < end) {
            let a = start.max(p.plain);
            let b = end.min(p.plain + p.len);
            if a < b {
                out.push((p.stream + a - p.plain, p.stream + b - p.plain));
            }
        }
        out
    }
}

/// The ClientHello's random, from the client's plaintext handshake records.
pub fn client_random(client_stream: &[u8]) -> Option<[u8; 32]> {
    let stream = tls::handshake_stream(client_stream);
    let (_, hello) = tls::messages(&stream).into_iter().find(|(t, _)| *t == 1)?;
    hello.get(2..34)?.try_into().ok()
}

/// A direction's keys of one secret, with its record sequence number.
struct Keys {
    suite: CipherSuite,
    secret: Vec<u8>,
    key: aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl Keys {
    /// RFC 8446 §7.3.
    fn new(suite: CipherSuite, secret: Vec<u8>) -> Option<Keys> {
        let hash = suite.hkdf();
        let key_bytes = expand_label(hash, &secret, b"key", suite.aead().key_len());
        let key = aead::UnboundKey::new(suite.aead(), &key_bytes).ok()?;
        let iv = expand_label(hash, &secret, b"iv", 12).try_into().ok()?;
        Some(Keys {
            suite,
            secret,
            key: aead::LessSafeKey::new(key),
            iv,
            seq: 0,
        })
    }

    /// Every suite the secret's length allows.
    fn candidates(secrets: &[Vec<u8>]) -> Vec<Keys> {
        let pairs = secrets.iter().flat_map(|s| {
            CipherSuite::candidates(s.len())
                .iter()
                .map(move |suite| (*suite, s.clone()))
        });
        pairs.filter_map(|(suite, s)| Keys::new(suite, s)).collect()
    }

    /// RFC 8446 §7.2: the next generation after a KeyUpdate.
    fn next(&self) -> Option<Keys> {
        let len = self.secret.len();
        Keys::new(
            self.suite,
            expand_label(self.suite.hkdf(), &self.secret, b"traffic upd", len),
        )
    }

    /// Opens one record (`header`: its 5 bytes, the AAD); the sequence number moves on success.
    fn open(&mut self, header: &[u8], ciphertext: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        let mut buf = ciphertext.to_vec();
        let n = self
            .key
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(header),
                &mut buf,
            )
            .ok()?
            .len();
        buf.truncate(n);
        self.seq += 1;
        Some(buf)
    }
}

/// The keys a direction reads its records with.
enum State {
    /// Before the first application record: candidates for it (and for 0-RTT).
    Handshake {
        traffic: Vec<Keys>,
        early: Vec<Keys>,
        skipped: usize,
    },
    Application(Box<Keys>),
    /// Nothing more can be read.
    Stopped,
}

/// Decrypts the records of `stream` (one direction, from its first byte) sent by `from` on the
/// connection whose ClientHello carried `random`.
pub fn decrypt(stream: &[u8], from: Sender, random: &[u8; 32], keys: &KeyLog) -> Plaintext {
    let mut out = Plaintext::default();
    let (label, early) = match from {
        Sender::Client => ("CLIENT_TRAFFIC_SECRET_0", "CLIENT_EARLY_TRAFFIC_SECRET"),
        Sender::Server => ("SERVER_TRAFFIC_SECRET_0", ""),
    };
    let traffic = Keys::candidates(keys.get(random, label));
    if traffic.is_empty() {
        let tls12 = keys.has(random, "CLIENT_RANDOM");
        out.problems.push(format!(
            "no {label} in the key log for client_random {}{}",
            hex::encode(random),
            if tls12 {
                " (TLS 1.2: not decrypted)"
            } else {
                ""
            }
        ));
        return out;
    }
    let mut state = State::Handshake {
        traffic,
        early: Keys::candidates(keys.get(random, early)),
        skipped: 0,
    };
    let mut pos = 0;
    while let Some(header) = stream.get(pos..pos + 5) {
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len > MAX_RECORD || !matches!(header[0], CHANGE_CIPHER_SPEC..=APPLICATION_DATA) {
            out.problems.push(format!(
                "{} bytes at stream offset {pos} are not a TLS record",
                stream.len() - pos
            ));
            break;
        }
        let Some(body) = stream.get(pos + 5..pos + 5 + len) else {
            break; // the capture ends inside this record
        };
        let at = Record {
            start: pos as u64,
            end: (pos + 5 + len) as u64,
        };
        if header[0] == APPLICATION_DATA {
            state = read(state, header, body, at, &mut out);
            if matches!(state, State::Stopped) {
                break;
            }
        }
        pos += 5 + len;
    }
    out
}

#[derive(Clone, Copy)]
struct Record {
    start: u64,
    end: u64,
}

/// Reads one encrypted record in `state`, giving the next state.
fn read(state: State, header: &[u8], body: &[u8], at: Record, out: &mut Plaintext) -> State {
    match state {
        State::Handshake {
            mut traffic,
            mut early,
            skipped,
        } => {
            for i in 0..traffic.len() {
                if let Some(plain) = traffic[i].open(header, body) {
                    return inner(Box::new(traffic.swap_remove(i)), plain, at, out);
                }
            }
            if let Some(plain) = early.iter_mut().find_map(|k| k.open(header, body)) {
                // The suite that opened it is the one: the others stay at sequence 0.
                early.retain(|k| k.seq > 0);
                deliver(&plain, at, out);
                return State::Handshake {
                    traffic,
                    early,
                    skipped,
                };
            }
            if skipped >= MAX_SKIPPED {
                out.problems.push(format!(
                    "no record of the first {MAX_SKIPPED} opened with the key log's traffic \
                     secret: it is not this connection's"
                ));
                return State::Stopped;
            }
            State::Handshake {
                traffic,
                early,
                skipped: skipped + 1,
            }
        }
        State::Application(mut keys) => match keys.open(header, body) {
            Some(plain) => inner(keys, plain, at, out),
            None => {
                out.problems.push(format!(
                    "the record at stream offset {} did not decrypt (sequence {}): the rest of \
                     the direction is not read",
                    at.start, keys.seq
                ));
                State::Stopped
            }
        },
        State::Stopped => State::Stopped,
    }
}

/// A decrypted record's inner plaintext: application data goes out, a KeyUpdate moves on.
fn inner(keys: Box<Keys>, plain: Vec<u8>, at: Record, out: &mut Plaintext) -> State {
    let content_type = deliver(&plain, at, out);
    if content_type != Some(HANDSHAKE) {
        return State::Application(keys);
    }
    let content = &plain[..plain.iter().rposition(|b| *b != 0).unwrap_or(0)];
    if !tls::messages(content).iter().any(|(t, _)| *t == KEY_UPDATE) {
        return State::Application(keys);
    }
    out.key_updates += 1;
    match keys.next() {
        Some(next) => State::Application(Box::new(next)),
        None => State::Stopped,
    }
}

/// Strips the inner plaintext's padding and type (RFC 8446 §5.4); application data is added
/// to `out`. Returns the content type.
fn deliver(plain: &[u8], at: Record, out: &mut Plaintext) -> Option<u8> {
    let Some(type_at) = plain.iter().rposition(|b| *b != 0) else {
        out.problems
            .push("a record's inner plaintext is all padding".to_string());
        return None;
    };
    let content_type = plain[type_at];
    if content_type == APPLICATION_DATA && type_at > 0 {
        out.pieces.push(Piece {
            plain: out.bytes.len() as u64,
            stream: at.start + 5,
            len: type_at as u64,
            record_end: at.end,
        });
        out.bytes.extend_from_slice(&plain[..type_at]);
    } else if !matches!(content_type, APPLICATION_DATA | HANDSHAKE | ALERT) {
        out.problems.push(format!(
            "an inner content type {content_type} is not TLS 1.3's"
        ));
    }
    Some(content_type)
}

/// Test helpers: records sealed the way a TLS 1.3 stack seals them.
#[cfg(test)]
pub mod seal {
    use super::*;

    pub struct Sealer(Keys);

    impl Sealer {
        /// AES-128-GCM keys of `secret` (32 bytes).
        pub fn new(secret: &[u8]) -> Sealer {
            Sealer(Keys::new(CipherSuite::Aes128Gcm, secret.to_vec()).unwrap())
        }

        pub(super) fn with_suite(suite: CipherSuite, secret: &[u8]) -> Sealer {
            Sealer(Keys::new(suite, secret.to_vec()).unwrap())
        }

        /// One record of `content_type` holding `content`, padded with `padding` zeros.
        pub fn record(&mut self, content_type: u8, content: &[u8], padding: usize) -> Vec<u8> {
            let mut body = content.to_vec();
            body.push(content_type);
            body.extend(std::iter::repeat_n(0, padding));
            let len = (body.len() + 16) as u16;
            let mut header = vec![APPLICATION_DATA, 3, 3];
            header.extend(len.to_be_bytes());
            let mut nonce = self.0.iv;
            for (n, s) in nonce[4..].iter_mut().zip(self.0.seq.to_be_bytes()) {
                *n ^= s;
            }
            self.0
                .key
                .seal_in_place_append_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(&header[..]),
                    &mut body,
                )
                .unwrap();
            self.0.seq += 1;
            header.extend(body);
            header
        }

        pub fn data(&mut self, content: &[u8]) -> Vec<u8> {
            self.record(APPLICATION_DATA, content, 0)
        }

        /// A KeyUpdate record; the sealer moves to the next secret.
        pub fn key_update(&mut self) -> Vec<u8> {
            let r = self.record(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], 3);
            self.0 = self.0.next().unwrap();
            r
        }
    }

    /// A plaintext record (ClientHello, ServerHello, ChangeCipherSpec).
    pub fn plain_record(content_type: u8, payload: &[u8]) -> Vec<u8> {
        let mut r = vec![content_type, 3, 3];
        r.extend((payload.len() as u16).to_be_bytes());
        r.extend(payload);
        r
    }

    /// A ClientHello record carrying `random`.
    pub fn client_hello(random: [u8; 32]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend(random);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0, 0, 0]);
        let mut msg = vec![1, 0, 0, body.len() as u8];
        msg.extend(body);
        plain_record(HANDSHAKE, &msg)
    }
}

#[cfg(test)]
mod tests {
    use super::seal::*;
    use super::*;

    const RANDOM: [u8; 32] = [7; 32];

    fn key_log(lines: &[(&str, &[u8])]) -> KeyLog {
        let text: String = lines
            .iter()
            .map(|(l, s)| format!("{l} {} {}\n", hex::encode(RANDOM), hex::encode(s)))
            .collect();
        KeyLog::parse(&text).unwrap()
    }

    /// The server's stream: ServerHello, CCS, two handshake records, then application data.
    fn server_stream(handshake: &mut Sealer) -> Vec<u8> {
        let mut s = plain_record(HANDSHAKE, &[2, 0, 0, 4, 3, 3, 0, 0]);
        s.extend(plain_record(CHANGE_CIPHER_SPEC, &[1]));
        s.extend(handshake.record(HANDSHAKE, &[8, 0, 0, 2, 0, 0], 0));
        s.extend(handshake.record(HANDSHAKE, &[20, 0, 0, 32], 0));
        s
    }

    #[test]
    fn application_records_decrypt_after_the_handshake_with_padding_and_a_key_update() {
        let secret = [0x42; 32];
        let mut app = Sealer::new(&secret);
        let mut hs = Sealer::new(&[0x99; 32]);
        let mut s = server_stream(&mut hs);
        let first_at = s.len() as u64;
        s.extend(app.data(b"hello "));
        s.extend(app.record(HANDSHAKE, &[4, 0, 0, 1, 0], 0)); // NewSessionTicket
        s.extend(app.record(APPLICATION_DATA, b"world", 7));
        s.extend(app.key_update());
        let after_update = s.len() as u64;
        s.extend(app.data(b"!"));
        let whole = s.len();
        s.extend(&app.data(b"cut")[..10]); // the capture ends inside a record
        let keys = key_log(&[("SERVER_TRAFFIC_SECRET_0", &secret)]);
        let p = decrypt(&s, Sender::Server, &RANDOM, &keys);
        assert_eq!(p.problems, Vec::<String>::new());
        assert_eq!(p.bytes, b"hello world!");
        assert_eq!(p.key_updates, 1);
        assert_eq!(p.stream_offset(0), Some(first_at + 5));
        assert_eq!(p.record_end(0), Some(first_at + 5 + 6 + 1 + 16));
        assert_eq!(p.stream_offset(11), Some(after_update + 5));
        assert_eq!(p.record_end(11), Some(whole as u64));
        assert_eq!(p.stream_offset(12), None);
        // "o w" spans two records.
        let r = p.stream_ranges(4, 8);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0], (first_at + 9, first_at + 11));
        assert_eq!(r[1].1 - r[1].0, 2);
    }

    #[test]
    fn chacha_and_aes_256_are_found_by_their_tag() {
        for (suite, len) in [
            (CipherSuite::ChaCha20Poly1305, 32),
            (CipherSuite::Aes256Gcm, 48),
        ] {
            let secret = vec![5; len];
            let mut app = Sealer::with_suite(suite, &secret);
            let s = app.data(b"ok");
            let keys = key_log(&[("CLIENT_TRAFFIC_SECRET_0", &secret)]);
            assert_eq!(decrypt(&s, Sender::Client, &RANDOM, &keys).bytes, b"ok");
        }
    }

    #[test]
    fn early_data_is_read_with_the_early_secret() {
        let (early, traffic) = ([1; 32], [2; 32]);
        let mut e = Sealer::new(&early);
        let mut t = Sealer::new(&traffic);
        let mut hs = Sealer::new(&[3; 32]);
        let mut s = client_hello(RANDOM);
        s.extend(e.data(b"GET /early"));
        s.extend(hs.record(HANDSHAKE, &[20, 0, 0, 0], 0)); // Finished
        s.extend(t.data(b" and later"));
        assert_eq!(client_random(&s), Some(RANDOM));
        let keys = key_log(&[
            ("CLIENT_EARLY_TRAFFIC_SECRET", &early),
            ("CLIENT_TRAFFIC_SECRET_0", &traffic),
        ]);
        let p = decrypt(&s, Sender::Client, &RANDOM, &keys);
        assert_eq!(p.bytes, b"GET /early and later");
    }

    #[test]
    fn missing_or_wrong_keys_and_garbage_are_problems_not_panics() {
        let mut app = Sealer::new(&[1; 32]);
        let s = app.data(b"secret");
        let none = decrypt(&s, Sender::Server, &RANDOM, &KeyLog::default());
        assert!(none.bytes.is_empty());
        assert!(
            none.problems[0].contains("no SERVER_TRAFFIC_SECRET_0"),
            "{:?}",
            none.problems
        );
        let wrong = key_log(&[("SERVER_TRAFFIC_SECRET_0", &[2; 32])]);
        let mut many = Vec::new();
        for _ in 0..=MAX_SKIPPED {
            many.extend(app.data(b"x"));
        }
        let p = decrypt(&many, Sender::Server, &RANDOM, &wrong);
        assert!(
            p.problems[0].contains("not this connection's"),
            "{:?}",
            p.problems
        );
        // A corrupted record after the first stops the direction with a problem.
        let right = key_log(&[("SERVER_TRAFFIC_SECRET_0", &[1; 32])]);
        let mut fresh = Sealer::new(&[1; 32]);
        let mut s = fresh.data(b"a");
        let mut bad = fresh.data(b"b");
        bad[7] ^= 1;
        s.extend(bad);
        let p = decrypt(&s, Sender::Server, &RANDOM, &right);
        assert_eq!(p.bytes, b"a");
        assert!(
            p.problems[0].contains("did not decrypt"),
            "{:?}",
            p.problems
        );
        for n in 0..200u8 {
            let junk: Vec<u8> = (0..n).map(|i| i.wrapping_mul(n) ^ 0x17).collect();
            let _ = decrypt(&junk, Sender::Server, &RANDOM, &right);
            let _ = client_random(&junk);
        }
        let plain_http = decrypt(b"GET / HTTP/1.1\r\n", Sender::Server, &RANDOM, &right);
        assert!(plain_http.problems[0].contains("not a TLS record"));
    }
}
