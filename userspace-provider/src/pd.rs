//! Protection domains: ALLOC_PD and DEALLOC_PD through the kernel.

use core::mem::size_of;
use core::ptr::{self, null_mut};

use crate::{abi, set_errno, sys};

/// A PD: libibverbs' and the NIC's number.
#[repr(C)]
pub(crate) struct Pd {
    pub(crate) ibv: sys::ibv_pd,
    /// The NIC's PD number, which the queue and memory objects will name.
    pub(crate) pdn: u32,
}

/// The response of ALLOC_PD with ordma's driver data (no driver request).
#[repr(C)]
#[derive(Default)]
pub(crate) struct AllocPdResp {
    pub(crate) ibv: sys::ib_uverbs_alloc_pd_resp,
    pub(crate) drv: sys::ordma_ibv_alloc_pd_resp,
}

/// # Safety
///
/// libibverbs calls this with one of our contexts.
pub(crate) unsafe extern "C" fn alloc_pd(ibctx: *mut sys::ibv_context) -> *mut sys::ibv_pd {
    // SAFETY: calloc of a POD struct.
    let pd = unsafe { libc::calloc(1, size_of::<Pd>()) }.cast::<Pd>();
    if pd.is_null() {
        set_errno(libc::ENOMEM);
        return null_mut();
    }
    let mut cmd = abi::IbvAllocPd::default();
    let mut resp = AllocPdResp::default();
    // SAFETY: `ibctx` is valid (contract), `pd` ours; the buffers are ours.
    let r = unsafe {
        abi::ibv_cmd_alloc_pd(
            ibctx,
            ptr::addr_of_mut!((*pd).ibv),
            &mut cmd,
            size_of::<abi::IbvAllocPd>(),
            &mut resp.ibv,
            size_of::<AllocPdResp>(),
        )
    };
    if r != 0 {
        // SAFETY: `pd` came from calloc and nothing else holds it.
        unsafe { libc::free(pd.cast()) };
        set_errno(r);
        return null_mut();
    }
    // SAFETY: `pd` is ours.
    unsafe {
        (*pd).pdn = resp.drv.pdn;
        ptr::addr_of_mut!((*pd).ibv)
    }
}

/// # Safety
///
/// libibverbs calls this with a PD `alloc_pd` returned.
pub(crate) unsafe extern "C" fn dealloc_pd(ibpd: *mut sys::ibv_pd) -> core::ffi::c_int {
    // SAFETY: `ibpd` is valid (contract).
    let r = unsafe { abi::ibv_cmd_dealloc_pd(ibpd) };
    if r != 0 {
        return r;
    }
    // SAFETY: `ibpd` is the first field of a calloc'ed `Pd`.
    unsafe { libc::free(ibpd.cast()) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn driver_data_follows_the_core_response_without_padding() {
        // What the kernel writes as udata starts right after the core response.
        assert_eq!(
            offset_of!(AllocPdResp, drv),
            size_of::<sys::ib_uverbs_alloc_pd_resp>()
        );
        assert_eq!(offset_of!(AllocPdResp, drv), 4);
        assert_eq!(size_of::<AllocPdResp>(), 12);
        assert_eq!(size_of::<abi::IbvAllocPd>(), 16);
    }
}
