// SPDX-License-Identifier: GPL-2.0

//! Address handles. The NIC keeps no AH: an AH is the address vector the NIC reads in
//! each UD send WQE (`hardware.md`, "Send WQE"), checked and built here once and handed to
//! the provider, which copies it into every WQE to that address. QPs' paths are built
//! the same way ([`av`]).

use kernel::prelude::*;

use crate::{hw, ib, uapi};

/// The NIC's address vector for ib_core's address `ah` (not checked:
/// [`hw::QpAh::valid_on`]): an InfiniBand one, or a RoCE one with its destination MAC.
pub(crate) fn av(ah: &ib::AhAttr) -> hw::QpAh {
    let grh = ah.grh.unwrap_or_default();
    hw::QpAh {
        dlid: ah.dlid,
        sl: ah.sl,
        src_path_bits: ah.src_path_bits,
        static_rate: ah.static_rate,
        ah_flags: if ah.grh.is_some() { hw::AH_FLAG_GRH } else { 0 },
        // An out-of-range port becomes one the NIC's rules refuse.
        port_num: u8::try_from(ah.port_num).unwrap_or(u8::MAX),
        dgid: grh.dgid,
        flow_label: grh.flow_label,
        sgid_index: grh.sgid_index,
        hop_limit: grh.hop_limit,
        traffic_class: grh.traffic_class,
        dmac: ah.dmac.unwrap_or_default(),
    }
}

/// An address handle. It keeps nothing: the NIC has no AH object, and no kernel QP posts
/// to an AH yet (a user's provider keeps the vector it was answered).
pub(crate) struct Ah;

impl Ah {
    /// Checks the address (`hardware.md`, "The QP state machine": the values of an AV) and
    /// builds its vector; a user gets the vector in the response (`uapi.md`, CREATE_AH).
    ///
    /// # Errors
    ///
    /// `EINVAL` for an address the port does not take (`hw::QpAh::valid_on`): another
    /// port, path bits, a flow label above 20 bits; on InfiniBand a multicast or zero LID,
    /// SL above 15, a source GID index other than 0, a MAC; on Ethernet no GRH (every RoCE
    /// address is global), a LID, SL above 7, a source GID index past the table, a
    /// multicast or zero MAC); `EOPNOTSUPP` for driver input; `EFAULT`.
    pub(crate) fn new(
        init: &ib::AhInit,
        port: &hw::PortShape,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result<Self> {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let av = av(&init.attr);
        if !av.valid_on(port.link_layer, port.gid_tbl_len) {
            return Err(EINVAL);
        }
        if let Some(u) = udata {
            u.respond(&uapi::CreateAhResp {
                comp_mask: 0,
                reserved_04: 0,
                av: av.encode(),
            })?;
        }
        Ok(Self)
    }
}
