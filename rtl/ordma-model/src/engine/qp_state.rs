//! `CMD_MODIFY_QP`: the IB QP state machine, held and enforced by the NIC.
//!
//! The NIC does not trust the driver: it checks the transition and the attribute mask
//! against the RC or UC table of Linux's `ib_modify_qp_is_ok` ([`hw::modify_ok`]), then every
//! attribute value the mask names ([`hw::qp_values_ok`]), and only then changes anything. A bad modify is
//! `AQ_BAD_PARAM` and leaves the QP as it was. Moving to `RESET` forgets the attributes and
//! the queue indices. In `SQD` the requester starts no WQE and finishes those in flight
//! ([`super::flights`]); reaching `SQD` with `en_sqd_async_notify` posts
//! `EVENT_QP_SQ_DRAINED` once none is left in flight (at once if none was).

use ordma_hw as hw;
use tracing::debug;

use super::qp::qp_index;
use super::Nic;
use crate::mem::Dma;

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

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
    if has(hw::QP_ATTR_QKEY) {
        to.qkey = from.qkey;
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
        let port = self.port_attrs().shape();
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
        let ok = hw::modify_ok(qp.qp_type, cur, next, mask)
            && mask & hw::QP_ATTR_UNSUPPORTED == 0
            && (mask & hw::QP_ATTR_CUR_STATE == 0 || a.cur_qp_state == cur)
            && hw::qp_values_ok(mask, &a, &port);
        if !ok {
            debug!(qpn = p.qpn, cur, next, mask, "QP modify refused");
            return (hw::AQ_BAD_PARAM, 0);
        }
        if next == hw::QPS_RESET {
            qp.attr = hw::QpAttr::default();
            qp.dp = super::qp::DataPath::default();
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
        if next == hw::QPS_ERR && cur != hw::QPS_ERR && qp.srqn.is_some() {
            // Flushed after the command, then `QP_LAST_WQE_REACHED` (`run_data_path`).
            qp.dp.last_wqe_due = true;
        }
        if cur == hw::QPS_RTS && next == hw::QPS_SQD {
            qp.dp.sqd_notify =
                mask & hw::QP_ATTR_EN_SQD_ASYNC_NOTIFY != 0 && a.en_sqd_async_notify != 0;
        } else if next != hw::QPS_SQD {
            qp.dp.sqd_notify = false;
        }
        debug!(qpn = p.qpn, cur, next, "QP modified");
        if next == hw::QPS_RESET {
            self.remote_forget(p.qpn);
        }
        if next == hw::QPS_SQD && !self.sq_in_flight(p.qpn) {
            self.sq_drained(p.qpn, None);
        }
        (hw::AQ_OK, 0)
    }
}
