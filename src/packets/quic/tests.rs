//! The tests of QUIC decoding, and what they and other modules' tests share: a real
//! quinn-proto client and server pumped in memory with a fake clock ([`Harness`]), and QUIC
//! packets sealed by hand ([`seal`]). The tests themselves are in `traffic_tests` (decoding
//! quinn-proto's traffic) and `known_answer_tests` (RFC known answers and single pieces).

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    RandomConnectionIdGenerator, ReadError, StreamId, TransportConfig, VarInt, WriteError,
};
use ring::aead;
use rustls::crypto::ring::cipher_suite;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::SupportedCipherSuite;

use super::decoded::Sender;
use super::protection::{DirectionKeys, SAMPLE_LEN, TAG_LEN};

mod known_answer_tests;
mod traffic_tests;

// -----------------------------------------------------------------------------------------
// Fixture: a real quinn-proto client and server pumped in memory with a fake clock.

/// rustls KeyLog writing NSS key log lines in memory.
#[derive(Debug, Default)]
pub(crate) struct MemoryKeyLog(Mutex<String>);

impl rustls::KeyLog for MemoryKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let line = format!(
            "{label} {} {}\n",
            hex::encode(client_random),
            hex::encode(secret)
        );
        self.0.lock().unwrap().push_str(&line);
    }
}

impl MemoryKeyLog {
    pub(crate) fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

pub(crate) struct Options {
    suite: SupportedCipherSuite,
    client_cid_len: usize,
    streams: usize,
    response_len: usize,
    /// Rounds of `streams` requests, 1 s apart; the server forces a key update before
    /// every round after the first when `key_updates` is set.
    rounds: usize,
    key_updates: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            suite: cipher_suite::TLS13_AES_128_GCM_SHA256,
            client_cid_len: 8,
            streams: 3,
            response_len: 20_000,
            rounds: 1,
            key_updates: false,
        }
    }
}

pub(crate) struct Datagram {
    pub(crate) from: Sender,
    pub(crate) bytes: Vec<u8>,
    pub(crate) dropped: bool,
}

struct Side {
    endpoint: Endpoint,
    addr: SocketAddr,
    conn: Option<(ConnectionHandle, Connection)>,
    inbox: VecDeque<(Instant, Vec<u8>)>,
    timeout: Option<Instant>,
}

type DropRule = Box<dyn FnMut(Sender, &[u8], &str) -> bool>;

pub(crate) struct Harness {
    opts: Options,
    client: Side,
    server: Side,
    now: Instant,
    latency: Duration,
    pub(crate) record: Vec<Datagram>,
    pub(crate) key_log: Arc<MemoryKeyLog>,
    drop_rule: DropRule,
    // Client application: requests per round, responses received.
    round: usize,
    next_round_at: Option<Instant>,
    /// Index in `record` where each round began, and its end.
    round_starts: Vec<usize>,
    /// For a second connection resuming the first one's TLS session.
    client_config: quinn_proto::ClientConfig,
    /// Connections are being closed: losing them is expected.
    closing: bool,
    /// Set by the client application, done by the server's connection.
    key_update_due: bool,
    client_streams: Vec<StreamId>,
    client_received: BTreeMap<u64, (u64, bool)>,
    // Server application: requests read, response bytes still to write, bytes written.
    server_requests: BTreeMap<u64, (StreamId, bool)>,
    server_pending: BTreeMap<u64, (StreamId, usize)>,
    server_written: BTreeMap<u64, u64>,
    client_written: BTreeMap<u64, u64>,
}

fn self_signed() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    (certified.cert.der().clone(), key.into())
}

fn provider(suite: SupportedCipherSuite) -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    Arc::new(provider)
}

/// Initial packets always use AES-128-GCM, whatever the negotiated suite.
fn initial_suite() -> rustls::quic::Suite {
    cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .unwrap()
        .quic_suite()
        .unwrap()
}

/// The server's and the client's quinn configs for `opts`, both writing their secrets to
/// `key_log`.
fn configs(
    opts: &Options,
    key_log: &Arc<MemoryKeyLog>,
) -> (quinn_proto::ServerConfig, quinn_proto::ClientConfig) {
    let (cert, key) = self_signed();

    let mut server_tls = rustls::ServerConfig::builder_with_provider(provider(opts.suite))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    server_tls.alpn_protocols = vec![b"h3".to_vec()];
    server_tls.key_log = key_log.clone();
    server_tls.max_early_data_size = u32::MAX;
    let server_crypto =
        QuicServerConfig::with_initial(Arc::new(server_tls), initial_suite()).unwrap();
    let server_config = quinn_proto::ServerConfig::with_crypto(Arc::new(server_crypto));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let mut client_tls = rustls::ClientConfig::builder_with_provider(provider(opts.suite))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client_tls.alpn_protocols = vec![b"h3".to_vec()];
    client_tls.key_log = key_log.clone();
    client_tls.enable_early_data = true;
    let client_crypto =
        QuicClientConfig::with_initial(Arc::new(client_tls), initial_suite()).unwrap();
    let mut client_config = quinn_proto::ClientConfig::new(Arc::new(client_crypto));
    // Small windows make the client send MAX_STREAM_DATA / MAX_DATA mid-transfer.
    let mut transport = TransportConfig::default();
    transport
        .stream_receive_window(VarInt::from_u32(8_000))
        .receive_window(VarInt::from_u32(24_000));
    client_config.transport_config(Arc::new(transport));
    (server_config, client_config)
}

impl Harness {
    pub(crate) fn new(opts: Options) -> Harness {
        let key_log = Arc::new(MemoryKeyLog::default());
        let (server_config, client_config) = configs(&opts, &key_log);
        let reconnect_config = client_config.clone();

        let mut client_endpoint_config = EndpointConfig::default();
        let cid_len = opts.client_cid_len;
        client_endpoint_config
            .cid_generator(move || Box::new(RandomConnectionIdGenerator::new(cid_len)));
        let server_endpoint = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(server_config)),
            false,
            Some([7; 32]),
        );
        let mut client_endpoint =
            Endpoint::new(Arc::new(client_endpoint_config), None, false, Some([9; 32]));

        let now = Instant::now();
        let client_addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 40_000);
        let server_addr = SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 4433);
        let conn = client_endpoint
            .connect(now, client_config.clone(), server_addr, "localhost")
            .unwrap();
        Harness {
            opts,
            client: Side {
                endpoint: client_endpoint,
                addr: client_addr,
                conn: Some(conn),
                inbox: VecDeque::new(),
                timeout: None,
            },
            server: Side {
                endpoint: server_endpoint,
                addr: server_addr,
                conn: None,
                inbox: VecDeque::new(),
                timeout: None,
            },
            now,
            latency: Duration::from_millis(10),
            record: Vec::new(),
            key_log,
            drop_rule: Box::new(|_, _, _| false),
            round: 0,
            next_round_at: None,
            key_update_due: false,
            client_config: reconnect_config,
            closing: false,
            round_starts: Vec::new(),
            client_streams: Vec::new(),
            client_received: BTreeMap::new(),
            server_requests: BTreeMap::new(),
            server_pending: BTreeMap::new(),
            server_written: BTreeMap::new(),
            client_written: BTreeMap::new(),
        }
    }

    /// Closes the connection, then opens a new one from another client port resuming the
    /// TLS session (so with 0-RTT). `record` and the applications start afresh.
    pub(crate) fn reconnect(&mut self) {
        self.closing = true;
        let now = self.now;
        let conn = &mut self.client.conn.as_mut().unwrap().1;
        conn.close(now, VarInt::from_u32(0), bytes::Bytes::new());
        for _ in 0..10_000 {
            self.step();
            let closed = self.client.conn.as_ref().unwrap().1.is_drained();
            if closed && self.client.inbox.is_empty() && self.server.inbox.is_empty() {
                break;
            }
        }
        assert!(self.record.iter().any(|d| d.from == Sender::Client));
        self.closing = false;
        self.record.clear();
        self.round = 0;
        self.next_round_at = None;
        self.round_starts.clear();
        self.client_streams.clear();
        self.client_received.clear();
        self.client_written.clear();
        self.server_requests.clear();
        self.server_written.clear();
        self.server.conn = None;
        self.client.addr.set_port(self.client.addr.port() + 1);
        let server_addr = self.server.addr;
        let conn = self
            .client
            .endpoint
            .connect(
                self.now,
                self.client_config.clone(),
                server_addr,
                "localhost",
            )
            .unwrap();
        assert!(conn.1.has_0rtt(), "session not resumable");
        self.client.conn = Some(conn);
    }

    fn done(&self) -> bool {
        self.round == self.opts.rounds
            && self.next_round_at.is_none()
            && self.client_received.len() == self.opts.streams * self.opts.rounds
            && self.client_received.values().all(|(_, fin)| *fin)
    }

    /// Runs until every response arrived and the link went quiet.
    pub(crate) fn run(&mut self) {
        for _ in 0..100_000 {
            self.step();
            if self.done() && self.client.inbox.is_empty() && self.server.inbox.is_empty() {
                self.round_starts.push(self.record.len());
                return;
            }
        }
        panic!(
            "transfer did not finish after {} datagrams: received {:?}",
            self.record.len(),
            self.client_received
        );
    }

    fn step(&mut self) {
        for from in [Sender::Client, Sender::Server] {
            self.deliver(from);
        }
        for from in [Sender::Client, Sender::Server] {
            self.drive(from);
        }
        let next = [
            self.client.inbox.front().map(|d| d.0),
            self.server.inbox.front().map(|d| d.0),
            self.client.timeout,
            self.server.timeout,
            self.next_round_at,
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(next) = next {
            self.now = self.now.max(next);
        }
    }

    fn side(&mut self, who: Sender) -> &mut Side {
        match who {
            Sender::Client => &mut self.client,
            Sender::Server => &mut self.server,
        }
    }

    fn send(&mut self, from: Sender, bytes: Vec<u8>) {
        let text = self.key_log.text();
        let dropped = (self.drop_rule)(from, &bytes, &text);
        let at = self.now + self.latency;
        if !dropped {
            self.side(from.peer()).inbox.push_back((at, bytes.clone()));
        }
        self.record.push(Datagram {
            from,
            bytes,
            dropped,
        });
    }

    fn deliver(&mut self, to: Sender) {
        let now = self.now;
        let remote = self.side(to.peer()).addr;
        let mut out = Vec::new();
        let side = self.side(to);
        while side.inbox.front().is_some_and(|d| d.0 <= now) {
            let (_, bytes) = side.inbox.pop_front().unwrap();
            let mut buf = Vec::new();
            let event = side.endpoint.handle(
                now,
                remote,
                None,
                None,
                bytes::BytesMut::from(&bytes[..]),
                &mut buf,
            );
            match event {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    let conn = side
                        .endpoint
                        .accept(incoming, now, &mut buf, None)
                        .unwrap_or_else(|e| panic!("accept failed: {:?}", e.cause));
                    side.conn = Some(conn);
                }
                Some(DatagramEvent::ConnectionEvent(_, event)) => {
                    side.conn.as_mut().unwrap().1.handle_event(event);
                }
                Some(DatagramEvent::Response(transmit)) => {
                    out.push(buf[..transmit.size].to_vec());
                }
                None => {}
            }
        }
        for bytes in out {
            self.send(to, bytes);
        }
    }

    fn drive(&mut self, who: Sender) {
        let now = self.now;
        if self.side(who).conn.is_none() {
            return;
        }
        let (ch, mut conn) = self.side(who).conn.take().unwrap();
        if self.side(who).timeout.is_some_and(|t| t <= now) {
            conn.handle_timeout(now);
        }
        self.endpoint_events(who, ch, &mut conn);
        while let Some(event) = conn.poll() {
            if let quinn_proto::Event::ConnectionLost { reason } = event {
                assert!(self.closing, "{who:?} lost the connection: {reason}");
            }
        }
        match who {
            Sender::Client => self.client_app(&mut conn),
            Sender::Server => self.server_app(&mut conn),
        }
        let mut buf = Vec::new();
        while let Some(transmit) = conn.poll_transmit(now, 1, &mut buf) {
            let bytes = buf[..transmit.size].to_vec();
            buf.clear();
            self.send(who, bytes);
        }
        self.endpoint_events(who, ch, &mut conn);
        let side = self.side(who);
        side.timeout = conn.poll_timeout();
        side.conn = Some((ch, conn));
    }

    fn endpoint_events(&mut self, who: Sender, ch: ConnectionHandle, conn: &mut Connection) {
        while let Some(event) = conn.poll_endpoint_events() {
            if let Some(event) = self.side(who).endpoint.handle_event(ch, event) {
                conn.handle_event(event);
            }
        }
    }

    fn client_app(&mut self, conn: &mut Connection) {
        if self.closing || (conn.is_handshaking() && !conn.has_0rtt()) {
            return;
        }
        let round_done = self.client_received.len() == self.client_streams.len()
            && self.client_received.values().all(|(_, fin)| *fin);
        if round_done && self.next_round_at.is_none() && self.round < self.opts.rounds {
            let gap = if self.round == 0 { 0 } else { 1 };
            self.next_round_at = Some(self.now + Duration::from_secs(gap));
        }
        if self.next_round_at.is_some_and(|t| t <= self.now) {
            self.next_round_at = None;
            self.round += 1;
            self.key_update_due = self.opts.key_updates && self.round > 1;
            self.round_starts.push(self.record.len());
            for n in 0..self.opts.streams {
                let id = conn.streams().open(Dir::Bi).unwrap();
                let request = format!("GET /{}/{n}", self.round);
                let mut stream = conn.send_stream(id);
                assert_eq!(stream.write(request.as_bytes()).unwrap(), request.len());
                stream.finish().unwrap();
                self.client_written.insert(id.into(), request.len() as u64);
                self.client_streams.push(id);
            }
        }
        for &id in &self.client_streams {
            let entry = self.client_received.entry(id.into()).or_insert((0, false));
            if entry.1 {
                continue;
            }
            let mut stream = conn.recv_stream(id);
            let Ok(mut chunks) = stream.read(true) else {
                continue;
            };
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(chunk)) => entry.0 += chunk.bytes.len() as u64,
                    Ok(None) => {
                        entry.1 = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => panic!("client read failed: {e}"),
                }
            }
            let _ = chunks.finalize();
        }
    }

    fn server_app(&mut self, conn: &mut Connection) {
        if std::mem::take(&mut self.key_update_due) {
            conn.force_key_update();
        }
        while let Some(id) = conn.streams().accept(Dir::Bi) {
            self.server_requests.insert(id.into(), (id, false));
        }
        for (&n, (id, fin)) in self.server_requests.iter_mut() {
            if *fin {
                continue;
            }
            let mut stream = conn.recv_stream(*id);
            let Ok(mut chunks) = stream.read(true) else {
                continue;
            };
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        *fin = true;
                        self.server_pending.insert(n, (*id, self.opts.response_len));
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => panic!("server read failed: {e}"),
                }
            }
            let _ = chunks.finalize();
        }
        let body = vec![0x5a; 4096];
        let mut finished = Vec::new();
        for (&n, (id, remaining)) in self.server_pending.iter_mut() {
            let mut stream = conn.send_stream(*id);
            while *remaining > 0 {
                match stream.write(&body[..(*remaining).min(body.len())]) {
                    Ok(written) => {
                        *remaining -= written;
                        *self.server_written.entry(n).or_default() += written as u64;
                    }
                    Err(WriteError::Blocked) => break,
                    Err(e) => panic!("server write failed: {e}"),
                }
            }
            if *remaining == 0 {
                stream.finish().unwrap();
                finished.push(n);
            }
        }
        for n in finished {
            self.server_pending.remove(&n);
        }
    }
}

/// QUIC packets sealed by hand, for the other modules' tests.
pub(crate) mod seal {
    use ring::aead;

    use super::super::decoded::Sender;
    use super::super::protection::{initial_keys, CipherSuite, DirectionKeys, SAMPLE_LEN};

    /// An Initial packet of `from` on the connection whose client first chose `odcid`.
    pub(crate) fn initial(
        from: Sender,
        odcid: &[u8],
        dcid: &[u8],
        scid: &[u8],
        pn: u32,
        payload: &[u8],
    ) -> Vec<u8> {
        let keys = &initial_keys(odcid)[from.index()];
        super::seal_initial(keys, dcid, scid, pn, payload)
    }

    /// A 1-RTT packet (key phase 0, 4-byte packet number) sealed with AES-128-GCM keys
    /// of `secret`.
    pub(crate) fn short(secret: &[u8], dcid: &[u8], pn: u32, payload: &[u8]) -> Vec<u8> {
        let keys = DirectionKeys::new(CipherSuite::Aes128Gcm, secret.to_vec());
        let mut packet = vec![0x43];
        packet.extend(dcid);
        let pn_offset = packet.len();
        packet.extend(pn.to_be_bytes());
        let mut nonce = keys.current.iv;
        for (n, p) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
            *n ^= p;
        }
        let mut body = payload.to_vec();
        keys.current
            .key
            .seal_in_place_append_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&packet[..]),
                &mut body,
            )
            .unwrap();
        packet.extend(body);
        let sample = &packet[pn_offset + 4..pn_offset + 4 + SAMPLE_LEN];
        let mask = keys.header.new_mask(sample).unwrap();
        packet[0] ^= mask[0] & 0x1f;
        for i in 0..4 {
            packet[pn_offset + i] ^= mask[1 + i];
        }
        packet
    }

    /// A STREAM frame with offset, length and FIN as given.
    pub(crate) fn stream_frame(id: u64, offset: u64, data: &[u8], fin: bool) -> Vec<u8> {
        let mut f = vec![0x0e | u8::from(fin)];
        for v in [id, offset, data.len() as u64] {
            f.extend((0x8000_0000 | v as u32).to_be_bytes());
        }
        f.extend(data);
        f
    }

    /// A CRYPTO frame at offset 0.
    pub(crate) fn crypto_frame(data: &[u8]) -> Vec<u8> {
        let mut f = vec![0x06, 0x00];
        f.extend((0x4000 | data.len() as u16).to_be_bytes());
        f.extend(data);
        f
    }
}

/// Protects `payload` as a client Initial packet with a 4-byte packet number.
fn seal_initial(
    keys: &DirectionKeys,
    dcid: &[u8],
    scid: &[u8],
    pn: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut packet = vec![0xc3, 0, 0, 0, 1, dcid.len() as u8];
    packet.extend(dcid);
    packet.push(scid.len() as u8);
    packet.extend(scid);
    packet.push(0); // token length
    let length = 4 + payload.len() + TAG_LEN;
    packet.extend((0x4000 | length as u16).to_be_bytes());
    let pn_offset = packet.len();
    packet.extend(pn.to_be_bytes());
    let mut nonce = keys.current.iv;
    for (n, p) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
        *n ^= p;
    }
    let mut body = payload.to_vec();
    keys.current
        .key
        .seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(&packet[..]),
            &mut body,
        )
        .unwrap();
    packet.extend(body);
    let mask = keys
        .header
        .new_mask(&packet[pn_offset + 4..pn_offset + 4 + SAMPLE_LEN])
        .unwrap();
    packet[0] ^= mask[0] & 0x0f;
    for i in 0..4 {
        packet[pn_offset + i] ^= mask[1 + i];
    }
    packet
}
