//! A fuzz input as a script of operations: each starts with a byte that picks the
//! operation (modulo the target's count), then its operands. Numbers are little-endian;
//! a chunk of bytes is a 16-bit length and that many bytes (fewer if the input ends).
//! Every byte string is a valid script: what is missing reads as zero or empty.

/// Reads a script.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// Whether the script is over.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.rest.split_at(n.min(self.rest.len()));
        self.rest = b;
        a
    }

    fn le<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let got = self.take(N);
        b[..got.len()].copy_from_slice(got);
        b
    }

    /// A byte.
    pub fn u8(&mut self) -> u8 {
        self.le::<1>()[0]
    }

    /// A 16-bit number.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.le())
    }

    /// A 32-bit number.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.le())
    }

    /// A chunk: its 16-bit length, then its bytes; at most `max` of them are returned (the
    /// rest of the chunk is skipped).
    pub fn chunk(&mut self, max: usize) -> &'a [u8] {
        let n = usize::from(self.u16());
        let c = self.take(n);
        c.get(..max).unwrap_or(c)
    }
}

/// Writes a script (the seeds).
#[derive(Debug, Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a byte (an operation, or an operand).
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    /// Appends a 16-bit number.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a 32-bit number.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a chunk (at most 65535 bytes: the rest is cut).
    pub fn chunk(&mut self, b: &[u8]) -> &mut Self {
        let b = b.get(..usize::from(u16::MAX)).unwrap_or(b);
        // CAST: cut to 16 bits above.
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b);
        self
    }

    /// The script's bytes.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short_input() {
        let b = Writer::new()
            .u8(7)
            .u16(0x1234)
            .u32(0xdead_beef)
            .chunk(b"abc")
            .finish();
        let mut r = Reader::new(&b);
        assert_eq!(
            (r.u8(), r.u16(), r.u32(), r.chunk(2)),
            (7, 0x1234, 0xdead_beef, &b"ab"[..])
        );
        assert!(r.is_empty());
        // Missing bytes read as zero, a chunk past the end as what is there.
        let mut r = Reader::new(&[5, 1]);
        assert_eq!((r.u8(), r.u32(), r.chunk(9)), (5, 1, &[][..]));
        let mut r = Reader::new(&[9, 0, 1, 2]);
        assert_eq!(r.chunk(100), &[1, 2]);
    }
}
