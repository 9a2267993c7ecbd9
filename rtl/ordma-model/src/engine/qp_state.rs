//! `CMD_MODIFY_QP`: the IB QP state machine, held and enforced by the NIC.
//!
//! The NIC does not trust the driver: it checks the transition and the attribute mask
//! against the RC table of Linux's `ib_modify_qp_is_ok` ([`hw::rc_modify_ok`]), then every
//! attribute value the mask names, and only then changes anything. A bad modify is
//! `AQ_BAD_PARAM` and leaves the QP as it was. Moving to `RESET` forgets the attributes and
//! the queue indices; reaching `SQD` with `en_sqd_async_notify` posts `EVENT_QP_SQ_DRAINED`
//! (at once: nothing is in flight before the data path exists).

use ordma_hw as hw;
use tracing::debug;

use super::qp::qp_index;
use super::Nic;
use crate::mem::Dma;

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

/// Attributes the NIC does not support although the table allows them: alternate paths
/// (APM) and rate limits.
const UNSUPPORTED: u32 = hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_RATE_LIMIT;

/// Largest `enum ib_rate` value.
const MAX_STATIC_RATE: u8 = 25;

/// Whether the values of every attribute `mask` names are in range for this NIC (one
/// port, one PKey, one GID, LMC 0, MTU up to `max_mtu`).
pub fn values_ok(mask: u32, a: &hw::QpAttr, max_mtu: u8) -> bool {
    let has = |bit: u32| mask & bit != 0;
    let psn = |v: u32| v < 1 << 24;
    let ah = &a.ah;
    let ah_ok = ah.port_num == 1
        && (1..0xc000).contains(&ah.dlid)
        && ah.sl <= 15
        && ah.src_path_bits == 0
        && ah.static_rate <= MAX_STATIC_RATE
        && ah.ah_flags & !hw::AH_FLAG_GRH == 0
        && (ah.ah_flags & hw::AH_FLAG_GRH == 0 || (ah.sgid_index == 0 && ah.flow_label < 1 << 20));
    let checks = [
        (hw::QP_ATTR_STATE, a.qp_state <= hw::QPS_ERR),
        (hw::QP_ATTR_CUR_STATE, a.cur_qp_state <= hw::QPS_ERR),
        (hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY, a.en_sqd_async_notify <= 1),
        (
            hw::QP_ATTR_ACCESS_FLAGS,
            a.qp_access_flags & !hw::ACCESS_ALL == 0,
        ),
        (hw::QP_ATTR_PKEY_INDEX, a.pkey_index == 0),
        (hw::QP_ATTR_PORT, a.port_num == 1),
        (hw::QP_ATTR_AV, ah_ok),
        (hw::QP_ATTR_PATH_MTU, (1..=max_mtu).contains(&a.path_mtu)),
        (hw::QP_ATTR_TIMEOUT, a.timeout <= 31),
        (hw::QP_ATTR_RETRY_CNT, a.retry_cnt <= 7),
        (hw::QP_ATTR_RNR_RETRY, a.rnr_retry <= 7),
        (hw::QP_ATTR_RQ_PSN, psn(a.rq_psn)),
        (
            hw::QP_ATTR_MAX_QP_RD_ATOMIC,
            a.max_rd_atomic <= hw::QP_MAX_RD_ATOMIC,
        ),
        (hw::QP_ATTR_MIN_RNR_TIMER, a.min_rnr_timer <= 31),
        (hw::QP_ATTR_SQ_PSN, psn(a.sq_psn)),
        (
            hw::QP_ATTR_MAX_DEST_RD_ATOMIC,
            a.max_dest_rd_atomic <= hw::QP_MAX_RD_ATOMIC,
        ),
        (hw::QP_ATTR_PATH_MIG_STATE, a.path_mig_state == 0),
        (hw::QP_ATTR_DEST_QPN, psn(a.dest_qp_num)),
    ];
    checks.iter().all(|&(bit, ok)| !has(bit) || ok) && a.sq_draining == 0
}

/// Copies the attributes `mask` names from `from` into `to`.
fn apply(mask: u32, from: &hw::QpAttr, to: &mut hw::QpAttr) {
    let has = |bit: u32| mask & bit != 0;
    if has(hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY) {
        to.en_sqd_async_notify = from.en_sqd_async_notify;
    }
    if has(hw::QP_ATTR_ACCESS_FLAGS) {
        to.qp_access_flags = from.qp_access_flags;
    }
    if has(hw::QP_ATTR_PKEY_INDEX) {
        to.pkey_index = from.pkey_index;
    }
    if has(hw::QP_ATTR_PORT) {
        to.port_num = from.port_num;
    }
    if has(hw::QP_ATTR_AV) {
        to.ah = from.ah;
    }
    if has(hw::QP_ATTR_PATH_MTU) {
        to.path_mtu = from.path_mtu;
    }
    if has(hw::QP_ATTR_TIMEOUT) {
        to.timeout = from.timeout;
    }
    if has(hw::QP_ATTR_RETRY_CNT) {
        to.retry_cnt = from.retry_cnt;
    }
    if has(hw::QP_ATTR_RNR_RETRY) {
        to.rnr_retry = from.rnr_retry;
    }
    if has(hw::QP_ATTR_RQ_PSN) {
        to.rq_psn = from.rq_psn;
    }
    if has(hw::QP_ATTR_MAX_QP_RD_ATOMIC) {
        to.max_rd_atomic = from.max_rd_atomic;
    }
    if has(hw::QP_ATTR_MIN_RNR_TIMER) {
        to.min_rnr_timer = from.min_rnr_timer;
    }
    if has(hw::QP_ATTR_SQ_PSN) {
        to.sq_psn = from.sq_psn;
    }
    if has(hw::QP_ATTR_MAX_DEST_RD_ATOMIC) {
        to.max_dest_rd_atomic = from.max_dest_rd_atomic;
    }
    if has(hw::QP_ATTR_PATH_MIG_STATE) {
        to.path_mig_state = from.path_mig_state;
    }
    if has(hw::QP_ATTR_DEST_QPN) {
        to.dest_qp_num = from.dest_qp_num;
    }
}

impl Nic {
    /// `CMD_MODIFY_QP`: one checked transition of the QP's state machine.
    pub(super) fn modify_qp(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::ModifyQpParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(index) = qp_index(p.qpn).filter(|&i| self.qps.get_index(i).is_some()) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if (p.attr_len as usize) < hw::QP_ATTR_SIZE {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let mut raw = [0u8; hw::QP_ATTR_SIZE];
        if mem.dma_read(p.attr_addr, &mut raw).is_err() {
            return (hw::AQ_BAD_ADDRESS, 0);
        }
        let Some(a) = hw::QpAttr::decode(&raw) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let max_mtu = self.port_attrs().active_mtu;
        let Some(qp) = self.qps.get_index_mut(index) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let mask = p.attr_mask;
        let cur = qp.state;
        let next = if mask & hw::QP_ATTR_STATE != 0 {
            a.qp_state
        } else {
            cur
        };
        let ok = hw::rc_modify_ok(cur, next, mask)
            && mask & UNSUPPORTED == 0
            && (mask & hw::QP_ATTR_CUR_STATE == 0 || a.cur_qp_state == cur)
            && values_ok(mask, &a, max_mtu);
        if !ok {
            debug!(qpn = p.qpn, cur, next, mask, "QP modify refused");
            return (hw::AQ_BAD_PARAM, 0);
        }
        if next == hw::QPS_RESET {
            qp.attr = hw::QpAttr::default();
            qp.sq.pi = 0;
            qp.sq.ci = 0;
            if let Some(rq) = qp.rq.as_mut() {
                rq.pi = 0;
                rq.ci = 0;
            }
        } else {
            apply(mask, &a, &mut qp.attr);
        }
        qp.state = next;
        let drained = cur == hw::QPS_RTS
            && next == hw::QPS_SQD
            && mask & hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY != 0
            && a.en_sqd_async_notify != 0;
        debug!(qpn = p.qpn, cur, next, "QP modified");
        if drained {
            self.queue_event(hw::EVENT_QP_SQ_DRAINED, p.qpn, 0);
        }
        (hw::AQ_OK, 0)
    }
}
