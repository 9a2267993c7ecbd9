//! The RC engine's requester (soft-RoCE's `rxe_req.c`): on an SQ doorbell it takes the
//! QP's new send WQEs in order, checks and translates them ([`Nic::fetch_wqe`]), and its
//! flights ([`super::flights`]) send their request packets, one per `path_mtu` bytes, to
//! the responder: of another NIC over the wire, or of this one (loopback: the wire to the
//! NIC itself, [`super::own`]). One requester for both.

use ordma_hw as hw;

use super::counters::{bounded_warn, Anomaly};
use super::data::Data;
use super::packet;
use super::pages;
use super::qp::{Qp, WorkQueue};
use super::{Interrupts, Nic};
use crate::mem::Dma;

/// The port's largest message (2 GiB).
pub(super) const MAX_MSG: u64 = 1 << 31;

/// Bytes of packets to the NIC itself one call takes ([`Nic::drain_own`]) before it leaves
/// the rest to the timer thread, so a guest's doorbell holds the NIC for a bounded time.
pub(super) const SQ_BUDGET: u64 = 64 << 20;

/// The bytes of WQE `index` of `wq` (one WQE never crosses a page: pages are at least
/// 4 KiB, WQEs at most 1 KiB and aligned); `None` if the ring cannot be read.
pub(super) fn wqe_bytes(mem: &dyn Dma, wq: &WorkQueue, index: u16) -> Option<Vec<u8>> {
    let depth = wq.depth();
    if depth == 0 {
        return None;
    }
    let off = u64::from(index % depth) << wq.log_wqe_size.min(hw::WQE_LOG_SIZE_MAX);
    let shift = wq.ring.page_shift.min(63);
    let page = pages::page_addr(mem, &wq.ring, off >> shift).ok()?;
    let addr = page.checked_add(off % (1u64 << shift))?;
    let mut b = vec![0u8; 1usize << wq.log_wqe_size.min(hw::WQE_LOG_SIZE_MAX)];
    mem.dma_read(addr, &mut b).ok()?;
    Some(b)
}

/// The completion opcode of send opcode `op` (`WC_SEND` for one that is not valid).
pub(super) fn wc_opcode(op: u8) -> u8 {
    match op {
        hw::WR_RDMA_WRITE | hw::WR_RDMA_WRITE_IMM => hw::WC_RDMA_WRITE,
        hw::WR_RDMA_READ => hw::WC_RDMA_READ,
        hw::WR_ATOMIC_CMP_AND_SWP => hw::WC_COMP_SWAP,
        hw::WR_ATOMIC_FETCH_AND_ADD => hw::WC_FETCH_ADD,
        hw::WR_FLUSH => hw::WC_FLUSH,
        hw::WR_ATOMIC_WRITE => hw::WC_ATOMIC_WRITE,
        hw::WR_BIND_MW => hw::WC_BIND_MW,
        hw::WR_LOCAL_INV => hw::WC_LOCAL_INV,
        _ => hw::WC_SEND,
    }
}

/// A checked send WQE, its local data translated (an atomic's: where the word's old
/// value goes, 8 bytes; a FLUSH or ATOMIC WRITE has none, `len` 0).
pub(super) struct Request {
    pub(super) wqe: hw::SendWqe,
    pub(super) data: Data,
    pub(super) len: u64,
    /// An atomic's operands (an ATOMIC WRITE's: the bytes in `compare_add`).
    pub(super) atomic: Option<hw::AtomicSeg>,
    /// A FLUSH's range and kind.
    pub(super) flush: Option<hw::FlushSeg>,
    /// A UD WQE's address.
    pub(super) ud: Option<hw::UdSeg>,
    /// A `BIND_MW`'s window and where it goes.
    pub(super) bind: Option<hw::BindSeg>,
}

/// The BTH opcode of packet `i` of `n` of a SEND or WRITE message.
pub(super) fn opcode_of(op: u8, i: u64, n: u64) -> u8 {
    let (first, last) = (i == 0, i + 1 == n);
    match (op, first, last) {
        (hw::WR_SEND, true, true) => packet::SEND_ONLY,
        (hw::WR_SEND_IMM, true, true) => packet::SEND_ONLY_IMM,
        (hw::WR_SEND_WITH_INV, true, true) => packet::SEND_ONLY_INV,
        (hw::WR_SEND | hw::WR_SEND_IMM | hw::WR_SEND_WITH_INV, true, false) => packet::SEND_FIRST,
        (hw::WR_SEND | hw::WR_SEND_IMM | hw::WR_SEND_WITH_INV, false, false) => packet::SEND_MIDDLE,
        (hw::WR_SEND, false, true) => packet::SEND_LAST,
        (hw::WR_SEND_IMM, false, true) => packet::SEND_LAST_IMM,
        (hw::WR_SEND_WITH_INV, false, true) => packet::SEND_LAST_INV,
        (hw::WR_RDMA_WRITE, true, true) => packet::WRITE_ONLY,
        (hw::WR_RDMA_WRITE_IMM, true, true) => packet::WRITE_ONLY_IMM,
        (_, true, false) => packet::WRITE_FIRST,
        (_, false, false) => packet::WRITE_MIDDLE,
        (hw::WR_RDMA_WRITE_IMM, false, true) => packet::WRITE_LAST_IMM,
        _ => packet::WRITE_LAST,
    }
}

/// Bytes per packet for an MTU code (1 = 256 .. 5 = 4096).
pub(super) fn mtu_bytes(code: u8) -> u64 {
    128u64 << code.clamp(1, 5)
}

impl Nic {
    /// Runs QP `qpn`'s send queue: in `RTS` its requester ([`super::flights`]) sends what
    /// it may, to another NIC or to this one; in `ERR` flushes it. Packets to this NIC
    /// are taken before this returns, as far as one call's budget goes
    /// ([`Nic::drain_own`]).
    pub(super) fn run_sq(&mut self, qpn: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            self.refused("send queue");
            return;
        }
        let Some(qp) = self.qp(qpn).copied() else {
            return;
        };
        if qp.state == hw::QPS_ERR {
            return self.flush(qpn, mem, irq);
        }
        if qp.qp_type == hw::QP_TYPE_UD {
            self.ud_send(qpn, mem, irq);
            return self.drain_own(mem, irq);
        }
        if !self.is_own(&qp.attr.ah) && self.wire.is_none() {
            return self.no_route(qpn, &qp, mem, irq);
        }
        self.pump(qpn, mem, irq);
        self.drain_own(mem, irq);
    }

    /// A QP whose `dlid` is another NIC's on a NIC without a wire: its head WQE completes
    /// in `WC_RETRY_EXC_ERR` at once (or in the error it was refused with), as if every
    /// retry had timed out; the QP goes to `ERR` and the flush does the rest.
    fn no_route(&mut self, qpn: u32, qp: &Qp, mem: &dyn Dma, irq: &dyn Interrupts) {
        if qp.state != hw::QPS_RTS || qp.sq.ci == qp.sq.pi {
            return;
        }
        let index = qp.sq.ci;
        let (status, op) = match self.fetch_wqe(qpn, qp, index, mem) {
            Ok((_, op)) => (hw::WC_RETRY_EXC_ERR, op),
            Err((status, _, op)) => (status, op),
        };
        self.complete_send(qpn, index, status, op, 0, true, mem, irq);
    }

    /// Checks WQE `raw` of QP `qp`; translates its local SGEs. The error is the status.
    pub(super) fn check(&self, qp: &Qp, raw: &[u8], mem: &dyn Dma) -> Result<Request, (u8, u32)> {
        let op_err = (hw::WC_LOC_QP_OP_ERR, 0);
        let wqe = hw::SendWqe::decode(raw).ok_or(op_err)?;
        let inline = wqe.flags & hw::WQE_FLAG_INLINE != 0;
        let read = wqe.opcode == hw::WR_RDMA_READ;
        let atomic = hw::is_atomic(wqe.opcode);
        let uc = qp.qp_type == hw::QP_TYPE_UC;
        let ud = qp.qp_type == hw::QP_TYPE_UD;
        let send = matches!(wqe.opcode, hw::WR_SEND | hw::WR_SEND_IMM);
        // FLUSH and ATOMIC WRITE (1.8): RC only, no SGEs, no inline data.
        let flush_aw = hw::is_flush_or_atomic_write(wqe.opcode);
        // BIND_MW and LOCAL_INV (1.9): RC and UC, no SGEs, no inline data; SEND with
        // invalidate: RC (UC has no such packet), as a SEND.
        let local = hw::is_local(wqe.opcode);
        let send_inv = wqe.opcode == hw::WR_SEND_WITH_INV;
        if (wqe.opcode > hw::WR_SEND_WITH_INV && !flush_aw)
            || (uc && (read || atomic || flush_aw || send_inv))
            || ((flush_aw || local) && (wqe.num_sge != 0 || inline))
            || (ud && (!send || wqe.remote_addr != 0 || wqe.rkey != 0))
            || wqe.flags & !hw::WQE_FLAGS != 0
            || wqe.num_sge > qp.max_send_sge
            || (inline
                && (read
                    || atomic
                    || wqe.num_sge != 0
                    || wqe.inline_len > u32::from(qp.max_inline)))
            || (!inline && wqe.inline_len != 0)
        {
            return Err(op_err);
        }
        let ud = if ud {
            Some(hw::UdSeg::decode_from(raw).ok_or(op_err)?)
        } else {
            None
        };
        let data_at = hw::sq_wqe_data(qp.qp_type);
        if inline {
            let start = hw::SendWqe::sge_offset_from(data_at, 0);
            let end = start.checked_add(wqe.inline_len as usize).ok_or(op_err)?;
            let bytes = raw.get(start..end).ok_or(op_err)?.to_vec();
            return Ok(Request {
                wqe,
                len: u64::from(wqe.inline_len),
                data: Data::Inline(bytes),
                atomic: None,
                flush: None,
                ud,
                bind: None,
            });
        }
        if local {
            let bind = if wqe.opcode == hw::WR_BIND_MW {
                Some(hw::BindSeg::decode_from(raw).ok_or(op_err)?)
            } else {
                None
            };
            return Ok(Request {
                wqe,
                data: Data::empty(),
                len: 0,
                atomic: None,
                flush: None,
                ud: None,
                bind,
            });
        }
        if flush_aw {
            let (atomic, flush) = if wqe.opcode == hw::WR_ATOMIC_WRITE {
                let seg = hw::AtomicSeg::decode_from(raw).ok_or(op_err)?;
                if seg.swap != 0 {
                    return Err(op_err);
                }
                (Some(seg), None)
            } else {
                (None, Some(hw::FlushSeg::decode_from(raw).ok_or(op_err)?))
            };
            return Ok(Request {
                wqe,
                data: Data::empty(),
                len: 0,
                atomic,
                flush,
                ud: None,
                bind: None,
            });
        }
        // An atomic's segment; its SGEs behind it, which the slot must hold.
        let seg = if atomic {
            let seg = hw::AtomicSeg::decode_from(raw).ok_or(op_err)?;
            if wqe.opcode == hw::WR_ATOMIC_FETCH_AND_ADD && seg.swap != 0 {
                return Err(op_err);
            }
            Some(seg)
        } else {
            None
        };
        let sge_at = |i| {
            if atomic {
                hw::SendWqe::atomic_sge_offset(i)
            } else {
                hw::SendWqe::sge_offset_from(data_at, i)
            }
        };
        let access = if read || atomic {
            hw::ACCESS_LOCAL_WRITE
        } else {
            0
        };
        let mut len = 0u64;
        let mut data = Data::empty();
        for i in 0..usize::from(wqe.num_sge) {
            let sge = hw::Sge::decode_from(raw, sge_at(i)).ok_or(op_err)?;
            if sge.length == 0 {
                continue;
            }
            len += u64::from(sge.length);
            if len > MAX_MSG {
                return Err((hw::WC_LOC_LEN_ERR, 0));
            }
            let p = self
                .translate_kept(
                    mem,
                    sge.lkey,
                    qp.pdn,
                    sge.addr,
                    u64::from(sge.length),
                    access,
                )
                .map_err(|_| (hw::WC_LOC_PROT_ERR, 0))?;
            data.append(p);
        }
        if atomic && len != u64::from(hw::ATOMIC_SIZE) {
            // The old value is 8 bytes: the local buffers hold exactly that.
            return Err((hw::WC_LOC_LEN_ERR, 0));
        }
        Ok(Request {
            wqe,
            data,
            len,
            atomic: seg,
            flush: None,
            ud,
            bind: None,
        })
    }

    /// Reads send WQE `index` of QP `qpn` (a copy of it in `qp`) from its ring and checks it
    /// ([`Self::check`]): the request and its completion opcode, or the error completion's
    /// status, the bytes it had reached and its opcode (a refused WQE is counted and logged,
    /// bounded). Loopback and the wire take their WQEs here alike.
    pub(super) fn fetch_wqe(
        &mut self,
        qpn: u32,
        qp: &Qp,
        index: u16,
        mem: &dyn Dma,
    ) -> Result<(Request, u8), (u8, u32, u8)> {
        let gated = self.gate(mem);
        let Some(raw) = wqe_bytes(&gated, &qp.sq, index) else {
            return Err((hw::WC_LOC_QP_OP_ERR, 0, hw::WC_SEND));
        };
        let op = wc_opcode(raw.first().copied().unwrap_or(0));
        match self.check(qp, &raw, &gated) {
            Ok(r) => Ok((r, op)),
            Err((status, n)) => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadWqe,
                    qpn,
                    index,
                    status,
                    "send WQE refused: error completion"
                );
                Err((status, n, op))
            }
        }
    }
}
