// SPDX-License-Identifier: GPL-2.0

//! Memory windows (interface 1.9), kept by the NIC (`ALLOC_MW`/`DEALLOC_MW`). The driver
//! only allocates and frees them: binding and invalidating are work requests the provider
//! posts (the shared definitions, `defs/mw.rs`).

use kernel::{prelude::*, sync::Arc};

use crate::{hw, ib, nic::Nic, pd::Pd};

/// A memory window on the NIC; dropping it frees it there (bound or not).
pub(crate) struct Mw<'bound> {
    nic: Arc<Nic<'bound>>,
    /// The rkey `ALLOC_MW` answered: `DEALLOC_MW` names the window by it, whatever key
    /// byte binds gave it since.
    rkey: u32,
}

impl<'bound> Mw<'bound> {
    /// Allocates a window of type `mw_type` on `pd` on the NIC (unbound). The caller's
    /// answer, its rkey, is ib_core's (no driver response).
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for non-zero driver input; `EINVAL` when the NIC refuses the PD or the
    /// type; `ENOMEM` when it has no free window; `EIO` when the NIC is dead (or answers a
    /// key that is no window's); `ETIMEDOUT` when it does not answer (then it is treated as
    /// dead; a window it may have made holds no memory, and the reset at unbind forgets
    /// it); `EFAULT`.
    pub(crate) fn new(
        nic: &Arc<Nic<'bound>>,
        pd: &Pd<'bound>,
        mw_type: ib::MwType,
        udata: Option<&ib::Udata<'_>>,
    ) -> Result<Self> {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        let params = hw::AllocMwParams {
            pdn: pd.pdn(),
            mw_type: match mw_type {
                ib::MwType::Type1 => hw::MW_TYPE_1,
                ib::MwType::Type2 => hw::MW_TYPE_2,
            },
        };
        let rkey = nic.alloc_mw(&params)?;
        dev_dbg!(
            nic.pdev,
            "MW {rkey:#x} (type {}) allocated on PD {}\n",
            params.mw_type,
            params.pdn
        );
        Ok(Self {
            nic: nic.clone(),
            rkey,
        })
    }
}

impl ib::MwObject for Mw<'_> {
    fn rkey(&self) -> u32 {
        self.rkey
    }
}

impl Drop for Mw<'_> {
    fn drop(&mut self) {
        // Deallocating cannot fail towards ib_core; a dead NIC forgets its windows when
        // reset. A window holds no memory: nothing to keep when the NIC does not answer.
        if let Err(e) = self.nic.dealloc_mw(self.rkey) {
            if !self.nic.is_dead() {
                self.nic.verbs_log_limit.log(self.nic.pdev, || {
                    dev_err!(
                        self.nic.pdev,
                        "DEALLOC_MW {:#x} failed (error {})\n",
                        self.rkey,
                        e.to_errno()
                    )
                });
            }
        }
    }
}
