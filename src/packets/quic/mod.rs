//! Decrypts captured QUIC v1 packets (RFC 9000/9001) with a TLS key log, to see which STREAM
//! frames each packet carried.
//!
//! Pure: the caller feeds UDP payloads of one flow in capture order and gets decoded packets
//! back. Nothing here does IO or reads a clock. Any input (garbage, truncated, missing keys)
//! yields packets marked `undecryptable` with the reason, never a panic.
//!
//! - `key_log`: the NSS key log the secrets come from;
//! - `decoded`: what a decoded packet is (sender, kind, frames, stream data);
//! - `protection`: cipher suites, key derivation, header protection and the AEAD;
//! - `flow`: one UDP flow fed datagram by datagram, with its keys and CRYPTO streams;
//! - `header`: long and short packet headers;
//! - `frames`: the frames of a decrypted payload;
//! - `reader`: bytes and varints read off a buffer.

mod decoded;
mod flow;
mod frames;
mod header;
mod key_log;
mod protection;
mod reader;
#[cfg(test)]
pub(crate) mod tests;

pub use decoded::{Frame, PacketKind, QuicPacket, Sender, StreamChunk};
pub use flow::QuicFlow;
pub use key_log::{KeyLog, KeyLogError};
pub(super) use protection::{expand_label, CipherSuite};
