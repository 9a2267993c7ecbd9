//! A message's bytes as the engine holds them: translated bus-address pieces of guest
//! memory, with the MR registrations they came from, or bytes the NIC holds itself.
//!
//! A translation kept across packets or time (a WQE in flight, a receive buffer or an RDMA
//! WRITE's target kept between packets, a packet to the NIC itself waiting in its queue)
//! is used only after [`Nic::owns`] found each MR it came from still registered, the same
//! registration: once `CMD_DESTROY_MR` completed, the NIC touches none of its pages.

use super::mr::{MrRef, XlateError};
use super::Nic;
use crate::mem::Dma;

/// Where a message's bytes are.
#[derive(Debug)]
pub(super) enum Data {
    /// Bus-address pieces, in order, and the MRs they came from.
    Pieces(Vec<(u64, u64)>, Vec<MrRef>),
    /// Bytes the NIC holds (inline data).
    Inline(Vec<u8>),
}

/// A position in a [`Data`]: piece and offset in it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pos {
    piece: usize,
    off: u64,
}

impl Data {
    /// The position `at` bytes from the start (clamped to the end).
    pub(super) fn seek(&self, at: u64) -> Pos {
        match self {
            Data::Inline(_) => Pos { piece: 0, off: at },
            Data::Pieces(p, _) => {
                let mut left = at;
                for (i, &(_, len)) in p.iter().enumerate() {
                    if left < len {
                        return Pos {
                            piece: i,
                            off: left,
                        };
                    }
                    left -= len;
                }
                Pos {
                    piece: p.len(),
                    off: 0,
                }
            }
        }
    }

    /// Walks the pieces from `pos` for `len` bytes, calling `f(bus address, range of the
    /// walk)` per contiguous piece; false if the data ends first or `f` fails.
    fn walk(
        p: &[(u64, u64)],
        pos: &mut Pos,
        len: usize,
        mut f: impl FnMut(u64, std::ops::Range<usize>) -> bool,
    ) -> bool {
        let mut done = 0usize;
        while done < len {
            let Some(&(addr, plen)) = p.get(pos.piece) else {
                return false;
            };
            let left = plen.saturating_sub(pos.off);
            if left == 0 {
                pos.piece += 1;
                pos.off = 0;
                continue;
            }
            let n = usize::try_from(left).map_or(len - done, |l| l.min(len - done));
            let Some(at) = addr.checked_add(pos.off) else {
                return false;
            };
            if !f(at, done..done + n) {
                return false;
            }
            done += n;
            pos.off += n as u64;
        }
        true
    }

    /// Reads `buf.len()` bytes from `pos` on; false if the data ends or a DMA fails.
    pub(super) fn read(&self, mem: &dyn Dma, pos: &mut Pos, buf: &mut [u8]) -> bool {
        match self {
            Data::Inline(b) => {
                let src = usize::try_from(pos.off)
                    .ok()
                    .and_then(|s| b.get(s..s.checked_add(buf.len())?));
                let Some(src) = src else { return false };
                buf.copy_from_slice(src);
                pos.off += buf.len() as u64;
                true
            }
            Data::Pieces(p, _) => Self::walk(p, pos, buf.len(), |addr, r| {
                buf.get_mut(r)
                    .is_some_and(|dst| mem.dma_read_payload(addr, dst).is_ok())
            }),
        }
    }

    /// Copies `len` bytes from `self` at `spos` to `dst` (pieces) at `dpos`: one DMA copy
    /// per stretch contiguous on both sides, no bounce buffer unless `self` is inline.
    pub(super) fn copy_to(
        &self,
        mem: &dyn Dma,
        spos: &mut Pos,
        dst: &Data,
        dpos: &mut Pos,
        len: usize,
    ) -> bool {
        if let Data::Inline(b) = self {
            let src = usize::try_from(spos.off)
                .ok()
                .and_then(|s| b.get(s..s.checked_add(len)?));
            let Some(src) = src else { return false };
            spos.off += len as u64;
            return dst.write(mem, dpos, src);
        }
        let (Data::Pieces(sp, _), Data::Pieces(dp, _)) = (self, dst) else {
            let mut buf = vec![0u8; len];
            return self.read(mem, spos, &mut buf) && dst.write(mem, dpos, &buf);
        };
        let mut done = 0usize;
        while done < len {
            let (Some(&(sa, sl)), Some(&(da, dl))) = (sp.get(spos.piece), dp.get(dpos.piece))
            else {
                return false;
            };
            let (sleft, dleft) = (sl.saturating_sub(spos.off), dl.saturating_sub(dpos.off));
            if sleft == 0 {
                spos.piece += 1;
                spos.off = 0;
                continue;
            }
            if dleft == 0 {
                dpos.piece += 1;
                dpos.off = 0;
                continue;
            }
            let n = usize::try_from(sleft.min(dleft)).map_or(len - done, |m| m.min(len - done));
            let (Some(s), Some(d)) = (sa.checked_add(spos.off), da.checked_add(dpos.off)) else {
                return false;
            };
            if mem.dma_copy(s, d, n).is_err() {
                return false;
            }
            done += n;
            spos.off += n as u64;
            dpos.off += n as u64;
        }
        true
    }

    /// Writes `buf` from `pos` on (pieces only); false if the data ends or a DMA fails.
    pub(super) fn write(&self, mem: &dyn Dma, pos: &mut Pos, buf: &[u8]) -> bool {
        match self {
            Data::Inline(_) => false,
            Data::Pieces(p, _) => Self::walk(p, pos, buf.len(), |addr, r| {
                buf.get(r)
                    .is_some_and(|src| mem.dma_write_payload(addr, src).is_ok())
            }),
        }
    }
}

impl Data {
    /// No bytes.
    pub(super) fn empty() -> Self {
        Data::Pieces(Vec::new(), Vec::new())
    }

    /// The bus address of data in one piece (an atomic's word: 8 aligned bytes never
    /// cross a page); `None` for inline data or several pieces.
    pub(super) fn single(&self) -> Option<u64> {
        match self {
            Data::Pieces(p, _) if p.len() == 1 => p.first().map(|&(a, _)| a),
            _ => None,
        }
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> u64 {
        match self {
            Data::Inline(b) => b.len() as u64,
            Data::Pieces(p, _) => p.iter().map(|&(_, l)| l).sum(),
        }
    }

    /// Appends `other`'s pieces (and MRs) to `self`'s (pieces only; `other` inline adds
    /// nothing).
    pub(super) fn append(&mut self, other: Data) {
        if let (Data::Pieces(p, m), Data::Pieces(op, om)) = (self, other) {
            for r in om {
                if !m.contains(&r) {
                    m.push(r);
                }
            }
            for (a, l) in op {
                match p.last_mut() {
                    Some((pa, pl)) if pa.checked_add(*pl) == Some(a) => *pl += l,
                    _ => p.push((a, l)),
                }
            }
        }
    }

    /// The `len` bytes from `at` on, as data of their own (the same MRs); `None` past
    /// the end.
    pub(super) fn slice(&self, at: u64, len: u64) -> Option<Data> {
        match self {
            Data::Inline(b) => {
                let s = usize::try_from(at).ok()?;
                let e = s.checked_add(usize::try_from(len).ok()?)?;
                Some(Data::Inline(b.get(s..e)?.to_vec()))
            }
            Data::Pieces(p, m) => {
                let mut pos = self.seek(at);
                let mut out = Vec::new();
                let n = usize::try_from(len).ok()?;
                let ok = Self::walk(p, &mut pos, n, |addr, r| {
                    out.push((addr, r.len() as u64));
                    true
                });
                ok.then(|| Data::Pieces(out, m.clone()))
            }
        }
    }
}

impl Nic {
    /// Whether every MR `data` came from is still registered, the same registration: the
    /// check before each use of a kept translation. Inline data is the NIC's own.
    pub(super) fn owns(&self, data: &Data) -> bool {
        match data {
            Data::Inline(_) => true,
            Data::Pieces(_, mrs) => mrs.iter().all(|&r| self.mr_live(r)),
        }
    }

    /// Translates as [`Nic::translate`] does, keeping the MR's registration with the
    /// pieces ([`Nic::owns`]).
    ///
    /// # Errors
    ///
    /// [`XlateError`]: which check failed.
    pub(super) fn translate_kept(
        &self,
        mem: &dyn Dma,
        key: u32,
        pdn: u32,
        iova: u64,
        len: u64,
        access: u32,
    ) -> Result<Data, XlateError> {
        let pieces = self.translate(mem, key, pdn, iova, len, access)?;
        let r = self.mr_ref(key).ok_or(XlateError::BadKey)?;
        Ok(Data::Pieces(pieces, vec![r]))
    }
}
