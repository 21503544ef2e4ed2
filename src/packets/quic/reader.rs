//! A cursor over a packet's bytes: bytes, big-endian integers and QUIC varints (RFC 9000 §16).

pub(super) struct Reader<'a> {
    data: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub(super) fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }
    pub(super) fn u8(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        let bytes = self.bytes(4)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }
    pub(super) fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }
    pub(super) fn rest(&mut self) -> &'a [u8] {
        let rest = &self.data[self.pos.min(self.data.len())..];
        self.pos = self.data.len();
        rest
    }
    /// RFC 9000 §16.
    pub(super) fn varint(&mut self) -> Option<u64> {
        let first = self.u8()?;
        let len = 1usize << (first >> 6);
        let mut value = u64::from(first & 0x3f);
        for byte in self.bytes(len - 1)? {
            value = value << 8 | u64::from(*byte);
        }
        Some(value)
    }
    pub(super) fn varints(&mut self, count: usize) -> Option<()> {
        for _ in 0..count {
            self.varint()?;
        }
        Some(())
    }
}
