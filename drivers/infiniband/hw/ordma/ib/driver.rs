// SPDX-License-Identifier: GPL-2.0

//! What a driver implements to be an ib_core device: the [`Driver`] trait, with one
//! associated type per object ib_core allocates for it, and the attributes it reports.

use kernel::{error::VTABLE_DEFAULT_ERROR, prelude::*, ModuleMetadata};

use super::{
    ah::AhInit,
    cq::{CqInit, CqSize},
    mr::MrKeys,
    mw::MwType,
    qp::{QpAttr, QpAttrMask, QpCaps, QpInit},
    srq::{SrqAttr, SrqAttrMask, SrqInit},
    stats::HwStat,
    ucontext::UserContext,
    udata::Udata,
    umem::{UserMemory, UserPages},
};

/// What a port reports, in ib_core's terms (the IB spec's encodings).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PortAttr {
    /// `true` if the port is ACTIVE (else DOWN).
    pub(crate) active: bool,
    /// Largest MTU, as an `enum ib_mtu` code.
    pub(crate) max_mtu: u8,
    /// Current MTU code.
    pub(crate) active_mtu: u8,
    /// The port's LID.
    pub(crate) lid: u16,
    /// The subnet manager's LID.
    pub(crate) sm_lid: u16,
    /// Largest message size.
    pub(crate) max_msg_sz: u32,
    /// Link width code.
    pub(crate) width: u8,
    /// Link speed code.
    pub(crate) speed: u8,
}

/// How a port speaks: the protocol and management ib_core runs on it
/// (`ib_port_immutable.core_cap_flags` and `max_mad_size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortProtocol {
    /// InfiniBand without MAD support (`RDMA_CORE_CAP_PROT_IB` alone, no MADs): no QP0 or
    /// QP1, so ib_core's MAD layer, SMI and CM leave the port alone.
    IbNoMad,
    /// RoCEv2 on an Ethernet port whose MAC is `mac` (`RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP`
    /// and `RDMA_CORE_CAP_ETH_AH`: addresses carry a destination MAC that ib_core
    /// resolves), without MADs (no QP1: ib_core's MAD layer and CM leave the port alone,
    /// as on [`PortProtocol::IbNoMad`]). The binding pairs the port with the netdev of that
    /// permanent MAC (`ib_device_set_netdev`, a netdevice notifier, [`Driver::netdev_changed`]),
    /// ib_core keeps its GID table from that netdev's IP addresses ([`Driver::add_gid`],
    /// [`Driver::del_gid`]; [`Driver::query_gid`] is not asked), and its link layer is
    /// Ethernet.
    RoceV2NoMad {
        /// The port's MAC: the paired netdev's permanent address.
        mac: [u8; 6],
    },
}

impl PortProtocol {
    /// The MAC of an Ethernet port, `None` for an InfiniBand one.
    pub(crate) fn mac(&self) -> Option<&[u8; 6]> {
        match self {
            Self::IbNoMad => None,
            Self::RoceV2NoMad { mac } => Some(mac),
        }
    }
}

/// What ib_core must know of a port before it is used, fixed for the device's life
/// (`get_port_immutable`, `get_link_layer`), and the sizes of its tables; decided by the
/// driver before it registers the device ([`Driver::ports`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortDesc {
    /// The port's protocol.
    pub(crate) protocol: PortProtocol,
    /// Entries in the GID table ([`Driver::query_gid`] answers each index below on
    /// InfiniBand; on RoCE ib_core fills them through [`Driver::add_gid`]).
    pub(crate) gid_tbl_len: u16,
    /// Entries in the PKey table ([`Driver::query_pkey`] answers each index below).
    pub(crate) pkey_tbl_len: u16,
}

/// The kind of node a device is (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeType {
    /// An InfiniBand channel adapter.
    IbCa,
}

/// What the device's atomics are atomic with respect to (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum AtomicCap {
    /// The device does no atomics (`IB_ATOMIC_NONE`).
    #[default]
    None,
    /// Atomic with respect to every other atomic of this device (`IB_ATOMIC_HCA`).
    Hca,
}

/// What the device reports, in ib_core's terms.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DeviceAttr {
    /// Firmware version, `major << 32 | minor << 16 | patch`.
    pub(crate) fw_ver: u64,
    /// Largest MR, in bytes.
    pub(crate) max_mr_size: u64,
    /// Supported page sizes.
    pub(crate) page_size_cap: u64,
    /// PCI vendor ID.
    pub(crate) vendor_id: u32,
    /// Vendor part ID.
    pub(crate) vendor_part_id: u32,
    /// Hardware version.
    pub(crate) hw_ver: u32,
    /// QPs.
    pub(crate) max_qp: u32,
    /// Work requests per QP.
    pub(crate) max_qp_wr: u32,
    /// Scatter/gather entries per send work request.
    pub(crate) max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub(crate) max_recv_sge: u32,
    /// Scatter/gather entries per RDMA read work request.
    pub(crate) max_sge_rd: u32,
    /// CQs.
    pub(crate) max_cq: u32,
    /// Entries per CQ.
    pub(crate) max_cqe: u32,
    /// MRs.
    pub(crate) max_mr: u32,
    /// PDs.
    pub(crate) max_pd: u32,
    /// PKeys per port.
    pub(crate) max_pkeys: u16,
    /// The driver's CQ numbers are below this.
    pub(crate) cq_num_limit: u32,
    /// The driver's QP numbers are below this.
    pub(crate) qp_num_limit: u32,
    /// SRQs.
    pub(crate) max_srq: u32,
    /// Work requests per SRQ.
    pub(crate) max_srq_wr: u32,
    /// Scatter/gather entries per SRQ work request.
    pub(crate) max_srq_sge: u32,
    /// The driver's SRQ numbers are below this.
    pub(crate) srq_num_limit: u32,
    /// Outstanding RDMA reads and atomics per QP, as responder.
    pub(crate) max_qp_rd_atom: u32,
    /// Outstanding RDMA reads and atomics per QP, as initiator.
    pub(crate) max_qp_init_rd_atom: u32,
    /// The atomics' atomicity.
    pub(crate) atomic_cap: AtomicCap,
    /// Whether an SRQ can be resized (`modify_srq` with `IB_SRQ_MAX_WR`):
    /// `IB_DEVICE_SRQ_RESIZE`.
    pub(crate) srq_resize: bool,
    /// Whether the device executes IBTA 1.5's ATOMIC WRITE: `IB_DEVICE_ATOMIC_WRITE`.
    pub(crate) atomic_write: bool,
    /// Whether the device executes FLUSH to global visibility (and MRs and QPs may allow
    /// it): `IB_DEVICE_FLUSH_GLOBAL`.
    pub(crate) flush_global: bool,
    /// Memory windows: `max_mw`, 0 for none.
    pub(crate) max_mw: u32,
    /// Whether the device has memory windows, of type 1 at least (and MRs may allow
    /// binding them): `IB_DEVICE_MEM_WINDOW`.
    pub(crate) mem_window: bool,
    /// Whether its type 2 windows are of type 2B (bound to a QP):
    /// `IB_DEVICE_MEM_WINDOW_TYPE_2B`.
    pub(crate) mem_window_type_2b: bool,
}

/// Who asks for a new object: a user process through uverbs, or a kernel client.
pub(crate) enum Caller<'a, T: Driver> {
    /// A process, through uverbs: its context, its driver data and its memory.
    User(UserCaller<'a, T>),
    /// A kernel client (an upper-layer protocol): no context, no udata; the object's fast
    /// path would run in the kernel.
    Kernel,
}

/// A user process creating an object (see [`Caller::User`]).
pub(crate) struct UserCaller<'a, T: Driver> {
    /// The driver's part of the calling process's user context.
    pub(crate) uctx: &'a T::Ucontext,
    /// The command's driver data: the provider's request, and room for the response.
    pub(crate) udata: &'a Udata<'a>,
    /// The calling process's memory, for a queue's ring or record.
    pub(crate) pages: &'a UserPages<'a>,
}

impl<'a, T: Driver> Caller<'a, T> {
    /// The udata of a user caller, `None` for a kernel one.
    pub(crate) fn udata(&self) -> Option<&'a Udata<'a>> {
        match self {
            Self::User(u) => Some(u.udata),
            Self::Kernel => None,
        }
    }
}

/// A process modifying an object through uverbs: the command's driver data, and the
/// process's memory (for a queue's new ring).
pub(crate) struct UserModify<'a> {
    /// The command's driver data.
    pub(crate) udata: &'a Udata<'a>,
    /// The calling process's memory.
    pub(crate) pages: &'a UserPages<'a>,
}

/// What an MR answers once registered.
pub(crate) trait MrObject {
    /// The keys it answers to.
    fn keys(&self) -> MrKeys;
}

/// What a memory window answers once allocated.
pub(crate) trait MwObject {
    /// Its rkey as allocated (`ib_mw.rkey`, which ib_core answers the caller): the key
    /// the window's first bind starts from.
    fn rkey(&self) -> u32;
}

/// What a CQ answers once created.
pub(crate) trait CqObject {
    /// The driver's number for the CQ: events name it ([`EventSink::cq_completion`]);
    /// below [`DeviceAttr::cq_num_limit`].
    ///
    /// [`EventSink::cq_completion`]: super::EventSink::cq_completion
    fn num(&self) -> u32;
    /// Entries it holds (at least those asked for): the caller's `cqe`.
    fn cqe(&self) -> u32;
}

/// What a QP answers once created.
pub(crate) trait QpObject {
    /// Its number (`qp_num`, its key for events); below [`DeviceAttr::qp_num_limit`].
    fn qp_num(&self) -> u32;
    /// The capabilities it has (at least those asked for).
    fn caps(&self) -> QpCaps;
}

/// What an SRQ answers once created.
pub(crate) trait SrqObject {
    /// The driver's number for the SRQ: events name it ([`EventSink::srq_event`]); below
    /// [`DeviceAttr::srq_num_limit`].
    ///
    /// [`EventSink::srq_event`]: super::EventSink::srq_event
    fn num(&self) -> u32;
    /// The capabilities it has (at least those asked for; its `srq_limit` unused).
    fn caps(&self) -> SrqAttr;
}

/// An ib_core device driver.
///
/// ib_core allocates every object (user context, PD, CQ, QP, SRQ, AH, MW) at the
/// size the binding declares for it (MRs, which ib_core does not allocate, the binding
/// allocates), and calls the driver to set it up. The driver answers with an initialiser
/// ([`PinInit`]) of its associated type, which the binding runs in place, inside that
/// allocation (so a driver object may hold pinned members, such as locks, directly), and
/// drops the value when ib_core destroys the object. Destroying cannot fail towards
/// ib_core, so an object's `Drop` is its destroy verb: it releases what the object holds on
/// the hardware. If an initialiser fails, what it had initialised is dropped and ib_core
/// frees the allocation.
///
/// A `#[vtable]` trait: the ops table names an optional verb (one with a default body here)
/// only if the driver implements it.
#[vtable]
pub(crate) trait Driver: Sync + Sized {
    /// The module that owns the driver (`ib_device_ops.owner`): ib_core holds it while a
    /// user has the device open.
    type Module: ModuleMetadata;
    /// The device name ib_core makes unique with a number (`ib_register_device`'s
    /// format, e.g. `c"foo%d"`).
    const NAME: &'static CStr;
    /// The uverbs ABI version of the driver's uapi (`ib_device_ops.uverbs_abi_ver`).
    const UVERBS_ABI_VERSION: u32;
    /// The kind of node.
    const NODE_TYPE: NodeType;
    /// Completion vectors (`ib_device.num_comp_vectors`, at least 1).
    const NUM_COMP_VECTORS: u32;

    /// The driver's part of a user context.
    type Ucontext: Send + Sync;
    /// The driver's part of a PD.
    type Pd: Send + Sync;
    /// The driver's part of an mmap entry (what a user context may map); dropped when the
    /// entry's last reference goes (the context's and every mapping's).
    type MmapEntry: Send + Sync;
    /// The driver's part of an MR.
    type Mr: MrObject + Send + Sync;
    /// The driver's part of a CQ.
    type Cq: CqObject + Send + Sync;
    /// The driver's part of a QP.
    type Qp: QpObject + Send + Sync;
    /// The driver's part of an SRQ.
    type Srq: SrqObject + Send + Sync;
    /// The driver's part of an address handle.
    type Ah: Send + Sync;
    /// The driver's part of a memory window.
    type Mw: MwObject + Send + Sync;
    /// The driver's part of a per-QP counter (`rdma statistic qp`; see `ib/counter.rs`
    /// for what ib_core does with one). A fresh one must hold nothing that needs a drop.
    type Counter: Send + Sync;

    /// The ports, in order: port `n` (1-based, as ib_core numbers them) is `ports()[n - 1]`.
    /// From 1 to 255 of them, the same for the device's whole life (read when it
    /// registers, and by every port verb).
    fn ports(&self) -> &[PortDesc];
    /// Device attributes (`query_device`).
    fn query_device(&self) -> Result<DeviceAttr>;
    /// Attributes of `port` (1-based, checked against [`Driver::ports`]). On RoCE, `active`
    /// is the driver's whole answer: its own link and the netdev's state as
    /// [`Driver::netdev_changed`] last told it.
    fn query_port(&self, port: u32) -> Result<PortAttr>;
    /// Entry `index` of an InfiniBand `port`'s GID table (both checked against
    /// [`Driver::ports`]; never asked for a RoCE port, whose table is ib_core's).
    fn query_gid(&self, port: u32, index: u16) -> Result<[u8; 16]>;
    /// Entry `index` of `port`'s PKey table (both checked against [`Driver::ports`]).
    fn query_pkey(&self, port: u32, index: u16) -> Result<u16>;
    /// ib_core set entry `index` of RoCE `port`'s GID table (both checked against
    /// [`Driver::ports`]) to the RoCEv2 GID `gid` (an IPv4 address as `::ffff:a.b.c.d`).
    /// May sleep. Needed for a RoCE port.
    fn add_gid(&self, _port: u32, _index: u32, _gid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// ib_core cleared entry `index` of RoCE `port`'s GID table. May sleep; ib_core
    /// ignores an error. Needed for a RoCE port.
    fn del_gid(&self, _port: u32, _index: u32) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The names of each port's hardware counters (`rdma statistic show link`, sysfs
    /// `ports/<n>/hw_counters/`), in the order [`Driver::hw_stats`] reads them; a
    /// `static` made by [`hw_stats`](super::hw_stats). Needed with [`Driver::hw_stats`].
    const HW_STATS: &'static [HwStat] = &[];
    /// Reads `port`'s hardware counters (checked against [`Driver::ports`]) into `values`,
    /// one per [`Driver::HW_STATS`] entry, all of them. May sleep. ib_core reads them once
    /// when the port registers (an error fails the registration) and then on request.
    fn hw_stats(&self, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// A new per-QP counter of `port`, no QP bound yet: its data, which may hold no
    /// allocation (ib_core may free it unseen if its first bind fails). With
    /// [`Driver::counter_bind_qp`].
    fn counter_init(&self, _port: u32) -> impl PinInit<Self::Counter> {
        let never = |_: *mut Self::Counter| -> Result<(), core::convert::Infallible> {
            build_error!(VTABLE_DEFAULT_ERROR)
        };
        // SAFETY: the initialiser never runs (a driver without per-QP counters has none of
        // their ops), and does not build if a driver's ops need it and it was not given.
        unsafe { pin_init::pin_init_from_closure(never) }
    }
    /// Binds `qp` to `counter`: from now on the counter counts what the QP does (until
    /// [`Driver::counter_unbind_qp`]). Under the counter's lock; may sleep. `EOPNOTSUPP`
    /// (or any error) leaves the QP unbound. Needed for per-QP counters.
    fn counter_bind_qp(&self, _counter: &Self::Counter, _qp: &Self::Qp) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Unbinds `qp` from `counter`, the counter keeping what the QP did while bound. Under
    /// the counter's lock; may sleep; before the QP is destroyed. An error leaves the QP
    /// bound, except when ib_core unbinds a QP it destroys (it goes on regardless).
    fn counter_unbind_qp(&self, _counter: &Self::Counter, _qp: &Self::Qp) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Reads `counter` into `values`, one per [`Driver::HW_STATS`] entry: what its QPs did
    /// while bound to it, and what the QPs unbound from it did before. Under the
    /// counter's lock; may sleep.
    fn counter_read(&self, _counter: &Self::Counter, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// RoCE `port`'s netdev changed: `up` if the port has a paired netdev that is running
    /// with its carrier on, `false` if it went down, lost its carrier, or is gone
    /// (unregistered). Called under RTNL, in process context, on each change of the
    /// paired netdev (and when one is paired); the driver's port state is its own link
    /// and this, and it dispatches the port events. Needed for a RoCE port.
    fn netdev_changed(&self, _port: u32, _up: bool) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// A new user context; `udata` holds the provider's request and takes the response.
    /// (Only processes have contexts.)
    fn alloc_ucontext<'a>(
        &'a self,
        uctx: &'a UserContext<'a, Self>,
        udata: &'a Udata<'a>,
    ) -> impl PinInit<Self::Ucontext, Error> + 'a;
    /// The device is going away under `uctx`: stop anything that would still reach the
    /// hardware through it. ib_core then destroys its objects and the context as usual.
    /// Optional: without it, ib_core holds the driver's module while a context is open and
    /// unregistering waits for every context to close.
    fn disassociate_ucontext(&self, _uctx: &Self::Ucontext) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// A new PD for `caller`.
    fn alloc_pd<'a>(&'a self, caller: Caller<'a, Self>) -> impl PinInit<Self::Pd, Error> + 'a;
    /// A new MR of `pd` over user memory `mem` (of the calling process, or a dma-buf), for
    /// `caller`.
    fn reg_user_mr<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        pd: &'a Self::Pd,
        mem: &'a UserMemory<'a>,
    ) -> impl PinInit<Self::Mr, Error> + 'a;
    /// Re-registers `mr` in place (`ibv_rereg_mr`) over user memory `mem` of the calling
    /// process on `pd` (what the call changes; the rest as it was), for `caller`. Its keys
    /// stay. On an error `mr` must be as it was.
    fn rereg_user_mr<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        mr: &mut Self::Mr,
        pd: &'a Self::Pd,
        mem: &'a UserMemory<'a>,
    ) -> Result;
    /// A new CQ for `caller`, as `init` asks.
    fn create_cq<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        init: &'a CqInit,
    ) -> impl PinInit<Self::Cq, Error> + 'a;
    /// Moves `cq` to a ring of at least `cqe` entries the process gave (`user`'s driver
    /// data and memory), and sets the CQ's `size` (what ib_core answers the caller) under
    /// the lock that serialises its resizes.
    fn resize_cq(&self, cq: &Self::Cq, cqe: u32, user: UserModify<'_>, size: &CqSize<'_>)
        -> Result;
    /// A new QP for `caller` on `pd`, completing to `send_cq` and `recv_cq`, receiving
    /// through `srq` if given, as `init` asks.
    fn create_qp<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        pd: &'a Self::Pd,
        send_cq: &'a Self::Cq,
        recv_cq: &'a Self::Cq,
        srq: Option<&'a Self::Srq>,
        init: &'a QpInit,
    ) -> impl PinInit<Self::Qp, Error> + 'a;
    /// Modifies `qp`: the attributes `mask` names, from `attr`; `udata` is `None` for a
    /// kernel caller.
    fn modify_qp(
        &self,
        qp: &Self::Qp,
        attr: &QpAttr,
        mask: QpAttrMask,
        udata: Option<&Udata<'_>>,
    ) -> Result;
    /// `qp`'s attributes and capabilities.
    fn query_qp(&self, qp: &Self::Qp) -> Result<(QpAttr, QpCaps)>;
    /// A new SRQ for `caller` on `pd`, as `init` asks.
    fn create_srq<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        pd: &'a Self::Pd,
        init: &'a SrqInit,
    ) -> impl PinInit<Self::Srq, Error> + 'a;
    /// Modifies `srq`: the attributes `mask` names (unchecked by ib_core), from `attr`;
    /// `user` is `None` for a kernel caller (a resize may pin the process's memory).
    fn modify_srq(
        &self,
        srq: &Self::Srq,
        attr: &SrqAttr,
        mask: SrqAttrMask,
        user: Option<UserModify<'_>>,
    ) -> Result;
    /// `srq`'s attributes.
    fn query_srq(&self, srq: &Self::Srq) -> Result<SrqAttr>;
    /// A new address handle for `caller` on `pd`, as `init` asks. It must not sleep: a
    /// kernel caller may be in atomic context.
    fn create_ah<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        pd: &'a Self::Pd,
        init: &'a AhInit,
    ) -> impl PinInit<Self::Ah, Error> + 'a;
    /// A new memory window of type `mw_type` on `pd`, for `caller` (a process: ib_core
    /// allocates windows for uverbs only). Its rkey is [`MwObject::rkey`].
    fn alloc_mw<'a>(
        &'a self,
        caller: Caller<'a, Self>,
        pd: &'a Self::Pd,
        mw_type: MwType,
    ) -> impl PinInit<Self::Mw, Error> + 'a;
}

impl DeviceAttr {
    /// Fills ib_core's view; `sys_image_guid` is the node GUID (ib_core's byte order).
    pub(super) fn fill(&self, attr: &mut super::bindings::ib_device_attr, sys_image_guid: u64) {
        attr.fw_ver = self.fw_ver;
        attr.sys_image_guid = sys_image_guid;
        attr.max_mr_size = self.max_mr_size;
        attr.page_size_cap = self.page_size_cap;
        attr.vendor_id = self.vendor_id;
        attr.vendor_part_id = self.vendor_part_id;
        attr.hw_ver = self.hw_ver;
        attr.max_qp = self.max_qp;
        attr.max_qp_wr = self.max_qp_wr;
        attr.max_send_sge = self.max_send_sge;
        attr.max_recv_sge = self.max_recv_sge;
        attr.max_sge_rd = self.max_sge_rd;
        attr.max_cq = self.max_cq;
        attr.max_cqe = self.max_cqe;
        attr.max_mr = self.max_mr;
        attr.max_pd = self.max_pd;
        attr.max_pkeys = self.max_pkeys;
        attr.max_qp_rd_atom = self.max_qp_rd_atom;
        attr.max_qp_init_rd_atom = self.max_qp_init_rd_atom;
        attr.max_srq = self.max_srq;
        attr.max_srq_wr = self.max_srq_wr;
        attr.max_srq_sge = self.max_srq_sge;
        attr.max_mw = self.max_mw;
        attr.atomic_cap = match self.atomic_cap {
            AtomicCap::None => super::bindings::ib_atomic_cap_IB_ATOMIC_NONE,
            AtomicCap::Hca => super::bindings::ib_atomic_cap_IB_ATOMIC_HCA,
        };
        use super::bindings as b;
        for (on, flag) in [
            (self.srq_resize, b::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE),
            (
                self.atomic_write,
                b::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE,
            ),
            (
                self.flush_global,
                b::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL,
            ),
            (self.mem_window, b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW),
            (
                self.mem_window_type_2b,
                b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B,
            ),
        ] {
            if on {
                // CAST: a flag of the 64-bit `device_cap_flags`.
                attr.device_cap_flags |= flag as u64;
            }
        }
    }
}

impl PortAttr {
    /// Fills ib_core's view of a port described by `desc`.
    pub(super) fn fill(&self, desc: &PortDesc, attr: &mut super::bindings::ib_port_attr) {
        use super::bindings as b;
        if self.active {
            attr.state = b::ib_port_state_IB_PORT_ACTIVE;
            // CAST: the enum's values fit the `u8` field.
            attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
        } else {
            attr.state = b::ib_port_state_IB_PORT_DOWN;
            // CAST: as above.
            attr.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
        }
        attr.max_mtu = b::ib_mtu::from(self.max_mtu);
        attr.active_mtu = b::ib_mtu::from(self.active_mtu);
        attr.gid_tbl_len = desc.gid_tbl_len.into();
        attr.pkey_tbl_len = desc.pkey_tbl_len;
        attr.max_msg_sz = self.max_msg_sz;
        attr.lid = u32::from(self.lid);
        attr.sm_lid = u32::from(self.sm_lid);
        attr.active_width = self.width;
        attr.active_speed = u16::from(self.speed);
    }
}

impl PortDesc {
    /// Fills ib_core's immutable view of the port.
    pub(super) fn fill(&self, imm: &mut super::bindings::ib_port_immutable) {
        imm.pkey_tbl_len = self.pkey_tbl_len.into();
        imm.gid_tbl_len = self.gid_tbl_len.into();
        match self.protocol {
            PortProtocol::IbNoMad => {
                imm.core_cap_flags = super::bindings::RDMA_CORE_CAP_PROT_IB;
                imm.max_mad_size = 0;
            }
            PortProtocol::RoceV2NoMad { .. } => {
                imm.core_cap_flags = super::bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP
                    | super::bindings::RDMA_CORE_CAP_ETH_AH;
                imm.max_mad_size = 0;
            }
        }
    }

    /// The port's `enum rdma_link_layer`.
    pub(super) fn link_layer(&self) -> super::bindings::rdma_link_layer {
        match self.protocol {
            PortProtocol::IbNoMad => super::bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
            PortProtocol::RoceV2NoMad { .. } => {
                super::bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
            }
        }
    }
}

/// The description of `port` (1-based) of device `d`, `None` if it has no such port.
pub(super) fn port_desc<T: Driver>(d: &T, port: u32) -> Option<&PortDesc> {
    let i = usize::try_from(port.checked_sub(1)?).ok()?;
    d.ports().get(i)
}

impl NodeType {
    /// The `enum rdma_node_type` code.
    pub(super) fn raw(self) -> u8 {
        match self {
            // CAST: the node type codes fit the `u8` field.
            Self::IbCa => super::bindings::RDMA_NODE_IB_CA as u8,
        }
    }
}

/// Writes `major.minor.patch` of a `major << 32 | minor << 16 | patch` version into `buf`
/// as a NUL-terminated string, truncated to fit.
pub(super) fn format_fw_version(fw_ver: u64, buf: &mut [u8]) {
    let mut w = Truncating { buf, len: 0 };
    let _ = core::fmt::Write::write_fmt(
        &mut w,
        format_args!(
            "{}.{}.{}",
            fw_ver >> 32,
            (fw_ver >> 16) & 0xffff,
            fw_ver & 0xffff
        ),
    );
    let len = w.len;
    if let Some(b) = buf.get_mut(len) {
        *b = 0;
    }
}

/// Formats into a buffer, keeping one byte for the NUL and dropping what does not fit.
struct Truncating<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for Truncating<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &c in s.as_bytes() {
            if self.len + 1 >= self.buf.len() {
                break;
            }
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = c;
                self.len += 1;
            }
        }
        Ok(())
    }
}
