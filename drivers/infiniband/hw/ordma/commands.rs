// SPDX-License-Identifier: GPL-2.0

//! The typed admin commands (`hardware.md`, "Admin commands"): parameters in, result out,
//! one function each, over the engine in `admin.rs`.

use kernel::{
    dma::{Coherent, CoherentBox},
    io::Io,
    prelude::*,
};

use crate::{
    hw,
    nic::{Failed, Nic},
};

impl Nic<'_> {
    /// Runs a query command whose `N`-byte response the NIC writes to a DMA buffer;
    /// `params` builds the parameters from the buffer's address and length.
    fn query<const N: usize>(
        &self,
        opcode: u8,
        params: impl FnOnce(u64, u32) -> [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<[u8; N]> {
        let buf: Coherent<[u8; N]> = Coherent::zeroed(self.pdev.as_ref(), GFP_KERNEL)?;
        // CAST: `N` is a response size, a small constant.
        let len = self.admin(opcode, params(buf.dma_address(), N as u32))?;
        if len != N as u64 {
            self.verbs_log_limit.log(self.pdev, || {
                dev_err!(
                    self.pdev,
                    "admin command {opcode:#x} returned {len} bytes, expected {N}\n"
                )
            });
            return Err(EIO);
        }
        Ok(buf.copy_read())
    }

    /// `CMD_QUERY_DEVICE`.
    pub(crate) fn query_device(&self) -> Result<hw::DeviceAttrs> {
        let raw = self.query::<{ hw::DEVICE_ATTRS_SIZE }>(
            hw::CMD_QUERY_DEVICE,
            |resp_addr, resp_len| {
                hw::QueryDeviceParams {
                    resp_addr,
                    resp_len,
                }
                .encode()
            },
        )?;
        Ok(hw::DeviceAttrs::decode(&raw))
    }

    /// A query about `port` ([`hw::QueryPortParams`]) and its `N`-byte answer.
    fn query_of_port<const N: usize>(&self, opcode: u8, port: u32) -> Result<[u8; N]> {
        self.query::<N>(opcode, |resp_addr, resp_len| {
            hw::QueryPortParams {
                port,
                resp_addr,
                resp_len,
            }
            .encode()
        })
    }

    /// `CMD_QUERY_PORT`.
    pub(crate) fn query_port(&self, port: u32) -> Result<hw::PortAttrs> {
        let raw = self.query_of_port::<{ hw::PORT_ATTRS_SIZE }>(hw::CMD_QUERY_PORT, port)?;
        Ok(hw::PortAttrs::decode(&raw))
    }

    /// `CMD_QUERY_COUNTERS`.
    pub(crate) fn query_counters(&self, port: u32) -> Result<hw::PortCounters> {
        let raw = self.query_of_port::<{ hw::COUNTERS_SIZE }>(hw::CMD_QUERY_COUNTERS, port)?;
        Ok(hw::PortCounters::decode(&raw))
    }

    /// `CMD_QUERY_QP_COUNTERS` (1.10): QP `qpn`'s counters since it was created.
    pub(crate) fn query_qp_counters(&self, qpn: u32) -> Result<hw::PortCounters> {
        let raw = self.query::<{ hw::COUNTERS_SIZE }>(
            hw::CMD_QUERY_QP_COUNTERS,
            |resp_addr, resp_len| {
                hw::QueryQpCountersParams {
                    qpn,
                    resp_addr,
                    resp_len,
                }
                .encode()
            },
        )?;
        Ok(hw::PortCounters::decode(&raw))
    }

    /// `CMD_SET_GID`: entry `index` of `port`'s GID table becomes `gid` of type
    /// `gid_type` (`GID_TYPE_NONE` with a zero GID clears it).
    pub(crate) fn set_gid(&self, port: u32, index: u32, gid: &[u8; 16], gid_type: u8) -> Result {
        let p = hw::SetGidParams {
            port,
            index,
            gid: *gid,
            gid_type,
        };
        self.admin(hw::CMD_SET_GID, p.encode()).map(|_| ())
    }

    /// `CMD_ALLOC_PD`: the new PD's number.
    pub(crate) fn alloc_pd(&self) -> Result<u32> {
        let pdn = self.admin(hw::CMD_ALLOC_PD, [0; hw::AQ_SQE_SIZE - 8])?;
        // The NIC answers below `max_pd`, a u32; anything else is a broken NIC.
        u32::try_from(pdn).map_err(|_| {
            self.verbs_log_limit.log(self.pdev, || {
                dev_err!(self.pdev, "ALLOC_PD returned PD number {pdn}\n")
            });
            EIO
        })
    }

    /// `CMD_DEALLOC_PD`.
    pub(crate) fn dealloc_pd(&self, pdn: u32) -> Result {
        self.admin(hw::CMD_DEALLOC_PD, hw::PdParams { pdn }.encode())
            .map(|_| ())
    }

    /// `CMD_CREATE_MR`: the new MR's key.
    pub(crate) fn create_mr(&self, p: &hw::CreateMrParams) -> Result<u32, Failed> {
        let key = self.command(hw::CMD_CREATE_MR, p.encode())?;
        u32::try_from(key).map_err(|_| {
            self.verbs_log_limit.log(self.pdev, || {
                dev_err!(self.pdev, "CREATE_MR returned key {key:#x}\n")
            });
            Failed::nonsense()
        })
    }

    /// `CMD_MODIFY_MR` (1.6): the MR `p.key` names re-registered in place.
    pub(crate) fn modify_mr(&self, p: &hw::ModifyMrParams) -> Result<(), Failed> {
        self.command(hw::CMD_MODIFY_MR, p.encode()).map(|_| ())
    }

    /// `CMD_DESTROY_MR`.
    pub(crate) fn destroy_mr(&self, key: u32) -> Result {
        self.admin(hw::CMD_DESTROY_MR, hw::KeyParams { key }.encode())
            .map(|_| ())
    }

    /// `CMD_ALLOC_MW` (1.9): the new window's rkey; `EINVAL` when the NIC refuses the
    /// parameters (a PD or a type it does not have).
    pub(crate) fn alloc_mw(&self, p: &hw::AllocMwParams) -> Result<u32> {
        let rkey = self.command_refusable(hw::CMD_ALLOC_MW, p.encode(), Some(EINVAL))?;
        // A window's rkey has `MW_KEY_BIT` set; anything else is a broken NIC.
        u32::try_from(rkey)
            .ok()
            .filter(|k| k & hw::MW_KEY_BIT != 0)
            .ok_or_else(|| {
                self.verbs_log_limit.log(self.pdev, || {
                    dev_err!(self.pdev, "ALLOC_MW returned rkey {rkey:#x}\n")
                });
                EIO
            })
    }

    /// `CMD_DEALLOC_MW` (1.9): the window `rkey` (as `CMD_ALLOC_MW` returned it) names.
    pub(crate) fn dealloc_mw(&self, rkey: u32) -> Result {
        self.admin(hw::CMD_DEALLOC_MW, hw::KeyParams { key: rkey }.encode())
            .map(|_| ())
    }
}

impl Nic<'_> {
    /// Checks that a create command's result is a 16-bit queue number.
    fn queue_num(&self, what: &str, num: u64) -> Result<u32, Failed> {
        u32::try_from(num)
            .ok()
            .filter(|&n| n <= hw::MAX_QUEUE_NUM)
            .ok_or_else(|| {
                self.verbs_log_limit.log(self.pdev, || {
                    dev_err!(self.pdev, "{what} returned number {num:#x}\n")
                });
                Failed::nonsense()
            })
    }

    /// `CMD_CREATE_CQ`: the new CQ's number.
    pub(crate) fn create_cq(&self, p: &hw::CreateCqParams) -> Result<u32, Failed> {
        let cqn = self.command(hw::CMD_CREATE_CQ, p.encode())?;
        self.queue_num("CREATE_CQ", cqn)
    }

    /// `CMD_DESTROY_CQ`.
    pub(crate) fn destroy_cq(&self, cqn: u32) -> Result {
        self.admin(hw::CMD_DESTROY_CQ, hw::NumParams { num: cqn }.encode())
            .map(|_| ())
    }

    /// `CMD_CREATE_QP`: the new QP's number.
    pub(crate) fn create_qp(&self, p: &hw::CreateQpParams) -> Result<u32, Failed> {
        let qpn = self.command(hw::CMD_CREATE_QP, p.encode())?;
        self.queue_num("CREATE_QP", qpn)
    }

    /// `CMD_MODIFY_QP` with the attributes `mask` names from `attr`.
    pub(crate) fn modify_qp(&self, qpn: u32, mask: u32, attr: &hw::QpAttr) -> Result {
        let mut b: CoherentBox<[u8; hw::QP_ATTR_SIZE]> =
            CoherentBox::zeroed(self.pdev.as_ref(), GFP_KERNEL)?;
        *b = attr.encode();
        let buf: Coherent<[u8; hw::QP_ATTR_SIZE]> = b.into();
        let params = hw::ModifyQpParams {
            qpn,
            attr_mask: mask,
            attr_addr: buf.dma_address(),
            // CAST: 128, a constant.
            attr_len: hw::QP_ATTR_SIZE as u32,
        };
        self.admin(hw::CMD_MODIFY_QP, params.encode()).map(|_| ())
    }

    /// `CMD_QUERY_QP`.
    pub(crate) fn query_qp(&self, qpn: u32) -> Result<hw::QpAttr> {
        let raw = self.query::<{ hw::QP_ATTR_SIZE }>(hw::CMD_QUERY_QP, |resp_addr, resp_len| {
            hw::QueryQpParams {
                qpn,
                resp_addr,
                resp_len,
            }
            .encode()
        })?;
        hw::QpAttr::decode(&raw).ok_or_else(|| {
            self.verbs_log_limit.log(self.pdev, || {
                dev_err!(
                    self.pdev,
                    "QUERY_QP {qpn}: reserved bytes set in the answer\n"
                )
            });
            EIO
        })
    }

    /// `CMD_DESTROY_QP`.
    pub(crate) fn destroy_qp(&self, qpn: u32) -> Result {
        self.admin(hw::CMD_DESTROY_QP, hw::NumParams { num: qpn }.encode())
            .map(|_| ())
    }
}

impl Nic<'_> {
    /// `CMD_CREATE_SRQ`: the new SRQ's number.
    pub(crate) fn create_srq(&self, p: &hw::CreateSrqParams) -> Result<u32, Failed> {
        let srqn = self.command(hw::CMD_CREATE_SRQ, p.encode())?;
        self.queue_num("CREATE_SRQ", srqn)
    }

    /// `CMD_RESIZE_CQ` (1.7): the CQ's producer index at the move (mod 2^16); `EINVAL`
    /// when the NIC refuses (the CQEs not yet polled do not fit, or the CQ is broken).
    pub(crate) fn resize_cq(&self, p: &hw::ResizeCqParams) -> Result<u32, Failed> {
        let pi = self.command_refusable(hw::CMD_RESIZE_CQ, p.encode(), Some(EINVAL))?;
        u32::try_from(pi)
            .ok()
            .filter(|&pi| pi <= u32::from(u16::MAX))
            .ok_or_else(Failed::nonsense)
    }

    /// `CMD_MODIFY_SRQ`: a resize (1.7) and the limit armed (or, with 0, disarmed), as
    /// `p.attr_mask` says.
    pub(crate) fn modify_srq(&self, p: &hw::ModifySrqParams) -> Result<(), Failed> {
        self.command(hw::CMD_MODIFY_SRQ, p.encode()).map(|_| ())
    }

    /// `CMD_QUERY_SRQ`.
    pub(crate) fn query_srq(&self, srqn: u32) -> Result<hw::SrqAttrs> {
        let raw =
            self.query::<{ hw::SRQ_ATTRS_SIZE }>(hw::CMD_QUERY_SRQ, |resp_addr, resp_len| {
                hw::QuerySrqParams {
                    srqn,
                    resp_addr,
                    resp_len,
                }
                .encode()
            })?;
        Ok(hw::SrqAttrs::decode(&raw))
    }

    /// `CMD_DESTROY_SRQ`.
    pub(crate) fn destroy_srq(&self, srqn: u32) -> Result {
        self.admin(hw::CMD_DESTROY_SRQ, hw::NumParams { num: srqn }.encode())
            .map(|_| ())
    }
}
