//! The device: what libibverbs learns of ordma when it loads the library.
//!
//! The constructor registers [`DEVICE_OPS`] with libibverbs (`PROVIDER_DRIVER()` in C);
//! its match table claims ordma's PCI function, and libibverbs then asks us for a
//! `verbs_device` per matching uverbs device and, on `ibv_open_device`, for a context
//! ([`crate::context::alloc_context`]).

use core::mem::size_of;
use core::ptr::{self, null_mut};

use crate::abi::{self, VerbsDevice, VerbsDeviceOps, VerbsMatchEnt, VerbsSysfsDev};
use crate::{context, sys};

/// Lets statics hold the raw pointers libibverbs' structs are made of; they point only to
/// other statics and are never written.
#[repr(transparent)]
pub struct Shared<T>(pub T);
// SAFETY: the wrapped values are immutable statics of plain pointers to immutable statics.
unsafe impl<T> Sync for Shared<T> {}

/// The devices this provider drives: ordma's PCI function (Documentation/hardware.md).
static MATCH_TABLE: Shared<[VerbsMatchEnt; 2]> = Shared([
    VerbsMatchEnt {
        driver_data: null_mut(),
        u: 0,
        vendor: ordma_hw::PCI_VENDOR_ID,
        device: ordma_hw::PCI_DEVICE_ID,
        kind: abi::VERBS_MATCH_PCI,
    },
    VerbsMatchEnt {
        driver_data: null_mut(),
        u: 0,
        vendor: 0,
        device: 0,
        kind: abi::VERBS_MATCH_SENTINEL,
    },
]);

/// What libibverbs knows of the provider.
pub static DEVICE_OPS: Shared<VerbsDeviceOps> = Shared(VerbsDeviceOps {
    name: c"ordma".as_ptr(),
    match_min_abi_version: sys::ORDMA_UVERBS_ABI_VERSION,
    match_max_abi_version: sys::ORDMA_UVERBS_ABI_VERSION,
    match_table: ptr::addr_of!(MATCH_TABLE.0).cast(),
    static_providers: ptr::null(),
    match_device: None,
    alloc_context: Some(context::alloc_context),
    import_context: None,
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
});

/// Registers the provider when libibverbs loads the library (`PROVIDER_DRIVER()` in C):
/// an `.init_array` entry, so the library needs to export no symbol at all.
#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static REGISTER: unsafe extern "C" fn() = register;

#[cfg(not(test))]
unsafe extern "C" fn register() {
    // SAFETY: `DEVICE_OPS` is a static, valid for the life of the library.
    unsafe { abi::verbs_register_driver_34(&DEVICE_OPS.0) };
}

/// # Safety
///
/// libibverbs calls this with a sysfs device it matched to us.
unsafe extern "C" fn alloc_device(_sysfs: *mut VerbsSysfsDev) -> *mut VerbsDevice {
    // SAFETY: calloc of a POD struct libibverbs fills in.
    unsafe { libc::calloc(1, size_of::<VerbsDevice>()).cast() }
}

/// # Safety
///
/// libibverbs calls this once, with a device `alloc_device` returned.
unsafe extern "C" fn uninit_device(dev: *mut VerbsDevice) {
    // SAFETY: `dev` came from calloc in `alloc_device`.
    unsafe { libc::free(dev.cast()) };
}
