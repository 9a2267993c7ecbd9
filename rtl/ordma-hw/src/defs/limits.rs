//! What the interface lets a NIC report in `CMD_QUERY_DEVICE`: every limit has a ceiling
//! (queue numbers, ring depths, WQE sizes, keys, the event queue). A driver uses
//! [`DeviceAttrs::clamped`], never the raw figures, so a broken or hostile NIC's answer
//! cannot reach its size arithmetic.

use super::{
    DeviceAttrs, MAX_LOG_DEPTH, MAX_QUEUE_LOG_DEPTH, MAX_QUEUE_NUM, QPN_FIRST, RQ_WQE_BASE,
    WQE_LOG_SIZE_MAX, WQE_SGE_SIZE,
};

/// Event queue entries kept for events other than completion events (and `EVENT_FATAL`'s
/// slot): at most one completion event per CQ is in the queue at a time, so a NIC's CQs
/// are at most the deepest event queue's entries less these.
pub const EQ_ASYNC_RESERVE: u32 = 1024;

/// Most CQs a NIC may report ([`EQ_ASYNC_RESERVE`]).
pub const MAX_CQS: u32 = (1 << MAX_LOG_DEPTH) - EQ_ASYNC_RESERVE;

/// Most SGEs a work request may have: the largest WQE less a receive WQE's header.
pub const MAX_WQE_SGES: u32 = ((1 << WQE_LOG_SIZE_MAX) - RQ_WQE_BASE) / WQE_SGE_SIZE;

/// Most MRs or memory windows: their keys are `index << 8 | key` in 32 bits.
pub const MAX_KEYED: u32 = 1 << 24;

/// One limit [`DeviceAttrs::clamped`] lowered: its name, the NIC's figure, the one used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clamped {
    /// The attribute, as ibv_devinfo names it.
    pub name: &'static str,
    /// What the NIC reported.
    pub from: u32,
    /// What the driver uses.
    pub to: u32,
}

/// How many limits [`DeviceAttrs::clamped`] checks.
pub const CLAMPED_LIMITS: usize = 12;

impl DeviceAttrs {
    /// These attributes with every limit at most its ceiling, and the ones that were above
    /// it (for the driver's warning). `num_ports` is 1 (the interface has one port).
    pub fn clamped(&self) -> (Self, [Option<Clamped>; CLAMPED_LIMITS]) {
        let mut a = *self;
        let mut out = [None; CLAMPED_LIMITS];
        let depth = 1u32 << MAX_QUEUE_LOG_DEPTH;
        let limits: [(&'static str, &mut u32, u32); CLAMPED_LIMITS] = [
            ("max_qp", &mut a.max_qp, MAX_QUEUE_NUM + 1 - QPN_FIRST),
            ("max_qp_wr", &mut a.max_qp_wr, depth),
            ("max_cq", &mut a.max_cq, MAX_CQS),
            ("max_cqe", &mut a.max_cqe, depth),
            ("max_mr", &mut a.max_mr, MAX_KEYED),
            ("max_sge", &mut a.max_sge, MAX_WQE_SGES),
            ("num_ports", &mut a.num_ports, 1),
            ("max_srq", &mut a.max_srq, MAX_QUEUE_NUM + 1),
            // The deepest SRQ ring keeps one slot free.
            ("max_srq_wr", &mut a.max_srq_wr, depth - 1),
            ("max_srq_sge", &mut a.max_srq_sge, MAX_WQE_SGES),
            ("max_mw", &mut a.max_mw, MAX_KEYED),
            ("max_pd", &mut a.max_pd, MAX_KEYED),
        ];
        for ((name, value, ceiling), slot) in limits.into_iter().zip(out.iter_mut()) {
            if *value > ceiling {
                *slot = Some(Clamped {
                    name,
                    from: *value,
                    to: ceiling,
                });
                *value = ceiling;
            }
        }
        (a, out)
    }
}
