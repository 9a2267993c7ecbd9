//! Address handles: CREATE_AH through the kernel, which checks the address and answers the
//! NIC's address vector for it (ordma's driver data, `uapi.md`); the provider keeps the
//! vector and copies it into every UD send WQE to that address (`hardware.md`, "Send WQE").

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr::{self, null_mut};

use ordma_hw::QpAh;

use crate::{abi, set_errno, sys};

/// An AH: libibverbs' part first, then the NIC's address vector.
#[repr(C)]
pub(crate) struct Ah {
    pub(crate) ibv: sys::ibv_ah,
    pub(crate) av: QpAh,
}

/// The response of CREATE_AH with ordma's driver data.
#[repr(C)]
#[derive(Default)]
struct CreateAhResp {
    ibv: sys::ib_uverbs_create_ah_resp,
    drv: sys::ordma_ibv_create_ah_resp,
}

/// The address vector of AH `ah` (one of ours, or null).
///
/// # Safety
///
/// `ah` is null or an AH [`create_ah`] returned and not yet destroyed (libibverbs'
/// contract for a UD WR's `wr.ud.ah`).
pub(crate) unsafe fn av_of(ah: *mut sys::ibv_ah) -> Option<QpAh> {
    // SAFETY: null or the first field of a live `Ah` (caller).
    unsafe { ah.cast::<Ah>().as_ref() }.map(|a| a.av)
}

/// # Safety
///
/// libibverbs calls this with one of our PDs and a valid `attr`.
pub(crate) unsafe extern "C" fn create_ah(
    pd: *mut sys::ibv_pd,
    attr: *mut sys::ibv_ah_attr,
) -> *mut sys::ibv_ah {
    let mut resp = CreateAhResp::default();
    let ah = Box::into_raw(Box::new(Ah {
        ibv: sys::ibv_ah::default(),
        av: QpAh::default(),
    }));
    // SAFETY: `pd` and `attr` are valid (contract); `ah` is ours and stays where it is
    // (its address is the AH's user handle); the buffer is ours, its size its.
    let r = unsafe {
        abi::ibv_cmd_create_ah(
            pd,
            ptr::addr_of_mut!((*ah).ibv),
            attr,
            &mut resp.ibv,
            size_of::<CreateAhResp>(),
        )
    };
    let av = (r == 0).then(|| QpAh::decode_from(&resp.drv.av)).flatten();
    match av {
        Some(av) => {
            // SAFETY: `ah` is ours, from `Box::into_raw` above.
            unsafe { (*ah).av = av };
            ah.cast()
        }
        None => {
            if r == 0 {
                // A vector the NIC would not read: the kernel and the provider disagree.
                // SAFETY: the kernel made the AH; `ah` is its handle.
                unsafe { abi::ibv_cmd_destroy_ah(ptr::addr_of_mut!((*ah).ibv)) };
            }
            // SAFETY: from `Box::into_raw` above; the kernel has no AH of it now.
            drop(unsafe { Box::from_raw(ah) });
            set_errno(if r != 0 { r } else { libc::EPROTO });
            null_mut()
        }
    }
}

/// # Safety
///
/// libibverbs calls this with an AH `create_ah` returned.
pub(crate) unsafe extern "C" fn destroy_ah(ibah: *mut sys::ibv_ah) -> c_int {
    // SAFETY: `ibah` is valid (contract).
    let r = unsafe { abi::ibv_cmd_destroy_ah(ibah) };
    if r != 0 {
        return r;
    }
    // SAFETY: `ibah` is the first field of an `Ah` from `Box::into_raw`; libibverbs' user
    // posts no more WRs to it, and this is its last use.
    drop(unsafe { Box::from_raw(ibah.cast::<Ah>()) });
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_data_follows_the_core_response_without_padding() {
        assert_eq!(
            core::mem::offset_of!(CreateAhResp, drv),
            size_of::<sys::ib_uverbs_create_ah_resp>(),
            "the kernel writes its driver data right behind the core response"
        );
        assert_eq!(size_of::<sys::ordma_ibv_create_ah_resp>(), 56);
    }
}
