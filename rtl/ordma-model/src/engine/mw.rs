//! Memory windows (interface 1.9; soft-RoCE's `rxe_mw.c`): the NIC's window table,
//! `CMD_ALLOC_MW` and `CMD_DEALLOC_MW`. A window's rkey is `hw::MW_KEY_BIT | index << 8 |
//! key` (its slot and the slot's key, as an MR's). Binding, use and invalidation: see
//! `notes/mw-plan.md` (in progress on this branch).

use ordma_hw as hw;
use tracing::debug;

use super::mr::MrRef;
use super::tables::Handle;
use super::Nic;

/// A command's outcome: (status, result).
type Outcome = (u16, u64);

/// What a bound window gives remote peers: a range of one MR registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Binding {
    /// The MR (its registration: a destroyed or re-registered MR leaves the window dead).
    pub(super) mr: MrRef,
    /// The MR's key, for the translation.
    pub(super) mr_key: u32,
    /// First virtual address.
    pub(super) addr: u64,
    /// Bytes.
    pub(super) length: u64,
    /// `hw::ACCESS_REMOTE_*`.
    pub(super) access: u32,
    /// Type 2: the QP it is bound to.
    pub(super) qpn: Option<u32>,
}

/// A memory window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mw {
    /// Its PD.
    pub pdn: u32,
    /// `hw::MW_TYPE_1` or `hw::MW_TYPE_2`.
    pub mw_type: u8,
    /// Its key byte now (a bind of a type 2 window takes the consumer's).
    pub(super) key: u8,
    /// Where it points, while bound.
    pub(super) bound: Option<Binding>,
}

/// The table handle of window rkey `rkey`, if it is a window's.
pub(super) fn handle(rkey: u32) -> Option<Handle> {
    (rkey & hw::MW_KEY_BIT != 0).then(|| Handle::from_key(rkey & !hw::MW_KEY_BIT))
}

impl Nic {
    /// Windows allocated now, for logs and tests.
    pub fn mws_in_use(&self) -> u32 {
        self.mws.in_use()
    }

    /// The window rkey `rkey` names now, if any (its key byte included).
    pub(super) fn mw(&self, rkey: u32) -> Option<&Mw> {
        let h = handle(rkey)?;
        // CAST: the low 8 bits are the key byte by definition.
        self.mws.get_index(h.index).filter(|m| m.key == rkey as u8)
    }

    /// `CMD_ALLOC_MW`: a window of type 1 or 2 on an existing PD; the result is its rkey.
    pub(super) fn alloc_mw(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::AllocMwParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        if !matches!(p.mw_type, hw::MW_TYPE_1 | hw::MW_TYPE_2) || self.pds.get_index(p.pdn).is_none() {
            return (hw::AQ_BAD_PARAM, 0);
        }
        let mw = Mw {
            pdn: p.pdn,
            mw_type: p.mw_type,
            key: 0,
            bound: None,
        };
        let Some(h) = self.mws.insert(mw) else {
            return (hw::AQ_NO_RESOURCES, 0);
        };
        let Some(key) = h.to_key().filter(|k| k & hw::MW_KEY_BIT == 0) else {
            self.mws.remove(h);
            return (hw::AQ_NO_RESOURCES, 0);
        };
        if let Some(m) = self.mws.get_index_mut(h.index) {
            m.key = h.key;
        }
        let rkey = key | hw::MW_KEY_BIT;
        debug!(rkey = format_args!("{rkey:#x}"), pdn = p.pdn, t = p.mw_type, "MW allocated");
        (hw::AQ_OK, u64::from(rkey))
    }

    /// `CMD_DEALLOC_MW`: frees the window its current rkey names, bound or not.
    pub(super) fn dealloc_mw(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::KeyParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let Some(h) = handle(p.key).filter(|_| self.mw(p.key).is_some()) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        self.mws.remove_index(h.index);
        debug!(rkey = format_args!("{:#x}", p.key), "MW freed");
        (hw::AQ_OK, 0)
    }
}
