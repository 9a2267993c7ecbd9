// SPDX-License-Identifier: GPL-2.0

//! Protection domains, kept by the NIC (`ALLOC_PD`/`DEALLOC_PD`).

use kernel::{prelude::*, sync::Arc};

use crate::{ib, nic::Nic, uapi};

/// A PD on the NIC; dropping it frees it there.
pub(crate) struct Pd<'bound> {
    nic: Arc<Nic<'bound>>,
    pdn: u32,
}

impl<'bound> Pd<'bound> {
    /// Allocates a PD on the NIC and, for a user, answers with its number.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for non-zero driver input; `ENOMEM` when the NIC has no free PD; `EIO`
    /// when the NIC is dead; `ETIMEDOUT` when it does not answer (then it is treated as
    /// dead; a PD it may have made holds no memory, and the reset at unbind forgets it);
    /// `EFAULT`.
    pub(crate) fn new(nic: &Arc<Nic<'bound>>, udata: Option<&ib::Udata<'_>>) -> Result<Self> {
        if let Some(u) = udata {
            u.expect_empty()?;
        }
        // From here on, an error drops `pd`, which frees it on the NIC.
        let pd = Self {
            pdn: nic.alloc_pd()?,
            nic: nic.clone(),
        };
        if let Some(u) = udata {
            u.respond(&uapi::AllocPdResp {
                comp_mask: 0,
                pdn: pd.pdn,
            })?;
        }
        Ok(pd)
    }

    /// The NIC's number of this PD.
    pub(crate) fn pdn(&self) -> u32 {
        self.pdn
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // Destroying cannot fail towards ib_core; a dead NIC forgets its PDs when reset.
        if let Err(e) = self.nic.dealloc_pd(self.pdn) {
            if !self.nic.is_dead() {
                self.nic.verbs_log_limit.log(self.nic.pdev, || {
                    dev_err!(
                        self.nic.pdev,
                        "DEALLOC_PD {} failed (error {})\n",
                        self.pdn,
                        e.to_errno()
                    )
                });
            }
        }
    }
}
