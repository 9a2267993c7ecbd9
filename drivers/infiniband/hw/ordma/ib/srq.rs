// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: `struct ib_srq` with the driver's [`Driver::Srq`] inside, the
//! creator's request, and `struct ib_srq_attr` as plain Rust values both ways.

use core::mem::MaybeUninit;

use kernel::types::Opaque;

use super::{bindings as b, driver::Driver};

/// An SRQ as ib_core allocates it (`size_ib_srq`): the `ib_srq` (ib_core's, which it
/// writes while the SRQ lives, e.g. its use count: only reached through raw pointers), then
/// the driver's data, initialised in place by `create_srq` and dropped by `destroy_srq`.
#[repr(C)]
pub(super) struct IbSrq<T: Driver> {
    pub(super) ib: Opaque<b::ib_srq>,
    pub(super) data: MaybeUninit<T::Srq>,
}

/// An SRQ's attributes (`struct ib_srq_attr`): asked for at create, then what it has; the
/// limit of `modify_srq` and `query_srq`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SrqAttr {
    /// Work requests outstanding at once.
    pub(crate) max_wr: u32,
    /// Scatter/gather entries per work request.
    pub(crate) max_sge: u32,
    /// The limit event's threshold (0: not armed).
    pub(crate) srq_limit: u32,
}

impl SrqAttr {
    pub(super) fn from_raw(a: &b::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    pub(super) fn fill(&self, a: &mut b::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// SRQ types the binding names (`enum ib_srq_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SrqType {
    /// A plain SRQ.
    Basic,
    /// Any other (XRC, tag matching).
    Other(b::ib_srq_type),
}

/// What the creator asks of a new SRQ (`struct ib_srq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SrqInit {
    /// The type.
    pub(crate) srq_type: SrqType,
    /// Capabilities asked for (`srq_limit` is not used at create); the driver answers what
    /// the SRQ has.
    pub(crate) attr: SrqAttr,
}

impl SrqInit {
    pub(super) fn from_raw(a: &b::ib_srq_init_attr) -> Self {
        Self {
            srq_type: match a.srq_type {
                b::ib_srq_type_IB_SRQT_BASIC => SrqType::Basic,
                other => SrqType::Other(other),
            },
            attr: SrqAttr::from_raw(&a.attr),
        }
    }
}

/// An attribute mask of `modify_srq` (`enum ib_srq_attr_mask`'s bits), as the caller
/// passed it: uverbs does not check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SrqAttrMask(u32);

impl SrqAttrMask {
    /// `IB_SRQ_MAX_WR`: resize.
    pub(crate) const MAX_WR: u32 = b::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    /// `IB_SRQ_LIMIT`: arm the limit.
    pub(crate) const LIMIT: u32 = b::ib_srq_attr_mask_IB_SRQ_LIMIT;

    pub(super) fn from_raw(mask: b::ib_srq_attr_mask) -> Self {
        Self(mask)
    }

    /// The mask's bits (the `IB_SRQ_*` values).
    pub(crate) fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `bits` is set.
    pub(crate) fn has(self, bits: u32) -> bool {
        self.0 & bits == bits
    }
}
