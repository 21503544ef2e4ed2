//! HTTP/2 frames (RFC 9113 §4, §6) of one direction's decrypted bytes, and what the stream
//! analysis reads of them (pure): header blocks (HEADERS or PUSH_PROMISE with their
//! CONTINUATIONs), DATA payloads without padding, PRIORITY_UPDATE (RFC 9218 §7.1). Offsets are
//! the plaintext's, so that callers find when each byte was sent.

use std::ops::Range;

/// The client's connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const PRIORITY_UPDATE: u8 = 0x10;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// What the analysis reads from a direction, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A complete header block; `end` is the plaintext offset just past the frame that ended
    /// it (when it was sent is when that byte was).
    Headers {
        stream: u32,
        block: Vec<u8>,
        end: u64,
        end_stream: bool,
    },
    /// A PUSH_PROMISE's header block (read to keep the HPACK table in step).
    PushPromise {
        block: Vec<u8>,
    },
    /// DATA payload bytes (padding left out; a frame the capture cut gives what it has).
    Data {
        stream: u32,
        payload: Range<u64>,
        end_stream: bool,
    },
    /// A PRIORITY_UPDATE for `stream`; `end` just past it.
    PriorityUpdate {
        stream: u32,
        value: String,
        end: u64,
    },
    Reset {
        stream: u32,
    },
}

/// One frame: its header fields and where its payload lies (cut to what the buffer holds).
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Range<usize>,
    /// The payload is whole.
    whole: bool,
}

/// The frames of `buf` from `from`; the last may be cut.
fn frames(buf: &[u8], from: usize) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut pos = from;
    while let Some(h) = buf.get(pos..pos + 9) {
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        let start = pos + 9;
        let end = start + len;
        out.push(Frame {
            kind: h[3],
            flags: h[4],
            stream,
            payload: start..end.min(buf.len()),
            whole: end <= buf.len(),
        });
        pos = end;
    }
    out
}

/// The payload of a PADDED frame without its pad length byte and padding (`skip`: fixed
/// fields after the pad length, such as HEADERS' priority); None when malformed or cut
/// before its content.
fn unpadded(f: &Frame, buf: &[u8], skip: usize) -> Option<Range<usize>> {
    let Range { mut start, end } = f.payload.clone();
    let mut declared_end = end;
    if f.flags & PADDED != 0 {
        let pad = usize::from(*buf.get(start)?);
        start += 1;
        if f.whole {
            declared_end = end.checked_sub(pad)?;
        }
    }
    start += skip;
    (start <= declared_end).then_some(start..declared_end.min(end))
}

/// A header block being gathered from HEADERS or PUSH_PROMISE and its CONTINUATIONs.
struct Block {
    stream: u32,
    bytes: Vec<u8>,
    end_stream: bool,
    push: bool,
}

impl Block {
    /// The block complete, its last frame ending at `end`.
    fn event(self, end: usize) -> Event {
        match self.push {
            true => Event::PushPromise { block: self.bytes },
            false => Event::Headers {
                stream: self.stream,
                block: self.bytes,
                end: end as u64,
                end_stream: self.end_stream,
            },
        }
    }
}

/// The header block fragment a frame carries (a CONTINUATION only while a block is open).
fn fragment(f: &Frame, buf: &[u8], open: bool) -> Option<Range<usize>> {
    match f.kind {
        HEADERS => unpadded(f, buf, if f.flags & PRIORITY != 0 { 5 } else { 0 }),
        PUSH_PROMISE => unpadded(f, buf, 4),
        CONTINUATION if open => Some(f.payload.clone()),
        _ => None,
    }
}

/// What a frame outside header blocks says, if anything the analysis reads.
fn other(f: &Frame, buf: &[u8]) -> Option<Event> {
    match f.kind {
        DATA => unpadded(f, buf, 0).map(|r| Event::Data {
            stream: f.stream,
            payload: r.start as u64..r.end as u64,
            end_stream: f.flags & END_STREAM != 0 && f.whole,
        }),
        PRIORITY_UPDATE if f.whole => priority_update(&buf[f.payload.clone()], f.payload.end),
        RST_STREAM => Some(Event::Reset { stream: f.stream }),
        _ => None,
    }
}

/// Reads the events of one direction's plaintext from `from` (after the preface for the
/// client). A problem says where reading stopped early.
pub fn events(buf: &[u8], from: usize) -> (Vec<Event>, Option<String>) {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for f in frames(buf, from) {
        if open
            .as_ref()
            .is_some_and(|b| f.kind != CONTINUATION || f.stream != b.stream)
        {
            let at = f.payload.start - 9;
            return (
                out,
                Some(format!("a header block is not continued at offset {at}")),
            );
        }
        if let Some(e) = other(&f, buf) {
            out.push(e);
            continue;
        }
        let Some(range) = fragment(&f, buf, open.is_some()) else {
            continue;
        };
        if !f.whole {
            break; // a header block the capture cut is no block
        }
        let mut block = open.take().unwrap_or(Block {
            stream: f.stream,
            bytes: Vec::new(),
            end_stream: f.flags & END_STREAM != 0,
            push: f.kind == PUSH_PROMISE,
        });
        block.bytes.extend_from_slice(&buf[range]);
        if f.flags & END_HEADERS == 0 {
            open = Some(block);
        } else {
            out.push(block.event(f.payload.end));
        }
    }
    (out, None)
}

/// A PRIORITY_UPDATE payload: the prioritized stream and the field value (RFC 9218 §7.1).
fn priority_update(payload: &[u8], end: usize) -> Option<Event> {
    let id = payload.get(..4)?;
    Some(Event::PriorityUpdate {
        stream: u32::from_be_bytes(id.try_into().ok()?) & 0x7fff_ffff,
        value: String::from_utf8_lossy(&payload[4..]).into_owned(),
        end: end as u64,
    })
}

/// Test helpers: frames built by hand.
#[cfg(test)]
pub mod build {
    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    pub fn headers(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
        frame(1, 0x4 | u8::from(end_stream), stream, block)
    }

    pub fn data(stream: u32, body: &[u8], end_stream: bool) -> Vec<u8> {
        frame(0, u8::from(end_stream), stream, body)
    }

    pub fn priority_update(stream: u32, value: &str) -> Vec<u8> {
        let mut p = stream.to_be_bytes().to_vec();
        p.extend(value.as_bytes());
        frame(0x10, 0, 0, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::build::{self, data, frame};
    use super::*;

    #[test]
    fn reads_headers_with_continuation_padded_data_and_priority_updates() {
        let mut b = PREFACE.to_vec();
        b.extend(frame(4, 0, 0, &[0, 3, 0, 0, 0, 100])); // SETTINGS
                                                         // HEADERS with padding and priority, continued.
        let mut h = vec![2]; // pad length
        h.extend([0x80, 0, 0, 0, 15]); // exclusive dependency on 0, weight
        h.extend([0x82, 0x84]);
        h.extend([0, 0]);
        b.extend(frame(1, PADDED | PRIORITY, 1, &h));
        b.extend(frame(9, END_HEADERS, 1, &[0x87]));
        let headers_end = b.len() as u64;
        b.extend(build::priority_update(1, "u=0, i"));
        let update_end = b.len() as u64;
        let data_at = b.len() as u64 + 9 + 1;
        b.extend(frame(0, PADDED | END_STREAM, 3, &[3, b'a', b'b', 0, 0, 0]));
        b.extend(frame(3, 0, 5, &[0, 0, 0, 8]));
        b.extend(data(7, b"cut here", false));
        b.truncate(b.len() - 4);
        let (got, problem) = events(&b, PREFACE.len());
        assert_eq!(problem, None);
        assert_eq!(
            got,
            vec![
                Event::Headers {
                    stream: 1,
                    block: vec![0x82, 0x84, 0x87],
                    end: headers_end,
                    end_stream: false
                },
                Event::PriorityUpdate {
                    stream: 1,
                    value: "u=0, i".into(),
                    end: update_end
                },
                Event::Data {
                    stream: 3,
                    payload: data_at..data_at + 2,
                    end_stream: true
                },
                Event::Reset { stream: 5 },
                Event::Data {
                    stream: 7,
                    payload: b.len() as u64 - 4..b.len() as u64,
                    end_stream: false
                },
            ]
        );
    }

    #[test]
    fn an_interrupted_header_block_and_garbage_stop_without_panics() {
        let mut b = frame(1, 0, 1, &[0x82]);
        b.extend(data(1, b"x", false));
        let (got, problem) = events(&b, 0);
        assert!(got.is_empty());
        assert!(problem.unwrap().contains("not continued"));
        // Padding longer than the frame.
        assert!(events(&frame(0, PADDED, 1, &[9, 1]), 0).0.is_empty());
        for n in 0..=255u8 {
            let junk: Vec<u8> = (0..40).map(|i: u8| i.wrapping_mul(n) ^ n).collect();
            for cut in 0..junk.len() {
                let _ = events(&junk[..cut], 0);
            }
        }
    }
}
