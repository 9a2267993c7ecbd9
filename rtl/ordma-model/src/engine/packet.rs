//! The transports' packets: IB base transport header (BTH) and the extended headers RC,
//! UC and UD use (RETH, AtomicETH, AETH, AtomicAckETH, DETH, ImmDt, IETH, IBTA 1.5's FETH), as the IBTA
//! specification lays them out on the wire
//! (big-endian; Linux's soft-RoCE has them in `drivers/infiniband/sw/rxe/rxe_hdr.h`).
//!
//! Inside one NIC (loopback) the roles pass the decoded [`Packet`] and a reference to the
//! payload; [`Packet::encode`] and [`Packet::decode`] give the wire bytes for the RoCEv2
//! wire to come.

/// BTH opcode: RC SEND first.
pub const SEND_FIRST: u8 = 0x00;
/// BTH opcode: RC SEND middle.
pub const SEND_MIDDLE: u8 = 0x01;
/// BTH opcode: RC SEND last.
pub const SEND_LAST: u8 = 0x02;
/// BTH opcode: RC SEND last with immediate.
pub const SEND_LAST_IMM: u8 = 0x03;
/// BTH opcode: RC SEND only.
pub const SEND_ONLY: u8 = 0x04;
/// BTH opcode: RC SEND only with immediate.
pub const SEND_ONLY_IMM: u8 = 0x05;
/// BTH opcode: RC RDMA WRITE first.
pub const WRITE_FIRST: u8 = 0x06;
/// BTH opcode: RC RDMA WRITE middle.
pub const WRITE_MIDDLE: u8 = 0x07;
/// BTH opcode: RC RDMA WRITE last.
pub const WRITE_LAST: u8 = 0x08;
/// BTH opcode: RC RDMA WRITE last with immediate.
pub const WRITE_LAST_IMM: u8 = 0x09;
/// BTH opcode: RC RDMA WRITE only.
pub const WRITE_ONLY: u8 = 0x0a;
/// BTH opcode: RC RDMA WRITE only with immediate.
pub const WRITE_ONLY_IMM: u8 = 0x0b;
/// BTH opcode: RC RDMA READ request.
pub const READ_REQUEST: u8 = 0x0c;
/// BTH opcode: RC RDMA READ response first.
pub const READ_RESPONSE_FIRST: u8 = 0x0d;
/// BTH opcode: RC RDMA READ response middle.
pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
/// BTH opcode: RC RDMA READ response last.
pub const READ_RESPONSE_LAST: u8 = 0x0f;
/// BTH opcode: RC RDMA READ response only.
pub const READ_RESPONSE_ONLY: u8 = 0x10;
/// BTH opcode: RC ACKNOWLEDGE.
pub const ACKNOWLEDGE: u8 = 0x11;
/// BTH opcode: RC ATOMIC ACKNOWLEDGE (the original value of an atomic's word).
pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
/// BTH opcode: RC COMPARE SWAP.
pub const COMPARE_SWAP: u8 = 0x13;
/// BTH opcode: RC FETCH ADD.
pub const FETCH_ADD: u8 = 0x14;
/// BTH opcode: RC SEND last with invalidate: an IETH (the rkey the responder invalidates).
pub const SEND_LAST_INV: u8 = 0x16;
/// BTH opcode: RC SEND only with invalidate: an IETH.
pub const SEND_ONLY_INV: u8 = 0x17;
/// BTH opcode: RC FLUSH (IBTA 1.5): FETH and RETH; answered by an empty read response.
pub const FLUSH: u8 = 0x1c;
/// BTH opcode: RC ATOMIC WRITE (IBTA 1.5): RETH and 8 bytes of payload; answered by an
/// empty read response.
pub const ATOMIC_WRITE: u8 = 0x1d;

/// The BTH opcode's transport bits (its top three) for UC: a UC packet's opcode is this
/// plus the RC opcode of the same SEND or WRITE packet (`UC | SEND_FIRST` is UC SEND
/// first, 0x20, ... `UC | WRITE_ONLY_IMM`, 0x2b).
pub const UC: u8 = 0x20;

/// The BTH opcode's transport bits for UD; UD has two opcodes, [`UD_SEND_ONLY`] and
/// [`UD_SEND_ONLY_IMM`].
pub const UD: u8 = 0x60;
/// BTH opcode: UD SEND only.
pub const UD_SEND_ONLY: u8 = UD | SEND_ONLY;
/// BTH opcode: UD SEND only with immediate.
pub const UD_SEND_ONLY_IMM: u8 = UD | SEND_ONLY_IMM;

/// The transport bits of `opcode` (0: RC, [`UC`], [`UD`]).
pub const fn transport(opcode: u8) -> u8 {
    opcode & 0xe0
}

/// The operation of `opcode` without its transport bits (the RC opcode of the same
/// operation).
pub const fn operation(opcode: u8) -> u8 {
    opcode & 0x1f
}

/// Whether `op` (an operation, [`operation`]) starts a message: SEND or WRITE first or
/// only.
pub const fn starts_message(op: u8) -> bool {
    matches!(
        op,
        SEND_FIRST
            | SEND_ONLY
            | SEND_ONLY_IMM
            | SEND_ONLY_INV
            | WRITE_FIRST
            | WRITE_ONLY
            | WRITE_ONLY_IMM
    )
}

/// Bytes of a BTH.
pub const BTH_LEN: usize = 12;
/// Bytes of a RETH.
pub const RETH_LEN: usize = 16;
/// Bytes of an AETH.
pub const AETH_LEN: usize = 4;
/// Bytes of an ImmDt.
pub const IMM_LEN: usize = 4;
/// Bytes of an AtomicETH.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Bytes of an AtomicAckETH.
pub const ATOMIC_ACK_LEN: usize = 8;
/// Bytes of a DETH.
pub const DETH_LEN: usize = 8;
/// Bytes of a FETH.
pub const FETH_LEN: usize = 4;
/// Bytes of an IETH.
pub const IETH_LEN: usize = 4;

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// The extended headers an opcode carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ext {
    /// RETH.
    pub reth: bool,
    /// AETH.
    pub aeth: bool,
    /// ImmDt.
    pub imm: bool,
    /// AtomicETH.
    pub atomic: bool,
    /// AtomicAckETH.
    pub atomic_ack: bool,
    /// DETH (UD).
    pub deth: bool,
    /// FETH (FLUSH).
    pub feth: bool,
    /// IETH (SEND with invalidate).
    pub ieth: bool,
}

impl Ext {
    const fn of(reth: bool, aeth: bool, imm: bool) -> Self {
        Self {
            reth,
            aeth,
            imm,
            atomic: false,
            atomic_ack: false,
            deth: false,
            feth: false,
            ieth: false,
        }
    }
}

/// Which extended headers an RC, UC or UD opcode carries; `None` for an opcode that is
/// not theirs (UC has SEND and WRITE only, UD SEND only and SEND only with immediate).
pub const fn headers(opcode: u8) -> Option<Ext> {
    let opcode = match transport(opcode) {
        0 => opcode,
        UC if operation(opcode) <= WRITE_ONLY_IMM => operation(opcode),
        UD if opcode == UD_SEND_ONLY || opcode == UD_SEND_ONLY_IMM => {
            return Some(Ext {
                deth: true,
                ..Ext::of(false, false, opcode == UD_SEND_ONLY_IMM)
            });
        }
        _ => return None,
    };
    Some(match opcode {
        SEND_FIRST | SEND_MIDDLE | SEND_LAST | SEND_ONLY | WRITE_MIDDLE | WRITE_LAST => {
            Ext::of(false, false, false)
        }
        SEND_LAST_IMM | SEND_ONLY_IMM | WRITE_LAST_IMM => Ext::of(false, false, true),
        WRITE_FIRST | WRITE_ONLY | READ_REQUEST => Ext::of(true, false, false),
        WRITE_ONLY_IMM => Ext::of(true, false, true),
        READ_RESPONSE_FIRST | READ_RESPONSE_LAST | READ_RESPONSE_ONLY | ACKNOWLEDGE => {
            Ext::of(false, true, false)
        }
        READ_RESPONSE_MIDDLE => Ext::of(false, false, false),
        ATOMIC_ACKNOWLEDGE => Ext {
            atomic_ack: true,
            ..Ext::of(false, true, false)
        },
        COMPARE_SWAP | FETCH_ADD => Ext {
            atomic: true,
            ..Ext::of(false, false, false)
        },
        FLUSH => Ext {
            feth: true,
            ..Ext::of(true, false, false)
        },
        ATOMIC_WRITE => Ext::of(true, false, false),
        SEND_LAST_INV | SEND_ONLY_INV => Ext {
            ieth: true,
            ..Ext::of(false, false, false)
        },
        _ => return None,
    })
}

/// The base transport header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bth {
    /// The opcode (RC: the constants above).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration request.
    pub mig_req: bool,
    /// Pad bytes at the end of the payload (0..=3).
    pub pad: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Destination QP, 24 bits.
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number, 24 bits.
    pub psn: u32,
}

/// The RDMA extended transport header (WRITE first/only, READ request).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    /// Virtual address at the responder.
    pub va: u64,
    /// The responder's MR key.
    pub rkey: u32,
    /// Bytes of the whole message.
    pub dma_len: u32,
}

/// The atomic extended transport header (COMPARE SWAP, FETCH ADD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicEth {
    /// Virtual address of the 64-bit word at the responder.
    pub va: u64,
    /// The responder's MR key.
    pub rkey: u32,
    /// The value written if equal (COMPARE SWAP) or added (FETCH ADD).
    pub swap_add: u64,
    /// The value compared (COMPARE SWAP; zero for FETCH ADD).
    pub compare: u64,
}

/// The FLUSH extended transport header: the placement type (bits 3..0:
/// `hw::FLUSH_GLOBAL`, `hw::FLUSH_PERSISTENT`) and the selectivity level (bits 5..4:
/// `hw::FLUSH_RANGE`, `hw::FLUSH_MR`) of a big-endian word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feth {
    /// The placement type, 4 bits.
    pub placement: u8,
    /// The selectivity level, 2 bits.
    pub level: u8,
}

/// A NAK's code (the AETH syndrome's low five bits with `0b011` above them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NakCode {
    /// PSN sequence error.
    PsnSeq,
    /// Invalid request.
    InvalidRequest,
    /// Remote access error.
    RemoteAccess,
    /// Remote operational error.
    RemoteOp,
}

impl NakCode {
    const fn bits(self) -> u8 {
        match self {
            NakCode::PsnSeq => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccess => 2,
            NakCode::RemoteOp => 3,
        }
    }
}

/// The AETH's syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    /// ACK with a credit count (0x1f: no flow control).
    Ack(u8),
    /// Receiver not ready, with the RNR timer code (0..=31).
    Rnr(u8),
    /// NAK.
    Nak(NakCode),
}

impl Syndrome {
    /// The syndrome byte.
    pub const fn encode(self) -> u8 {
        match self {
            Syndrome::Ack(c) => c & 0x1f,
            Syndrome::Rnr(t) => 0x20 | (t & 0x1f),
            Syndrome::Nak(n) => 0x60 | n.bits(),
        }
    }

    /// Decodes a syndrome byte; `None` for reserved values.
    pub const fn decode(b: u8) -> Option<Self> {
        let low = b & 0x1f;
        Some(match b >> 5 {
            0 => Syndrome::Ack(low),
            1 => Syndrome::Rnr(low),
            3 => Syndrome::Nak(match low {
                0 => NakCode::PsnSeq,
                1 => NakCode::InvalidRequest,
                2 => NakCode::RemoteAccess,
                3 => NakCode::RemoteOp,
                _ => return None,
            }),
            _ => return None,
        })
    }
}

/// The datagram extended transport header (UD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deth {
    /// The Q_Key the receiving QP must have.
    pub qkey: u32,
    /// The sending QP, 24 bits.
    pub src_qp: u32,
}

/// The ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number, 24 bits.
    pub msn: u32,
}

/// One RC packet's headers (the payload travels beside it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The base transport header.
    pub bth: Bth,
    /// RETH, for the opcodes that carry one.
    pub reth: Option<Reth>,
    /// AETH, for the opcodes that carry one.
    pub aeth: Option<Aeth>,
    /// Immediate data, the four bytes as on the wire (and as the WQE and CQE hold them).
    pub imm: Option<[u8; 4]>,
    /// AtomicETH, for COMPARE SWAP and FETCH ADD.
    pub atomic: Option<AtomicEth>,
    /// AtomicAckETH, for ATOMIC ACKNOWLEDGE: the word's value before the atomic.
    pub atomic_ack: Option<u64>,
    /// DETH, for UD.
    pub deth: Option<Deth>,
    /// FETH, for FLUSH.
    pub feth: Option<Feth>,
    /// IETH, for SEND with invalidate: the rkey the responder invalidates.
    pub ieth: Option<u32>,
}

fn be(b: &[u8], off: usize, n: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(n)?)?;
    Some(s.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
}

impl Packet {
    /// Bytes of the headers.
    pub fn header_len(&self) -> usize {
        BTH_LEN
            + self.reth.map_or(0, |_| RETH_LEN)
            + self.aeth.map_or(0, |_| AETH_LEN)
            + self.imm.map_or(0, |_| IMM_LEN)
            + self.atomic.map_or(0, |_| ATOMIC_ETH_LEN)
            + self.atomic_ack.map_or(0, |_| ATOMIC_ACK_LEN)
            + self.deth.map_or(0, |_| DETH_LEN)
            + self.feth.map_or(0, |_| FETH_LEN)
            + self.ieth.map_or(0, |_| IETH_LEN)
    }

    /// Appends the headers in wire order (BTH, DETH, FETH, RETH, AtomicETH, AETH,
    /// AtomicAckETH, ImmDt, IETH) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let b = &self.bth;
        out.push(b.opcode);
        out.push(
            (u8::from(b.se) << 7)
                | (u8::from(b.mig_req) << 6)
                | ((b.pad & 3) << 4)
                | (b.tver & 0xf),
        );
        out.extend_from_slice(&b.pkey.to_be_bytes());
        out.push(0);
        out.extend_from_slice(&(b.dest_qp & PSN_MASK).to_be_bytes()[1..]);
        out.push(u8::from(b.ack_req) << 7);
        out.extend_from_slice(&(b.psn & PSN_MASK).to_be_bytes()[1..]);
        if let Some(d) = self.deth {
            out.extend_from_slice(&d.qkey.to_be_bytes());
            out.push(0);
            out.extend_from_slice(&(d.src_qp & PSN_MASK).to_be_bytes()[1..]);
        }
        if let Some(f) = self.feth {
            let bits = (u32::from(f.level & 3) << 4) | u32::from(f.placement & 0xf);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        if let Some(r) = self.reth {
            out.extend_from_slice(&r.va.to_be_bytes());
            out.extend_from_slice(&r.rkey.to_be_bytes());
            out.extend_from_slice(&r.dma_len.to_be_bytes());
        }
        if let Some(a) = self.atomic {
            out.extend_from_slice(&a.va.to_be_bytes());
            out.extend_from_slice(&a.rkey.to_be_bytes());
            out.extend_from_slice(&a.swap_add.to_be_bytes());
            out.extend_from_slice(&a.compare.to_be_bytes());
        }
        if let Some(a) = self.aeth {
            out.push(a.syndrome.encode());
            out.extend_from_slice(&(a.msn & PSN_MASK).to_be_bytes()[1..]);
        }
        if let Some(v) = self.atomic_ack {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if let Some(i) = self.imm {
            out.extend_from_slice(&i);
        }
        if let Some(k) = self.ieth {
            out.extend_from_slice(&k.to_be_bytes());
        }
    }

    /// Decodes the headers at the start of `b`; the packet and the header length (the
    /// payload follows). `None` for a short buffer, an opcode that is not RC's, or a
    /// reserved AETH syndrome.
    pub fn decode(b: &[u8]) -> Option<(Self, usize)> {
        let opcode = *b.first()?;
        let flags = *b.get(1)?;
        let ext = headers(opcode)?;
        // CAST: `be` of n bytes fits the narrower types below.
        let bth = Bth {
            opcode,
            se: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad: (flags >> 4) & 3,
            tver: flags & 0xf,
            pkey: be(b, 2, 2)? as u16,
            dest_qp: be(b, 5, 3)? as u32,
            ack_req: *b.get(8)? & 0x80 != 0,
            psn: be(b, 9, 3)? as u32,
        };
        let mut off = BTH_LEN;
        let mut p = Packet {
            bth,
            ..Default::default()
        };
        if ext.deth {
            p.deth = Some(Deth {
                qkey: be(b, off, 4)? as u32,
                src_qp: be(b, off + 5, 3)? as u32,
            });
            off += DETH_LEN;
        }
        if ext.feth {
            let bits = be(b, off, 4)?;
            // CAST: masked to 4 and 2 bits.
            p.feth = Some(Feth {
                placement: (bits & 0xf) as u8,
                level: ((bits >> 4) & 3) as u8,
            });
            off += FETH_LEN;
        }
        if ext.reth {
            p.reth = Some(Reth {
                va: be(b, off, 8)?,
                rkey: be(b, off + 8, 4)? as u32,
                dma_len: be(b, off + 12, 4)? as u32,
            });
            off += RETH_LEN;
        }
        if ext.atomic {
            p.atomic = Some(AtomicEth {
                va: be(b, off, 8)?,
                rkey: be(b, off + 8, 4)? as u32,
                swap_add: be(b, off + 12, 8)?,
                compare: be(b, off + 20, 8)?,
            });
            off += ATOMIC_ETH_LEN;
        }
        if ext.aeth {
            p.aeth = Some(Aeth {
                syndrome: Syndrome::decode(*b.get(off)?)?,
                msn: be(b, off + 1, 3)? as u32,
            });
            off += AETH_LEN;
        }
        if ext.atomic_ack {
            p.atomic_ack = Some(be(b, off, 8)?);
            off += ATOMIC_ACK_LEN;
        }
        if ext.imm {
            let mut i = [0u8; 4];
            i.copy_from_slice(b.get(off..off + IMM_LEN)?);
            p.imm = Some(i);
            off += IMM_LEN;
        }
        if ext.ieth {
            p.ieth = Some(be(b, off, 4)? as u32);
            off += IETH_LEN;
        }
        Some((p, off))
    }
}

/// `a + n` in PSN space (mod 2^24).
pub const fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_round_trips() {
        let others = [
            SEND_LAST_INV,
            SEND_ONLY_INV,
            FLUSH,
            ATOMIC_WRITE,
            UD_SEND_ONLY,
            UD_SEND_ONLY_IMM,
        ];
        for opcode in (0..=0x14u8).chain(others) {
            let ext = headers(opcode).unwrap();
            let p = Packet {
                bth: Bth {
                    opcode,
                    se: opcode % 2 == 0,
                    mig_req: true,
                    pad: 2,
                    tver: 0,
                    pkey: 0xffff,
                    dest_qp: 0x12_3456,
                    ack_req: opcode % 3 == 0,
                    psn: 0xab_cdef,
                },
                reth: ext.reth.then_some(Reth {
                    va: 0x0102_0304_0506_0708,
                    rkey: 0xdead_beef,
                    dma_len: 0x8000_0001,
                }),
                aeth: ext.aeth.then_some(Aeth {
                    syndrome: Syndrome::Nak(NakCode::RemoteAccess),
                    msn: 0xfe_dcba,
                }),
                imm: ext.imm.then_some([1, 2, 3, 4]),
                atomic: ext.atomic.then_some(AtomicEth {
                    va: 0x0102_0304_0506_0708,
                    rkey: 0x1122_3344,
                    swap_add: 0x5566_7788_99aa_bbcc,
                    compare: 0xddee_ff00_1122_3344,
                }),
                atomic_ack: ext.atomic_ack.then_some(0x8877_6655_4433_2211),
                deth: ext.deth.then_some(Deth {
                    qkey: 0x8001_0203,
                    src_qp: 0xab_cdef,
                }),
                feth: ext.feth.then_some(Feth {
                    placement: 0x9,
                    level: 2,
                }),
                ieth: ext.ieth.then_some(0x8000_1234),
            };
            let mut b = Vec::new();
            p.encode(&mut b);
            assert_eq!(b.len(), p.header_len());
            assert_eq!(Packet::decode(&b), Some((p, b.len())), "opcode {opcode:#x}");
            assert_eq!(Packet::decode(&b[..b.len() - 1]), None, "short");
        }
        assert_eq!(Packet::decode(&[0x15; 40]), None, "RC's reserved opcodes");
        assert_eq!(Packet::decode(&[0x66; 40]), None, "UD's others");
        for op in 0..=0xffu8 {
            let uc = transport(op) == UC;
            let ud = transport(op) == UD;
            let want = match operation(op) {
                o if uc && o <= WRITE_ONLY_IMM => headers(o),
                _ if uc => None,
                o if ud && (o == SEND_ONLY || o == SEND_ONLY_IMM) => headers(op),
                _ if ud => None,
                _ => headers(op),
            };
            assert_eq!(headers(op), want, "{op:#x}");
        }
        assert_eq!(
            headers(UC | WRITE_ONLY_IMM).map(|e| (e.reth, e.imm)),
            Some((true, true))
        );
        assert_eq!(headers(UC | READ_REQUEST), None, "no READ on UC");
        assert_eq!(headers(UC | ACKNOWLEDGE), None, "no ACK on UC");
        assert_eq!(
            headers(UD_SEND_ONLY_IMM).map(|e| (e.deth, e.imm, e.reth)),
            Some((true, true, false))
        );
        assert_eq!(
            headers(UD_SEND_ONLY).map(|e| (e.deth, e.imm)),
            Some((true, false))
        );
    }

    #[test]
    fn wire_layout_is_big_endian_ib() {
        let p = Packet {
            bth: Bth {
                opcode: WRITE_ONLY,
                se: true,
                pkey: 0xffff,
                dest_qp: 0x00_0102,
                ack_req: true,
                psn: 0x03_0405,
                ..Default::default()
            },
            reth: Some(Reth {
                va: 0x1122_3344_5566_7788,
                rkey: 0x99aa_bbcc,
                dma_len: 0x1000,
            }),
            ..Default::default()
        };
        let mut b = Vec::new();
        p.encode(&mut b);
        assert_eq!(
            b,
            [
                0x0a, 0x80, 0xff, 0xff, 0, 0, 1, 2, 0x80, 3, 4, 5, 0x11, 0x22, 0x33, 0x44, 0x55,
                0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0, 0, 0x10, 0
            ]
        );
        for (s, byte) in [
            (Syndrome::Ack(0x1f), 0x1f),
            (Syndrome::Rnr(14), 0x2e),
            (Syndrome::Nak(NakCode::PsnSeq), 0x60),
            (Syndrome::Nak(NakCode::InvalidRequest), 0x61),
            (Syndrome::Nak(NakCode::RemoteAccess), 0x62),
            (Syndrome::Nak(NakCode::RemoteOp), 0x63),
        ] {
            assert_eq!(s.encode(), byte);
            assert_eq!(Syndrome::decode(byte), Some(s));
        }
        assert_eq!(Syndrome::decode(0x40), None);
        assert_eq!(Syndrome::decode(0x64), None);
    }

    #[test]
    fn atomic_headers_are_the_ib_layout() {
        let req = Packet {
            bth: Bth {
                opcode: COMPARE_SWAP,
                pkey: 0xffff,
                dest_qp: 2,
                ack_req: true,
                psn: 7,
                ..Default::default()
            },
            atomic: Some(AtomicEth {
                va: 0x1000,
                rkey: 0x0102,
                swap_add: 0x0a0b,
                compare: 0x0c0d,
            }),
            ..Default::default()
        };
        let mut b = Vec::new();
        req.encode(&mut b);
        assert_eq!(b.len(), BTH_LEN + 28);
        assert_eq!(
            &b[BTH_LEN..],
            &[
                0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b, 0, 0, 0, 0, 0,
                0, 0x0c, 0x0d
            ],
            "VA, R_Key, swap (add) data, compare data, big-endian"
        );
        let ack = Packet {
            bth: Bth {
                opcode: ATOMIC_ACKNOWLEDGE,
                ..req.bth
            },
            aeth: Some(Aeth {
                syndrome: Syndrome::Ack(0x1f),
                msn: 3,
            }),
            atomic_ack: Some(0x0102_0304_0506_0708),
            ..Default::default()
        };
        let mut b = Vec::new();
        ack.encode(&mut b);
        assert_eq!(
            &b[BTH_LEN..],
            &[0x1f, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8],
            "AETH, then the value"
        );
        assert_eq!(Packet::decode(&b), Some((ack, b.len())));
    }
}
