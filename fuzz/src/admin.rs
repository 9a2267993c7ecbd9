//! The `admin` target: the admin queue and the BAR0 registers, on a NIC that already has a
//! PD, three MRs, two CQs and two QPs in `RESET` (the model's test rig), so commands that
//! name objects find some.
//!
//! Operations (the first byte modulo [`OPS`]):
//!
//! | op | operands | what |
//! |---|---|---|
//! | 0 | u8 opcode, chunk | a command: the opcode and up to 56 bytes of parameters (the rest zero) |
//! | 1 | chunk | an admin SQ entry's 64 bytes as they are (reserved bytes too) |
//! | 2 | u8 region, u16 offset, chunk | up to 4 KiB of memory a command may point at: [`MEM_REGIONS`] |
//! | 3 | u8 register, u32 value | a BAR0 write at 4 × register, then a read there |
//! | 4 | | the event queue drained |
//!
//! Every command's parameters, and every memory chunk as a QP attribute block, also go
//! through the pure decoders ([`check_decoders`]).

use ordma_hw as hw;
use ordma_model::mem::Dma;

use crate::common::rig::{Rig, P, PT, RINGS};
use crate::common::{BUF, SQ};
use crate::script::Reader;
use crate::MAX_OPS;

/// The number of operations.
pub const OPS: u8 = 5;
/// Operation: a command.
pub const OP_CMD: u8 = 0;
/// Operation: a raw admin SQ entry.
pub const OP_RAW: u8 = 1;
/// Operation: a write of guest memory.
pub const OP_MEM: u8 = 2;
/// Operation: a BAR0 register write and read.
pub const OP_REG: u8 = 3;
/// Operation: drain the event queue.
pub const OP_EVENTS: u8 = 4;

/// Where `OP_MEM` writes (region modulo 3, then the offset): the response buffer (the rig
/// writes QP attributes at its start), free page-table space, free ring space.
pub const MEM_REGIONS: [u64; 3] = [BUF, PT + 0x20_0000, RINGS + 0x30_0000];

/// `decode(encode(decode(p))) == decode(p)` for each parameter type `T` of `p`.
macro_rules! round_trip {
    ($p:expr, $($t:ident),+) => {
        $(
            if let Some(x) = hw::$t::decode($p) {
                assert_eq!(hw::$t::decode(&x.encode()), Some(x), stringify!($t));
            }
        )+
    };
}

/// Checks every parameter decoder on `p`, and the QP attribute decoder on `attr`.
pub fn check_decoders(p: &P, attr: Option<&[u8; hw::QP_ATTR_SIZE]>) {
    round_trip!(
        p,
        QueryDeviceParams,
        QueryPortParams,
        PdParams,
        CreateMrParams,
        KeyParams,
        CreateCqParams,
        NumParams,
        CreateQpParams,
        ModifyQpParams,
        QueryQpParams,
        CreateSrqParams,
        ModifySrqParams,
        QuerySrqParams
    );
    if let Some(a) = attr.and_then(hw::QpAttr::decode) {
        assert_eq!(hw::QpAttr::decode(&a.encode()), Some(a));
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let mut rig = Rig::bare(1);
    for _ in 0..MAX_OPS {
        if r.is_empty() {
            break;
        }
        match r.u8() % OPS {
            OP_CMD => {
                let opcode = r.u8();
                let mut p: P = [0; hw::AQ_SQE_SIZE - 8];
                let c = r.chunk(p.len());
                p[..c.len()].copy_from_slice(c);
                check_decoders(&p, None);
                rig.run(opcode, p);
            }
            OP_RAW => {
                let mut e = [0u8; hw::AQ_SQE_SIZE];
                let c = r.chunk(e.len());
                e[..c.len()].copy_from_slice(c);
                if let Some(cmd) = hw::AdminCmd::decode(&e) {
                    assert_eq!(cmd.encode(), e);
                }
                let slot = u64::from(rig.prod % (1 << crate::common::rig::AQ_LOG));
                let _ = rig.mem.dma_write(SQ + slot * hw::AQ_SQE_SIZE as u64, &e);
                rig.prod = rig.prod.wrapping_add(1);
                rig.w(hw::REG_AQ_SQ_DB, u32::from(rig.prod));
            }
            OP_MEM => {
                let base = MEM_REGIONS[usize::from(r.u8() % 3)];
                let at = base + u64::from(r.u16());
                let c = r.chunk(4096);
                if let Ok(a) = <&[u8; hw::QP_ATTR_SIZE]>::try_from(
                    c.get(..hw::QP_ATTR_SIZE).unwrap_or_default(),
                ) {
                    check_decoders(&[0; hw::AQ_SQE_SIZE - 8], Some(a));
                }
                let _ = rig.mem.dma_write(at, c);
            }
            OP_REG => {
                let reg = usize::from(r.u8()) * 4;
                let value = r.u32();
                rig.w(reg, value);
                let _ = rig.nic.bar0_read(reg as u64, 4);
            }
            _ => {
                rig.events();
            }
        }
    }
}
