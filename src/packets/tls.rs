//! What a TLS handshake says about session resumption and early data, read from its messages
//! (pure): the ClientHello's and ServerHello's extensions (plaintext in TLS over TCP, in QUIC's
//! Initial CRYPTO stream) and EncryptedExtensions (QUIC's Handshake CRYPTO stream, decrypted
//! with the key log). Nothing here trusts a side's own claim: each fact is the message that
//! makes it so on the wire.

/// Handshake message types (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const ENCRYPTED_EXTENSIONS: u8 = 8;
const CERTIFICATE: u8 = 11;

/// Extension types (RFC 8446 §4.2).
const PRE_SHARED_KEY: u16 = 41;
const EARLY_DATA: u16 = 42;
const SUPPORTED_VERSIONS: u16 = 43;

/// The record type of handshake messages in TLS over TCP.
const HANDSHAKE_RECORD: u8 = 22;

/// What one connection's handshake showed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeFacts {
    /// The ClientHello offered a session to resume (a PSK, or a TLS 1.2 session id/ticket
    /// answered by the server as below).
    pub client_offered_resumption: bool,
    /// The ClientHello announced early data (0-RTT).
    pub client_offered_early_data: bool,
    /// The server resumed the session (TLS 1.3: its ServerHello selected the PSK; TLS 1.2: it
    /// echoed the client's session id). None: no ServerHello seen.
    pub resumed: Option<bool>,
    /// The server accepted early data (its EncryptedExtensions carries `early_data`). None:
    /// EncryptedExtensions not seen (TLS over TCP: it is encrypted).
    pub early_data_accepted: Option<bool>,
    /// The server sent its certificate (a full handshake does; a resumed one does not). None:
    /// the server's encrypted flight was not seen.
    pub certificate_sent: Option<bool>,
}

/// Complete handshake messages of a handshake byte stream, in order: (type, body).
pub fn messages(stream: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    let mut rest = stream;
    while rest.len() >= 4 {
        let len = u32::from_be_bytes([0, rest[1], rest[2], rest[3]]) as usize;
        let Some(body) = rest.get(4..4 + len) else {
            break;
        };
        out.push((rest[0], body));
        rest = &rest[4 + len..];
    }
    out
}

/// The handshake byte stream inside TLS records (TLS over TCP): the payloads of the leading
/// handshake records, up to the first record of another type (after ChangeCipherSpec the rest
/// is encrypted).
pub fn handshake_stream(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = records;
    while rest.len() >= 5 {
        let len = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        let Some(payload) = rest.get(5..5 + len) else {
            break;
        };
        if rest[0] != HANDSHAKE_RECORD {
            break;
        }
        out.extend_from_slice(payload);
        rest = &rest[5 + len..];
    }
    out
}

/// A cursor over a message body.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.data.get(self.pos..self.pos + n)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    /// A vector with a length prefix of `width` bytes.
    fn vector(&mut self, width: usize) -> Option<&'a [u8]> {
        let len = match width {
            1 => self.u8()?,
            _ => self.u16()?,
        };
        self.take(len)
    }
}

/// The extension types of an extension block.
fn extension_types(block: &[u8]) -> Vec<u16> {
    let mut r = Reader {
        data: block,
        pos: 0,
    };
    let mut out = Vec::new();
    while let (Some(t), Some(_)) = (r.u16(), r.vector(2)) {
        out.push(t as u16);
    }
    out
}

/// A ClientHello: its session id and extension types.
fn client_hello(body: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let mut r = Reader { data: body, pos: 0 };
    r.take(2 + 32)?; // legacy_version, random
    let session_id = r.vector(1)?;
    r.vector(2)?; // cipher_suites
    r.vector(1)?; // compression methods
    Some((session_id, extension_types(r.vector(2).unwrap_or(&[]))))
}

/// A ServerHello: its session id and extension types.
fn server_hello(body: &[u8]) -> Option<(&[u8], Vec<u16>)> {
    let mut r = Reader { data: body, pos: 0 };
    r.take(2 + 32)?;
    let session_id = r.vector(1)?;
    r.take(2 + 1)?; // cipher_suite, compression
    Some((session_id, extension_types(r.vector(2).unwrap_or(&[]))))
}

/// Reads the facts from the client's and the server's handshake streams: `client` holds the
/// ClientHello, `server_hello` the ServerHello (plaintext), `server_encrypted` the server's
/// encrypted flight when it could be read (QUIC's Handshake space), else empty.
pub fn facts(client: &[u8], server_hello_stream: &[u8], server_encrypted: &[u8]) -> HandshakeFacts {
    let mut f = HandshakeFacts::default();
    let ch = messages(client)
        .into_iter()
        .find(|(t, _)| *t == CLIENT_HELLO)
        .and_then(|(_, b)| client_hello(b));
    if let Some((_, ext)) = &ch {
        f.client_offered_early_data = ext.contains(&EARLY_DATA);
        f.client_offered_resumption = ext.contains(&PRE_SHARED_KEY);
    }
    let sh = messages(server_hello_stream)
        .into_iter()
        .find(|(t, _)| *t == SERVER_HELLO)
        .and_then(|(_, b)| server_hello(b));
    if let Some((sid, ext)) = &sh {
        f.resumed = Some(if ext.contains(&SUPPORTED_VERSIONS) {
            ext.contains(&PRE_SHARED_KEY)
        } else {
            // TLS 1.2: the server resumes by echoing the session id the client offered.
            let offered = ch.as_ref().map(|(s, _)| *s).unwrap_or(&[]);
            if !offered.is_empty() {
                f.client_offered_resumption = true;
            }
            !sid.is_empty() && *sid == offered
        });
    }
    let encrypted = messages(server_encrypted);
    if let Some((_, ee)) = encrypted.iter().find(|(t, _)| *t == ENCRYPTED_EXTENSIONS) {
        let mut r = Reader { data: ee, pos: 0 };
        let ext = r.vector(2).map(extension_types).unwrap_or_default();
        f.early_data_accepted = Some(ext.contains(&EARLY_DATA));
        f.certificate_sent = Some(encrypted.iter().any(|(t, _)| *t == CERTIFICATE));
    }
    f
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn message(t: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![t];
        m.extend(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend(body);
        m
    }

    fn extensions(types: &[u16]) -> Vec<u8> {
        let mut block = Vec::new();
        for t in types {
            block.extend(t.to_be_bytes());
            block.extend([0, 1, 0]); // one byte of data
        }
        let mut out = (block.len() as u16).to_be_bytes().to_vec();
        out.extend(block);
        out
    }

    pub(crate) fn client_hello_with(session_id: &[u8], ext: &[u16]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([7u8; 32]);
        b.push(session_id.len() as u8);
        b.extend(session_id);
        b.extend([0, 2, 0x13, 0x01]); // one cipher suite
        b.extend([1, 0]); // null compression
        b.extend(extensions(ext));
        message(CLIENT_HELLO, &b)
    }

    pub(crate) fn server_hello_with(session_id: &[u8], ext: &[u16]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([9u8; 32]);
        b.push(session_id.len() as u8);
        b.extend(session_id);
        b.extend([0x13, 0x01, 0]);
        b.extend(extensions(ext));
        message(SERVER_HELLO, &b)
    }

    pub(crate) fn encrypted_flight(ext: &[u16], certificate: bool) -> Vec<u8> {
        let mut out = message(ENCRYPTED_EXTENSIONS, &extensions(ext));
        if certificate {
            out.extend(message(CERTIFICATE, &[0, 0, 0, 0]));
        }
        out.extend(message(20, &[0; 32])); // Finished
        out
    }

    fn record(t: u8, payload: &[u8]) -> Vec<u8> {
        let mut r = vec![t, 3, 3];
        r.extend((payload.len() as u16).to_be_bytes());
        r.extend(payload);
        r
    }

    #[test]
    fn a_resumed_handshake_with_early_data_accepted() {
        let ch = client_hello_with(&[1; 32], &[SUPPORTED_VERSIONS, EARLY_DATA, PRE_SHARED_KEY]);
        let sh = server_hello_with(&[1; 32], &[SUPPORTED_VERSIONS, PRE_SHARED_KEY]);
        let f = facts(&ch, &sh, &encrypted_flight(&[16, EARLY_DATA], false));
        assert_eq!(
            f,
            HandshakeFacts {
                client_offered_resumption: true,
                client_offered_early_data: true,
                resumed: Some(true),
                early_data_accepted: Some(true),
                certificate_sent: Some(false),
            }
        );
    }

    #[test]
    fn a_full_handshake_and_a_refused_offer() {
        // TLS 1.3 ServerHellos echo the session id: only the PSK extension says "resumed".
        let ch = client_hello_with(&[1; 32], &[SUPPORTED_VERSIONS]);
        let sh = server_hello_with(&[1; 32], &[SUPPORTED_VERSIONS]);
        let f = facts(&ch, &sh, &encrypted_flight(&[16], true));
        assert_eq!(f.resumed, Some(false));
        assert_eq!(f.early_data_accepted, Some(false));
        assert_eq!(f.certificate_sent, Some(true));
        assert!(!f.client_offered_early_data && !f.client_offered_resumption);
        // Offered 0-RTT with a ticket, resumed, but the early data refused.
        let ch = client_hello_with(&[], &[SUPPORTED_VERSIONS, EARLY_DATA, PRE_SHARED_KEY]);
        let sh = server_hello_with(&[], &[SUPPORTED_VERSIONS, PRE_SHARED_KEY]);
        let f = facts(&ch, &sh, &encrypted_flight(&[16], false));
        assert_eq!(
            (f.resumed, f.early_data_accepted),
            (Some(true), Some(false))
        );
    }

    #[test]
    fn tls_12_resumes_by_echoing_the_session_id_and_records_are_unwrapped() {
        let ch = client_hello_with(&[5; 32], &[]);
        let resumed = server_hello_with(&[5; 32], &[]);
        let fresh = server_hello_with(&[6; 32], &[]);
        // Over TCP: records, the handshake ones first; the rest is cut at ChangeCipherSpec.
        let mut server = record(HANDSHAKE_RECORD, &resumed);
        server.extend(record(20, &[1]));
        server.extend(record(HANDSHAKE_RECORD, &[0xde, 0xad]));
        let stream = handshake_stream(&server);
        assert_eq!(stream, resumed);
        let f = facts(
            &handshake_stream(&record(HANDSHAKE_RECORD, &ch)),
            &stream,
            &[],
        );
        assert_eq!(f.resumed, Some(true));
        assert!(f.client_offered_resumption);
        assert_eq!(f.early_data_accepted, None);
        assert_eq!(facts(&ch, &fresh, &[]).resumed, Some(false));
        assert_eq!(facts(&ch, &[], &[]).resumed, None);
    }

    #[test]
    fn cut_or_garbled_streams_give_what_they_can_and_never_panic() {
        let ch = client_hello_with(&[1; 32], &[EARLY_DATA]);
        for cut in 0..ch.len() {
            let _ = facts(&ch[..cut], &ch[..cut], &ch[..cut]);
        }
        // A message split across two records reassembles.
        let mut two = record(HANDSHAKE_RECORD, &ch[..10]);
        two.extend(record(HANDSHAKE_RECORD, &ch[10..]));
        assert_eq!(messages(&handshake_stream(&two)).len(), 1);
        assert!(facts(&handshake_stream(&two), &[], &[]).client_offered_early_data);
        assert!(messages(&[1, 0xff, 0xff, 0xff, 0]).is_empty());
    }
}
