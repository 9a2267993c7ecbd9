// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (RC, UC and UD): send and receive rings in the user's memory (or, for RC and
//! UD, an SRQ of the same context instead of a receive ring), pinned here and given to the NIC with
//! `CREATE_QP`; the IB state machine, checked here by ib_core's own table and
//! the NIC's value rules before `MODIFY_QP`, and held by the NIC (`hardware.md`, "Queue
//! pairs").

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
};

use crate::{
    cq::Cq, hw, ib, nic::Nic, pages::NicMemory, pd::Pd, srq::Srq, uapi, ucontext::Ucontext,
};

// The NIC's attribute mask is ib_core's (`IB_QP_*`): it is passed through unchanged.
const _: () = {
    assert!(hw::QP_ATTR_STATE == ib::QpAttrMask::STATE);
    assert!(hw::QP_ATTR_CUR_STATE == ib::QpAttrMask::CUR_STATE);
    assert!(hw::QP_ATTR_AV == ib::QpAttrMask::AV);
};

/// The most inline bytes a send WQE of a QP of type `qp_type` (`hw::QP_TYPE_*`) holds: the
/// largest WQE less its segments.
const fn max_inline(qp_type: u8) -> u32 {
    (1 << hw::WQE_LOG_SIZE_MAX) - hw::sq_wqe_data(qp_type)
}

/// The device limits a QP is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpLimits {
    /// Work requests per queue.
    pub(crate) max_wr: u32,
    /// SGEs per work request.
    pub(crate) max_sge: u32,
    /// The port: the largest path MTU, its link layer and GID table (an address's rules).
    pub(crate) port: hw::PortShape,
    /// Whether the NIC executes FLUSH (interface 1.8): a QP's `FLUSH_GLOBAL` permission
    /// goes to it.
    pub(crate) flush: bool,
}

/// A QP on the NIC; dropping it destroys it there.
#[pin_data(PinnedDrop)]
pub(crate) struct Qp<'bound> {
    nic: Arc<Nic<'bound>>,
    qpn: u32,
    /// The doorbell page it takes its SQ and RQ doorbells from.
    db_page: u32,
    /// RC, UC or UD: the state table its modifies follow.
    qp_type: ib::QpType,
    caps: ib::QpCaps,
    port: hw::PortShape,
    /// [`QpLimits::flush`].
    flush: bool,
    /// The state as last set or queried (the NIC may have moved it to `ERR` since); the
    /// lock serialises modifies.
    #[pin]
    state: Mutex<u8>,
    /// `None` only while being dropped.
    memory: Option<NicMemory>,
}

/// One work queue as the provider sized it: checked, then described to the NIC.
struct Queue {
    log_depth: u8,
    log_wqe_size: u8,
    addr: u64,
}

impl Queue {
    /// Checks that the queue holds `wr` work requests (at most `limits.max_wr`) of at
    /// least `wqe_min` bytes, in sizes the NIC has.
    fn check(&self, wr: u32, wqe_min: u32, limits: &QpLimits) -> Result {
        let depth = 1u32.checked_shl(self.log_depth.into()).ok_or(EINVAL)?;
        let wqe = 1u32.checked_shl(self.log_wqe_size.into()).ok_or(EINVAL)?;
        if self.log_depth > hw::MAX_QUEUE_LOG_DEPTH
            || depth < wr.max(1)
            || depth > limits.max_wr
            || !(hw::WQE_LOG_SIZE_MIN..=hw::WQE_LOG_SIZE_MAX).contains(&self.log_wqe_size)
            || wqe < wqe_min
        {
            return Err(EINVAL);
        }
        Ok(())
    }

    fn bytes(&self) -> u64 {
        1u64 << (self.log_depth + self.log_wqe_size)
    }

    fn wqe_size(&self) -> u32 {
        1 << self.log_wqe_size
    }
}

/// The SGEs a WQE of `wqe` bytes holds after `base` bytes of segments, at most `max`.
fn sges(wqe: u32, base: u32, max: u32) -> u32 {
    ((wqe - base) / hw::WQE_SGE_SIZE).min(max)
}

impl<'bound> Qp<'bound> {
    /// Checks the request (type, capabilities against `limits`, the provider's rings,
    /// `uapi.md` CREATE_QP), pins the rings, creates the QP on the NIC (in `RESET`, on
    /// `srq` if given: then without a receive ring, its receive capabilities ignored) and
    /// answers with its number; returns the QP's initialiser.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for a type other than RC, UC and UD, an XRC domain or RSS table, a UC QP
    /// on an SRQ, create flags, unknown `comp_mask` bits; `EINVAL` for capabilities beyond the
    /// device's or the rings' (`uapi.md`), a misaligned ring, a receive ring beside an SRQ,
    /// an SRQ of another context; the pinning's errors; `ENOMEM` when the NIC has no free
    /// QP; `EIO`,
    /// `ETIMEDOUT` from a dead or silent NIC.
    #[expect(clippy::too_many_arguments)]
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        uctx: &Ucontext<'bound>,
        pd: &Pd<'bound>,
        send_cq: &Cq<'bound>,
        recv_cq: &Cq<'bound>,
        srq: Option<&Srq<'bound>>,
        init: &ib::QpInit,
        limits: &QpLimits,
        pages: &ib::UserPages<'_>,
        udata: &ib::Udata<'_>,
    ) -> Result<impl PinInit<Self, Error> + 'bound> {
        let qp_type = match init.qp_type {
            ib::QpType::Rc => hw::QP_TYPE_RC,
            ib::QpType::Uc => hw::QP_TYPE_UC,
            ib::QpType::Ud => hw::QP_TYPE_UD,
            _ => return Err(EOPNOTSUPP),
        };
        if init.other_receive
            || init.has_srq != srq.is_some()
            || (srq.is_some() && qp_type == hw::QP_TYPE_UC)
            || init.create_flags != 0
        {
            return Err(EOPNOTSUPP);
        }
        let cmd: uapi::CreateQpCmd = udata.read()?;
        ib::check_comp_mask(cmd.comp_mask.into(), 0)?;
        if srq.is_some_and(|s| s.db_page() != uctx.db_page()) {
            return Err(EINVAL);
        }
        // A QP on an SRQ has no receive queue of its own: what it asks for one is ignored
        // (as mlx5 and rxe do) and answered 0.
        let mut want = init.caps;
        if srq.is_some() {
            want.max_recv_wr = 0;
            want.max_recv_sge = 0;
        }
        let want = &want;
        if want.max_send_wr > limits.max_wr
            || want.max_recv_wr > limits.max_wr
            || want.max_send_sge > limits.max_sge
            || want.max_recv_sge > limits.max_sge
            || want.max_inline_data > max_inline(qp_type)
        {
            return Err(EINVAL);
        }
        let sq = Queue {
            log_depth: cmd.sq_log_depth,
            log_wqe_size: cmd.sq_log_wqe_size,
            addr: cmd.sq_buf_addr,
        };
        let base = hw::sq_wqe_data(qp_type);
        let sq_wqe_min =
            (base + hw::WQE_SGE_SIZE * want.max_send_sge).max(base + want.max_inline_data);
        sq.check(want.max_send_wr, sq_wqe_min, limits)?;
        let rq = Queue {
            log_depth: cmd.rq_log_depth,
            log_wqe_size: cmd.rq_log_wqe_size,
            addr: cmd.rq_buf_addr,
        };
        let has_rq = want.max_recv_wr > 0;
        if has_rq {
            rq.check(
                want.max_recv_wr,
                hw::RQ_WQE_BASE + hw::WQE_SGE_SIZE * want.max_recv_sge,
                limits,
            )?;
        } else if rq.log_depth != 0 || rq.log_wqe_size != 0 || rq.addr != 0 {
            return Err(EINVAL);
        }
        let caps = ib::QpCaps {
            max_send_wr: 1 << sq.log_depth,
            max_recv_wr: if has_rq { 1 << rq.log_depth } else { 0 },
            max_send_sge: sges(sq.wqe_size(), base, limits.max_sge),
            max_recv_sge: if has_rq {
                sges(rq.wqe_size(), hw::RQ_WQE_BASE, limits.max_sge)
            } else {
                0
            },
            max_inline_data: sq.wqe_size() - base,
        };
        let dev = nic.pdev.as_ref();
        let mut memory = NicMemory::default();
        let sq_ring = memory.add_ring(dev, pages, sq.addr, sq.bytes())?;
        let rq_ring = if has_rq {
            memory.add_ring(dev, pages, rq.addr, rq.bytes())?
        } else {
            hw::PageList::default()
        };
        let small = |v: u32| u8::try_from(v).map_err(|_| EINVAL);
        let mut params = hw::CreateQpParams {
            qp_type,
            db_page: u16::try_from(uctx.db_page()).map_err(|_| EINVAL)?,
            max_send_sge: small(caps.max_send_sge)?,
            max_recv_sge: small(caps.max_recv_sge)?,
            pdn: pd.pdn(),
            send_cqn: send_cq.cqn(),
            recv_cqn: recv_cq.cqn(),
            max_inline: u16::try_from(caps.max_inline_data).map_err(|_| EINVAL)?,
            flags: 0,
            sq: hw::WorkQueue {
                log_depth: sq.log_depth,
                log_wqe_size: sq.log_wqe_size,
                ring: sq_ring,
            },
            rq: if has_rq {
                hw::WorkQueue {
                    log_depth: rq.log_depth,
                    log_wqe_size: rq.log_wqe_size,
                    ring: rq_ring,
                }
            } else {
                hw::WorkQueue::default()
            },
        };
        if let Some(s) = srq {
            params.flags = hw::QP_FLAG_SRQ;
            params.rq.ring.root = s.srqn().into();
        }
        let (qpn, memory) =
            nic.create_reaching(memory, Some(uctx.db_page()), || nic.create_qp(&params))?;
        if let Err(e) = udata.respond(&uapi::CreateQpResp { comp_mask: 0, qpn }) {
            // Not a `Qp` yet: destroy it on the NIC here.
            nic.destroy_reaching("QP", qpn, Some(memory), Some(uctx.db_page()), || {
                nic.destroy_qp(qpn)
            });
            return Err(e);
        }
        dev_dbg!(
            nic.pdev,
            "QP {qpn}: SQ {} x {} bytes, RQ {} x {} bytes, doorbell page {}\n",
            caps.max_send_wr,
            sq.wqe_size(),
            caps.max_recv_wr,
            if has_rq { rq.wqe_size() } else { 0 },
            uctx.db_page()
        );
        // Nothing below fails: the QP is never dropped half made.
        let (nic, port, flush) = (nic.clone(), limits.port, limits.flush);
        let db_page = uctx.db_page();
        let qp_type = init.qp_type;
        Ok(try_pin_init!(Self {
            nic,
            qpn,
            db_page,
            qp_type,
            caps,
            port,
            flush,
            state <- new_mutex!(hw::QPS_RESET, "ordma_qp_state"),
            memory: Some(memory),
        }? Error))
    }

    /// One modify: ib_core's transition table (`ib_modify_qp_is_ok`) for the state the QP is
    /// in (or the caller's `CUR_STATE`), the NIC's value rules, then `MODIFY_QP`.
    ///
    /// The NIC moves a QP to `ERR` on its own (an error completion, a QP event), from any
    /// state but `RESET`, so outside `RESET` the state is asked of the NIC first
    /// (`QUERY_QP`): a transition invalid from `ERR` is then `EINVAL` from the table, not a
    /// refusal by the NIC. If the NIC still refuses, because the QP left its state between
    /// the two commands, that is `EINVAL` too.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an invalid transition, mask or value (`hardware.md`, "The QP state
    /// machine"), an alternate path or rate limit (not supported); `EOPNOTSUPP` for driver
    /// input; `EIO`, `ETIMEDOUT` from a dead, silent or disagreeing NIC.
    pub(crate) fn modify(
        &self,
        attr: &ib::QpAttr,
        mask: ib::QpAttrMask,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let bits = mask.bits();
        let mut state = self.state.lock();
        if *state != hw::QPS_RESET {
            *state = self.nic.query_qp(self.qpn)?.qp_state;
        }
        let cur = if mask.has(ib::QpAttrMask::CUR_STATE) {
            attr.cur_qp_state
        } else {
            *state
        };
        let next = if mask.has(ib::QpAttrMask::STATE) {
            attr.qp_state
        } else {
            cur
        };
        let a = to_hw(attr, self.flush);
        // The transition table is ib_core's for the QP's type; the NIC checks its copy
        // (`modify_ok`) again.
        if !ib::modify_qp_is_ok(cur, next, self.qp_type, mask)
            || bits & hw::QP_ATTR_UNSUPPORTED != 0
            || cur != *state
            || !hw::qp_values_ok(bits, &a, &self.port)
        {
            return Err(EINVAL);
        }
        if let Err(e) = self.nic.modify_qp(self.qpn, bits, &a) {
            // Refused: did the QP leave `cur` meanwhile?
            if e == EIO && !self.nic.is_dead() {
                if let Ok(now) = self.nic.query_qp(self.qpn) {
                    *state = now.qp_state;
                    if now.qp_state != cur {
                        return Err(EINVAL);
                    }
                }
            }
            return Err(e);
        }
        *state = next;
        Ok(())
    }

    /// The QP's attributes as the NIC holds them, and its capabilities.
    pub(crate) fn query(&self) -> Result<(ib::QpAttr, ib::QpCaps)> {
        let mut state = self.state.lock();
        let a = self.nic.query_qp(self.qpn)?;
        *state = a.qp_state;
        Ok((from_hw(&a, &self.port), self.caps))
    }
}

impl ib::QpObject for Qp<'_> {
    fn qp_num(&self) -> u32 {
        self.qpn
    }

    fn caps(&self) -> ib::QpCaps {
        self.caps
    }
}

#[pinned_drop]
impl PinnedDrop for Qp<'_> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        let (nic, qpn, db_page) = (&*this.nic, *this.qpn, *this.db_page);
        nic.destroy_reaching("QP", qpn, this.memory.take(), Some(db_page), || {
            nic.destroy_qp(qpn)
        });
    }
}

/// A byte of the NIC's attributes: an out-of-range value becomes one the NIC's rules
/// refuse (if the mask names it).
fn byte(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

/// ib_core's attributes in the NIC's format; `flush`: [`QpLimits::flush`].
fn to_hw(a: &ib::QpAttr, flush: bool) -> hw::QpAttr {
    // The IB access bits are the NIC's. A FLUSH permission the NIC cannot honour is
    // dropped (as mlx5 does with what it does not implement; rdma-core's tests ask for
    // both on every RC QP): to the persistence domain, which it has none of, and before
    // 1.8 any (a remote FLUSH is then an opcode it refuses).
    let dropped = if flush {
        ib::Access::FLUSH_PERSISTENT
    } else {
        ib::Access::FLUSH
    };
    hw::QpAttr {
        qp_state: a.qp_state,
        cur_qp_state: a.cur_qp_state,
        path_mtu: a.path_mtu,
        path_mig_state: a.path_mig_state,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags & !dropped.bits(),
        pkey_index: a.pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: 0,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: byte(a.port_num),
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rate_limit: a.rate_limit,
        ah: crate::ah::av(&a.ah),
    }
}

/// The NIC's attributes in ib_core's terms (on an Ethernet port, a RoCE address).
fn from_hw(a: &hw::QpAttr, port: &hw::PortShape) -> ib::QpAttr {
    let ah = &a.ah;
    ib::QpAttr {
        qp_state: a.qp_state,
        cur_qp_state: a.cur_qp_state,
        path_mtu: a.path_mtu,
        path_mig_state: a.path_mig_state,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qp_num,
        qp_access_flags: a.qp_access_flags,
        pkey_index: a.pkey_index,
        en_sqd_async_notify: a.en_sqd_async_notify,
        sq_draining: a.sq_draining,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port_num.into(),
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rate_limit: a.rate_limit,
        ah: ib::AhAttr {
            dlid: ah.dlid,
            sl: ah.sl,
            src_path_bits: ah.src_path_bits,
            static_rate: ah.static_rate,
            port_num: ah.port_num.into(),
            grh: (ah.ah_flags & hw::AH_FLAG_GRH != 0).then_some(ib::Grh {
                dgid: ah.dgid,
                flow_label: ah.flow_label,
                sgid_index: ah.sgid_index,
                hop_limit: ah.hop_limit,
                traffic_class: ah.traffic_class,
            }),
            dmac: (port.link_layer == hw::LINK_LAYER_ETHERNET).then_some(ah.dmac),
        },
    }
}
