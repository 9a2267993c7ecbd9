//! Memory windows (interface 1.9; soft-RoCE's `rxe_mw.c` is the reference): the NIC's
//! window table, `CMD_ALLOC_MW` and `CMD_DEALLOC_MW`, the local operations `BIND_MW` and
//! `LOCAL_INV` (executed at the head of the send queue: [`super::flights`]), remote access
//! through a window ([`Nic::window_translate`]) and its invalidation by a peer's SEND with
//! invalidate.
//!
//! A window's rkey is `hw::MW_KEY_BIT | index << 8 | key`: its slot and a key byte that a
//! bind sets (the consumer's, `ibv_inc_rkey`), so an rkey given out before a bind stops
//! working after it. A bound window names a range of one MR registration
//! ([`super::mr::MrRef`]): a destroyed or re-registered MR leaves it dead, never pointing
//! at pages the MR no longer has. A type 2 window is bound to the QP that bound it: only
//! requests arriving on that QP may use it, and destroying the QP unbinds it.

use ordma_hw as hw;
use tracing::debug;

use super::data::Data;
use super::mr::MrRef;
use super::qp::Qp;
use super::requester::Request;
use super::tables::Handle;
use super::Nic;
use crate::mem::Dma;

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

/// What a bound window gives remote peers: a range of one MR registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Binding {
    /// The MR (its registration: a destroyed or re-registered MR leaves the window dead).
    pub(super) mr: MrRef,
    /// The MR's key, for the translation.
    pub(super) mr_key: u32,
    /// First virtual address.
    pub(super) addr: u64,
    /// Bytes.
    pub(super) length: u64,
    /// `hw::ACCESS_REMOTE_*`.
    pub(super) access: u32,
    /// Type 2: the QP it is bound to.
    pub(super) qpn: Option<u32>,
}

/// A memory window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mw {
    /// Its PD.
    pub pdn: u32,
    /// `hw::MW_TYPE_1` or `hw::MW_TYPE_2`.
    pub mw_type: u8,
    /// Its key byte now (a bind takes the consumer's).
    pub(super) key: u8,
    /// Its key byte when allocated: `CMD_DEALLOC_MW` names it by the rkey it was given.
    pub(super) alloc_key: u8,
    /// Where it points, while bound.
    pub(super) bound: Option<Binding>,
}

/// The table handle of window rkey `rkey`, if it is a window's.
pub(super) fn handle(rkey: u32) -> Option<Handle> {
    (rkey & hw::MW_KEY_BIT != 0).then(|| Handle::from_key(rkey & !hw::MW_KEY_BIT))
}

impl Nic {
    /// Windows allocated now, for logs and tests.
    pub fn mws_in_use(&self) -> u32 {
        self.mws.in_use()
    }

    /// The window rkey `rkey` names now, if any (its key byte included).
    pub(super) fn mw(&self, rkey: u32) -> Option<&Mw> {
        let h = handle(rkey)?;
        // CAST: the low 8 bits are the key byte by definition.
        self.mws.get_index(h.index).filter(|m| m.key == rkey as u8)
    }

    /// `CMD_ALLOC_MW`: a window of type 1 or 2 on an existing PD; the result is its rkey.
    pub(super) fn alloc_mw(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::AllocMwParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if !matches!(p.mw_type, hw::MW_TYPE_1 | hw::MW_TYPE_2)
            || self.pds.get_index(p.pdn).is_none()
        {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let mw = Mw {
            pdn: p.pdn,
            mw_type: p.mw_type,
            key: 0,
            alloc_key: 0,
            bound: None,
        };
        let Some(h) = self.mws.insert(mw) else {
            return (hw::AQ_NO_RESOURCES, 0);
        };
        let Some(key) = h.to_key().filter(|k| k & hw::MW_KEY_BIT == 0) else {
            self.mws.remove(h);
            return (hw::AQ_NO_RESOURCES, 0);
        };
        if let Some(m) = self.mws.get_index_mut(h.index) {
            m.key = h.key;
            m.alloc_key = h.key;
        }
        let rkey = key | hw::MW_KEY_BIT;
        debug!(
            rkey = format_args!("{rkey:#x}"),
            pdn = p.pdn,
            t = p.mw_type,
            "MW allocated"
        );
        (hw::AQ_OK, u64::from(rkey))
    }

    /// `CMD_DEALLOC_MW`: frees the window the rkey `CMD_ALLOC_MW` gave names (whatever
    /// key byte binds gave it since), bound or not.
    pub(super) fn dealloc_mw(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::KeyParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        // CAST: the low 8 bits are the key byte by definition.
        let Some(h) = handle(p.key).filter(|h| {
            self.mws
                .get_index(h.index)
                .is_some_and(|m| m.alloc_key == p.key as u8)
        }) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        self.mws.remove_index(h.index);
        debug!(rkey = format_args!("{:#x}", p.key), "MW freed");
        (hw::AQ_OK, 0)
    }

    /// Executes local operation `req` (`BIND_MW` or `LOCAL_INV`) of QP `qpn` (`qp`, a copy):
    /// its completion status.
    pub(super) fn execute_local(&mut self, qpn: u32, qp: &Qp, req: &Request) -> u8 {
        let done = match (req.wqe.opcode, req.bind) {
            (hw::WR_BIND_MW, Some(seg)) => {
                self.bind(qpn, qp, &seg).map_err(|()| hw::WC_MW_BIND_ERR)
            }
            (hw::WR_LOCAL_INV, _) => self
                .invalidate(qp.pdn, req.wqe.imm)
                .map_err(|()| hw::WC_LOC_QP_OP_ERR),
            _ => Err(hw::WC_LOC_QP_OP_ERR),
        };
        match done {
            Ok(()) => hw::WC_SUCCESS,
            Err(status) => {
                debug!(
                    qpn,
                    opcode = req.wqe.opcode,
                    status,
                    "local operation refused"
                );
                status
            }
        }
    }

    /// `BIND_MW` (IB's C10-72..75, as `rxe_check_bind_mw`): the window `seg.mw_rkey` names,
    /// of QP `qp`'s PD; `seg.new_rkey` of the same slot; a type 1 window bound or not, a
    /// length of 0 unbinding it; a type 2 window free, bound to a range (and to QP `qpn`).
    /// The MR: of the QP's PD, with `MW_BIND`, `LOCAL_WRITE` if the window gives remote
    /// writes or atomics, holding the range.
    fn bind(&mut self, qpn: u32, qp: &Qp, seg: &hw::BindSeg) -> Result<(), ()> {
        let mw = *self.mw(seg.mw_rkey).ok_or(())?;
        let (h, new) = (
            handle(seg.mw_rkey).ok_or(())?,
            handle(seg.new_rkey).ok_or(())?,
        );
        let remote = hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC;
        if new.index != h.index || mw.pdn != qp.pdn || seg.access & !remote != 0 {
            return Err(());
        }
        let bound = if mw.mw_type == hw::MW_TYPE_1 && seg.length == 0 {
            None
        } else {
            if mw.mw_type == hw::MW_TYPE_2 && (mw.bound.is_some() || seg.length == 0) {
                return Err(());
            }
            let mr = self.mr(seg.mr_lkey).ok_or(())?;
            let r = self.mr_ref(seg.mr_lkey).ok_or(())?;
            let writes = hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC;
            let end = seg.addr.checked_add(seg.length).ok_or(())?;
            let mr_end = mr.iova.checked_add(mr.length).ok_or(())?;
            if mr.pdn != qp.pdn
                || mr.access & hw::ACCESS_MW_BIND == 0
                || (seg.access & writes != 0 && mr.access & hw::ACCESS_LOCAL_WRITE == 0)
                || seg.addr < mr.iova
                || end > mr_end
            {
                return Err(());
            }
            Some(Binding {
                mr: r,
                mr_key: seg.mr_lkey,
                addr: seg.addr,
                length: seg.length,
                access: seg.access,
                qpn: (mw.mw_type == hw::MW_TYPE_2).then_some(qpn),
            })
        };
        let m = self.mws.get_index_mut(h.index).ok_or(())?;
        // CAST: the low 8 bits are the key byte by definition.
        m.key = seg.new_rkey as u8;
        m.bound = bound;
        debug!(
            rkey = format_args!("{:#x}", seg.new_rkey),
            qpn,
            bound = bound.is_some(),
            "MW bound"
        );
        Ok(())
    }

    /// Invalidates (unbinds) the type 2 window `rkey` names, bound, of PD `pdn`: a
    /// `LOCAL_INV`, or a SEND with invalidate arriving on a QP of that PD.
    pub(super) fn invalidate(&mut self, pdn: u32, rkey: u32) -> Result<(), ()> {
        let mw = *self.mw(rkey).ok_or(())?;
        if mw.mw_type != hw::MW_TYPE_2 || mw.bound.is_none() || mw.pdn != pdn {
            return Err(());
        }
        let h = handle(rkey).ok_or(())?;
        if let Some(m) = self.mws.get_index_mut(h.index) {
            m.bound = None;
        }
        debug!(rkey = format_args!("{rkey:#x}"), "MW invalidated");
        Ok(())
    }

    /// QP `qpn` is gone: the type 2 windows bound to it are unbound (its number, reused,
    /// must not inherit them).
    pub(super) fn unbind_windows_of(&mut self, qpn: u32) {
        for m in self.mws.iter_mut() {
            if m.bound.is_some_and(|b| b.qpn == Some(qpn)) {
                m.bound = None;
            }
        }
    }

    /// Translates `len` bytes at `va` through window rkey `rkey` for a request arriving
    /// on QP `qpn` (of PD `pdn`) that wants `access` (`hw::ACCESS_REMOTE_*`): the window
    /// bound, of the PD, a type 2 window bound to this QP, its access and range; then its
    /// MR registration, still the same, translates (remote writes and atomics as local
    /// writes, which the bind checked the MR allows).
    #[allow(clippy::too_many_arguments, reason = "a request's fields")]
    pub(super) fn window_translate(
        &self,
        mem: &dyn Dma,
        qpn: u32,
        pdn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        access: u32,
    ) -> Option<Data> {
        let mw = self.mw(rkey)?;
        let b = mw.bound?;
        let end = va.checked_add(len)?;
        if mw.pdn != pdn
            || b.qpn.is_some_and(|q| q != qpn)
            || access & !b.access != 0
            || va < b.addr
            || end > b.addr.checked_add(b.length)?
            || !self.mr_live(b.mr)
        {
            return None;
        }
        let writes = hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC;
        let local = if access & writes != 0 {
            hw::ACCESS_LOCAL_WRITE
        } else {
            0
        };
        self.translate_kept(mem, b.mr_key, pdn, va, len, local).ok()
    }
}
