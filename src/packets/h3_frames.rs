//! HTTP/3 frames (RFC 9114 §7) of one QUIC stream's bytes, and what the stream analysis reads
//! of them (pure): HEADERS field sections, DATA payloads, PRIORITY_UPDATE (RFC 9218 §7.2).
//! Offsets are the stream's, so that callers find when each byte was sent.

use std::ops::Range;

const DATA: u64 = 0x00;
const HEADERS: u64 = 0x01;
const PRIORITY_UPDATE_REQUEST: u64 = 0xf0700;
const PRIORITY_UPDATE_PUSH: u64 = 0xf0701;

/// The type of a unidirectional stream that carries HTTP/3 control frames (RFC 9114 §6.2.1).
pub const CONTROL_STREAM: u64 = 0x00;

/// What the analysis reads from a stream, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A HEADERS frame's field section; `end` is the stream offset just past the frame.
    Headers { section: Vec<u8>, end: u64 },
    /// DATA payload bytes (a frame the capture cut gives what it has).
    Data { payload: Range<u64> },
    /// A PRIORITY_UPDATE for a request stream (`push`: for a push id); `end` as for headers.
    PriorityUpdate {
        element: u64,
        push: bool,
        value: String,
        end: u64,
    },
}

/// A QUIC variable-length integer (RFC 9000 §16) at `*pos`, moving past it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *buf.get(*pos)?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(*pos..*pos + len)?;
    *pos += len;
    let mut value = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        value = value << 8 | u64::from(*b);
    }
    Some(value)
}

/// The frames of a stream's bytes `buf` from `from` (after a unidirectional stream's type).
pub fn events(buf: &[u8], from: usize) -> Vec<Event> {
    let mut out = Vec::new();
    let mut pos = from;
    while pos < buf.len() {
        let (Some(kind), Some(len)) = (varint(buf, &mut pos), varint(buf, &mut pos)) else {
            break;
        };
        let start = pos;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .unwrap_or(usize::MAX);
        let whole = buf.get(start..end);
        match (kind, whole) {
            (DATA, _) => out.push(Event::Data {
                payload: start as u64..end.min(buf.len()) as u64,
            }),
            (HEADERS, Some(section)) => out.push(Event::Headers {
                section: section.to_vec(),
                end: end as u64,
            }),
            (PRIORITY_UPDATE_REQUEST | PRIORITY_UPDATE_PUSH, Some(payload)) => {
                let mut p = 0;
                if let Some(element) = varint(payload, &mut p) {
                    out.push(Event::PriorityUpdate {
                        element,
                        push: kind == PRIORITY_UPDATE_PUSH,
                        value: String::from_utf8_lossy(&payload[p..]).into_owned(),
                        end: end as u64,
                    });
                }
            }
            _ => {}
        }
        if whole.is_none() {
            break;
        }
        pos = end;
    }
    out
}

/// Test helpers: frames built by hand.
#[cfg(test)]
pub mod build {
    pub fn varint(v: u64) -> Vec<u8> {
        match v {
            0..=63 => vec![v as u8],
            64..=16383 => (0x4000 | v as u16).to_be_bytes().to_vec(),
            16384..=1_073_741_823 => (0x8000_0000 | v as u32).to_be_bytes().to_vec(),
            _ => (0xc000_0000_0000_0000 | v).to_be_bytes().to_vec(),
        }
    }

    pub fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut f = varint(kind);
        f.extend(varint(payload.len() as u64));
        f.extend(payload);
        f
    }

    pub fn priority_update(element: u64, value: &str) -> Vec<u8> {
        let mut p = varint(element);
        p.extend(value.as_bytes());
        frame(super::PRIORITY_UPDATE_REQUEST, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::build::{self, frame};
    use super::*;

    #[test]
    fn reads_a_request_stream_and_a_control_stream() {
        let mut s = frame(HEADERS, &[0, 0, 0xd1]);
        let headers_end = s.len() as u64;
        s.extend(frame(0x21, b"grease")); // a reserved type is skipped
        let body_at = s.len() as u64 + 2;
        s.extend(frame(DATA, b"body"));
        s.extend(frame(DATA, &[7; 100]));
        s.truncate(s.len() - 40); // the capture ends inside the second DATA frame
        let got = events(&s, 0);
        assert_eq!(
            got,
            vec![
                Event::Headers {
                    section: vec![0, 0, 0xd1],
                    end: headers_end
                },
                Event::Data {
                    payload: body_at..body_at + 4
                },
                Event::Data {
                    payload: body_at + 7..body_at + 7 + 60
                },
            ]
        );
        let mut control = build::varint(CONTROL_STREAM);
        control.extend(frame(0x04, &[0x01, 0x00, 0x07, 0x00])); // SETTINGS
        control.extend(build::priority_update(8, "u=1"));
        let mut p = build::varint(0x4000);
        p.extend(b"u=5, i");
        control.extend(frame(PRIORITY_UPDATE_PUSH, &p));
        let got = events(&control, 1);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            Event::PriorityUpdate {
                element: 8,
                push: false,
                value: "u=1".into(),
                end: 8 + 8
            }
        );
        assert!(matches!(
            &got[1],
            Event::PriorityUpdate {
                element: 0x4000,
                push: true,
                ..
            }
        ));
    }

    #[test]
    fn varints_and_garbage() {
        for v in [0, 63, 64, 16383, 16384, 1 << 30, (1 << 62) - 1] {
            let mut pos = 0;
            assert_eq!(varint(&build::varint(v), &mut pos), Some(v));
        }
        assert_eq!(varint(&[0x40], &mut 0), None);
        // A frame claiming 2^62 bytes.
        let huge = [0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2];
        assert!(events(&huge, 0).is_empty());
        for n in 0..=255u8 {
            let junk: Vec<u8> = (0..30).map(|i: u8| i.wrapping_mul(n) ^ n).collect();
            for cut in 0..junk.len() {
                let _ = events(&junk[..cut], 0);
            }
        }
    }
}
