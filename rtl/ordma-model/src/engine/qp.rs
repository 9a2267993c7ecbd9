//! Queue pairs: `CMD_CREATE_QP`, `CMD_QUERY_QP`, `CMD_DESTROY_QP` (`CMD_MODIFY_QP` and the
//! state machine are in [`super::qp_state`]).
//!
//! A QP's send and receive queues are rings of WQEs in host memory (page lists). The QP is
//! bound to the doorbell page of the context that created it, and so are its CQs: the NIC
//! takes its doorbells from that page only. QP numbers are table index + `QPN_FIRST` (0 and
//! 1 are the IB special QPs'). RC, (1.2) UC and (1.3) UD; an RC or UD QP may receive
//! through an SRQ of its page (`hw::QP_FLAG_SRQ`, [`super::srq`]) instead of a receive queue
//! of its own.

use ordma_hw as hw;
use tracing::debug;

use super::pages;
use super::Nic;
use crate::mem::Dma;

/// One work queue of a QP.
#[derive(Clone, Copy, Debug)]
pub struct WorkQueue {
    /// log2 of its depth in WQEs.
    pub log_depth: u8,
    /// log2 of its WQE size.
    pub log_wqe_size: u8,
    /// The ring's pages.
    pub ring: hw::PageList,
    /// The producer index of the last doorbell (free-running, mod 2^16).
    pub(super) pi: u16,
    /// WQEs the NIC has consumed (free-running, mod 2^16).
    pub(super) ci: u16,
}

impl WorkQueue {
    /// An empty queue of `q`'s shape.
    pub(super) fn new(q: &hw::WorkQueue) -> Self {
        Self {
            log_depth: q.log_depth,
            log_wqe_size: q.log_wqe_size,
            ring: q.ring,
            pi: 0,
            ci: 0,
        }
    }

    /// Its depth in WQEs.
    pub fn depth(&self) -> u16 {
        1u16.checked_shl(u32::from(self.log_depth)).unwrap_or(0)
    }

    /// The producer index of the last accepted doorbell.
    pub fn producer(&self) -> u16 {
        self.pi
    }
}

/// A queue pair on the NIC.
#[derive(Clone, Copy, Debug)]
pub struct Qp {
    /// `hw::QP_TYPE_*`.
    pub qp_type: u8,
    /// The doorbell page (user context) that owns it.
    pub db_page: u32,
    /// Its PD.
    pub pdn: u32,
    /// The CQ of its send completions.
    pub send_cqn: u32,
    /// The CQ of its receive completions.
    pub recv_cqn: u32,
    /// Most SGEs per send WR.
    pub max_send_sge: u8,
    /// Most SGEs per receive WR.
    pub max_recv_sge: u8,
    /// Most inline bytes per send WR.
    pub max_inline: u16,
    /// The send queue.
    pub sq: WorkQueue,
    /// The receive queue, if it has one.
    pub rq: Option<WorkQueue>,
    /// The SRQ it receives through instead (`hw::QP_FLAG_SRQ`), if any.
    pub srqn: Option<u32>,
    /// `hw::QPS_*`.
    pub(super) state: u8,
    /// The attributes set so far (`qp_state` and `cur_qp_state` unused: `state` is).
    pub(super) attr: hw::QpAttr,
    /// The data path's state of this QP (PSN-free parts; the PSNs are in `attr`).
    pub(super) dp: DataPath,
}

/// What the data path keeps per QP besides the attributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct DataPath {
    /// Requester: the head WQE got an RNR NAK; it is sent again after this instant (or
    /// when the responder's RQ gets a doorbell).
    pub(super) rnr_wait: Option<std::time::Instant>,
    /// Requester: RNR retries left for the head WQE (`None`: not NAKed yet).
    pub(super) rnr_left: Option<u8>,
    /// Responder: the RDMA WRITE being received: next virtual address, rkey, bytes left,
    /// and the message's length.
    pub(super) write: Option<(u64, u32, u64, u32)>,
    /// Responder: messages completed, mod 2^24 (the AETH's MSN).
    pub(super) msn: u32,
    /// Requester: in `SQD`, `QP_SQ_DRAINED` is due once no WQE is in flight.
    pub(super) sqd_notify: bool,
    /// Responder: `QP_COMM_EST` was raised.
    pub(super) comm_est: bool,
    /// A QP attached to an SRQ entered `ERR`: `QP_LAST_WQE_REACHED` is due after its
    /// flush.
    pub(super) last_wqe_due: bool,
}

impl Qp {
    /// Its state (`hw::QPS_*`).
    pub fn state(&self) -> u8 {
        self.state
    }
}

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

/// The table index of QP number `qpn`, if it can be one.
pub(super) fn qp_index(qpn: u32) -> Option<u32> {
    qpn.checked_sub(hw::QPN_FIRST)
}

impl Nic {
    /// QPs existing now, for logs and tests.
    pub fn qps_in_use(&self) -> u32 {
        self.qps.in_use()
    }

    /// QP `qpn`, if it exists.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get_index(qp_index(qpn)?)
    }

    /// Whether `q` is a work queue the NIC takes, with WQEs of at least `need` bytes.
    fn wq_ok(&self, q: &hw::WorkQueue, need: u32) -> bool {
        let depth_ok = q.log_depth <= hw::MAX_QUEUE_LOG_DEPTH
            && (1u32 << q.log_depth) <= self.config.attrs.max_qp_wr;
        let wqe_ok = (hw::WQE_LOG_SIZE_MIN..=hw::WQE_LOG_SIZE_MAX).contains(&q.log_wqe_size)
            && (1u32 << q.log_wqe_size) >= need;
        let bytes = 1u64 << (u32::from(q.log_depth) + u32::from(q.log_wqe_size)).min(32);
        depth_ok && wqe_ok && self.page_list_ok(&q.ring, bytes)
    }

    /// `CMD_CREATE_QP`: the result is the QPN.
    pub(super) fn create_qp(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::CreateQpParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let page = u32::from(p.db_page);
        let cq_ok = |cqn: u32| self.cqs.get_index(cqn).is_some_and(|cq| cq.db_page == page);
        let max_sge = self.config.attrs.max_sge;
        let base = hw::sq_wqe_data(p.qp_type);
        let sq_need = (base + hw::WQE_SGE_SIZE * u32::from(p.max_send_sge))
            .max(base + u32::from(p.max_inline));
        let rq_need = hw::RQ_WQE_BASE + hw::WQE_SGE_SIZE * u32::from(p.max_recv_sge);
        let srqn = p.srqn();
        let has_rq = srqn.is_none() && p.rq != hw::WorkQueue::default();
        let rq_ok = match (p.flags, srqn) {
            (0, _) if has_rq => self.wq_ok(&p.rq, rq_need),
            (0, _) => p.max_recv_sge == 0,
            // The SRQ exists and belongs to the QP's page.
            (hw::QP_FLAG_SRQ, Some(n)) => self.srqs.get_index(n).is_some_and(|s| s.db_page == page),
            _ => false,
        };
        if !matches!(p.qp_type, hw::QP_TYPE_RC | hw::QP_TYPE_UC | hw::QP_TYPE_UD)
            || (p.qp_type == hw::QP_TYPE_UC && p.flags != 0)
            || page >= hw::DB_PAGES
            || self.pds.get_index(p.pdn).is_none()
            || !cq_ok(p.send_cqn)
            || !cq_ok(p.recv_cqn)
            || u32::from(p.max_send_sge) > max_sge
            || u32::from(p.max_recv_sge) > max_sge
            || !self.wq_ok(&p.sq, sq_need)
            || !rq_ok
        {
            return (hw::AQ_BAD_PARAM, 0);
        }
        if self.qps.is_full() {
            return (hw::AQ_NO_RESOURCES, 0);
        }
        if let Err(e) = pages::validate(mem, &p.sq.ring) {
            return (e.status(), 0);
        }
        if has_rq {
            if let Err(e) = pages::validate(mem, &p.rq.ring) {
                return (e.status(), 0);
            }
        }
        let qp = Qp {
            qp_type: p.qp_type,
            db_page: page,
            pdn: p.pdn,
            send_cqn: p.send_cqn,
            recv_cqn: p.recv_cqn,
            max_send_sge: p.max_send_sge,
            max_recv_sge: p.max_recv_sge,
            max_inline: p.max_inline,
            sq: WorkQueue::new(&p.sq),
            rq: has_rq.then(|| WorkQueue::new(&p.rq)),
            srqn,
            state: hw::QPS_RESET,
            attr: hw::QpAttr::default(),
            dp: DataPath::default(),
        };
        let Some(h) = self.qps.insert(qp) else {
            return (hw::AQ_NO_RESOURCES, 0);
        };
        match h.index.checked_add(hw::QPN_FIRST) {
            Some(qpn) if qpn <= hw::MAX_QUEUE_NUM => {
                debug!(qpn, db_page = page, ?srqn, "QP created");
                self.remote_forget(qpn);
                self.qp_counts.insert(qpn, hw::PortCounters::default());
                (hw::AQ_OK, u64::from(qpn))
            }
            _ => {
                // The table is sized so this cannot happen; undo rather than trust it.
                self.qps.remove_index(h.index);
                (hw::AQ_NO_RESOURCES, 0)
            }
        }
    }

    /// `CMD_QUERY_QP`: writes the QP's state and attributes.
    pub(super) fn query_qp(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let Some(p) = hw::QueryQpParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(qp) = self.qp(p.qpn) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if p.resp_len == 0 {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let mut a = qp.attr;
        a.qp_state = qp.state;
        a.cur_qp_state = qp.state;
        a.sq_draining = u8::from(qp.state == hw::QPS_SQD && self.sq_in_flight(p.qpn));
        Self::respond(mem, p.resp_addr, p.resp_len, &a.encode())
    }

    /// `CMD_DESTROY_QP`: in any state.
    pub(super) fn destroy_qp(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::NumParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        match qp_index(p.num).and_then(|i| self.qps.remove_index(i)) {
            Some(qp) => {
                debug!(qpn = p.num, state = qp.state, "QP destroyed");
                self.remote_forget(p.num);
                self.unbind_windows_of(p.num);
                self.qp_counts.remove(&p.num);
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }
}
