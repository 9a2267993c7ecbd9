//! The RTL datapath: the engine's DMA through the Verilated DMA channel mux
//! (`rtl/hdl/ordma_dma_mux.sv`) and every frame's ICRC from the Verilated ICRC unit
//! (`rtl/hdl/ordma_icrc.sv`), clocked only while the engine has work for them.
//!
//! A DMA becomes requests of 64-bit beats on its channel ([`Chan`]): a header beat (the
//! bus address in bits 0 to 51, the length less one in bits 52 to 63: at most [`MAX_REQ`]
//! bytes a request) and, for a write or an atomic, its data (the last beat zero-padded):
//! a read is a one-beat request, as a read request is on a real DMA interface. Memory is acted on only when a
//! request's last beat leaves the mux, and a write writes the bytes that came out of it,
//! not those that went in. A copy keeps up to [`READS_AHEAD`] read requests queued on the
//! payload-read channel while its writes stream on the payload-write channel, so the two
//! channels compete for the mux.
//!
//! Every port stalls at random (seeded): a channel with a beat to send withholds it, and
//! the host interface refuses the output, each with the probability given. A scoreboard
//! checks the mux from outside as `rtl/ordma-rtl`'s tests do: per channel, each beat out
//! is the oldest beat in (no loss, duplication or reordering, data bit for bit), a
//! request's beats leave together, a beat taken leaves in the next cycle, and a beat is
//! taken whenever one is offered with room for it (no bubble). A violation, a
//! SystemVerilog assertion that fails or a request that makes no progress fails the DMA
//! (the engine reports a DMA error as it would for unmapped memory), is counted
//! (`rtl_violations`, `rtl_assert_failures`) and logged, and the mux is reset.

use std::collections::VecDeque;

use ordma_rtl::{set_beat, Icrc, IcrcIo, Mux, MuxIo, MuxKind, Rng};
use tracing::error;

use super::{Chan, Datapath};
use crate::mem::{Atomic64, Dma, DmaError};

/// The most bytes one request carries.
pub const MAX_REQ: usize = 4096;
/// Read requests a copy keeps queued ahead of its writes.
pub const READS_AHEAD: usize = 4;
/// Cycles without a beat out, with beats pending, before a DMA is declared stuck.
const STUCK: u64 = 10_000;

/// How the co-simulation runs.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The probability that a port stalls in a cycle (0 to below 1).
    pub stalls: f64,
    /// The stalls' seed.
    pub seed: u64,
    /// The mux: the real one, or a test mutant that must be caught.
    pub mux: MuxKind,
}

/// What the RTL did since start-up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// DMA requests through the mux.
    pub requests: u64,
    /// Beats through the mux.
    pub beats: u64,
    /// Cycles the mux was clocked.
    pub mux_cycles: u64,
    /// Frames whose ICRC the ICRC unit computed.
    pub icrc_frames: u64,
    /// Cycles the ICRC unit was clocked.
    pub icrc_cycles: u64,
    /// Port-cycles stalled on purpose (a withheld beat or a refused output).
    pub stall_cycles: u64,
    /// Scoreboard violations (and stuck DMAs).
    pub violations: u64,
}

/// A request on its way in: its beats and the next one to offer.
struct Req {
    beats: Vec<(u64, bool)>,
    next: usize,
}

/// The RTL datapath.
pub struct Rtl {
    cfg: Config,
    mux: Mux,
    icrc: Icrc,
    rng: Rng,
    counts: Counts,
    /// SystemVerilog assertion failures of muxes reset after a violation.
    old_asserts: u64,
}

/// The requests of one DMA operation, per channel, and what leaves the mux.
struct Run {
    queued: [VecDeque<Req>; 4],
    /// The beat each channel offers (held until taken).
    offer: [Option<(u64, bool)>; 4],
    /// The scoreboard's reference: per channel, the beats taken and not yet out.
    taken: [VecDeque<(u64, bool)>; 4],
    /// Per channel, the beats of the request leaving the mux.
    leaving: [Vec<u64>; 4],
    in_locked: Option<usize>,
    out_locked: Option<usize>,
    prev_taken: bool,
    prev_ready: bool,
}

impl Run {
    fn new() -> Self {
        Run {
            queued: Default::default(),
            offer: [None; 4],
            taken: Default::default(),
            leaving: Default::default(),
            in_locked: None,
            out_locked: None,
            prev_taken: false,
            prev_ready: true,
        }
    }

    fn push(&mut self, chan: Chan, header: u64, data: &[u8]) {
        let mut beats = vec![(header, data.is_empty())];
        let n = data.len().div_ceil(8);
        for (i, c) in data.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            beats.push((u64::from_le_bytes(w), i + 1 == n));
        }
        self.queued[chan as usize].push_back(Req { beats, next: 0 });
    }

    fn busy(&self) -> bool {
        self.queued.iter().any(|q| !q.is_empty())
            || self.offer.iter().any(Option::is_some)
            || self.taken.iter().any(|q| !q.is_empty())
    }
}

/// The highest bus address a request can carry, plus one.
const ADDR_END: u64 = 1 << 52;

/// A request's header: `len` (1 to [`MAX_REQ`]) bytes at `addr` (below [`ADDR_END`]).
fn header(addr: u64, len: usize) -> u64 {
    // CAST: len is 1 to MAX_REQ (4096): 12 bits less one.
    (addr & (ADDR_END - 1)) | (((len as u64).wrapping_sub(1) & 0xfff) << 52)
}

/// The address and length of a request's header.
fn unheader(h: u64) -> (u64, usize) {
    // CAST: 12 bits.
    (h & (ADDR_END - 1), (h >> 52) as usize + 1)
}

/// Whether `[addr, addr + len)` can be carried by requests (and is mapped).
fn carried(mem: &dyn Dma, addr: u64, len: usize) -> bool {
    u64::try_from(len)
        .is_ok_and(|l| addr.checked_add(l).is_some_and(|e| e <= ADDR_END) && mem.reachable(addr, l))
}

/// The data bytes of a write request's beats (after its header), `len` of them.
fn data_of(beats: &[u64], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = beats
        .get(1..)?
        .iter()
        .flat_map(|b| b.to_le_bytes())
        .collect();
    if out.len() < len || out.len() - len >= 8 {
        return None;
    }
    out.truncate(len);
    Some(out)
}

impl Rtl {
    /// The blocks out of reset.
    pub fn new(cfg: Config) -> Self {
        Rtl {
            cfg,
            mux: Mux::new(cfg.mux),
            icrc: Icrc::new(),
            rng: Rng::new(cfg.seed),
            counts: Counts::default(),
            old_asserts: 0,
        }
    }

    /// The counters.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// SystemVerilog assertions that failed since start-up.
    pub fn assertion_failures(&self) -> u64 {
        self.old_asserts + self.mux.assertion_failures() + self.icrc.assertion_failures()
    }

    fn stall(&mut self) -> bool {
        let s = self.cfg.stalls > 0.0 && self.rng.chance(self.cfg.stalls);
        if s {
            self.counts.stall_cycles += 1;
        }
        s
    }

    /// Clocks the mux until every request of `run` has left it; `out` acts on each request
    /// as its last beat leaves (channel, beats) and may queue more. `Err` on a violation.
    fn drive(
        &mut self,
        run: &mut Run,
        mut out: impl FnMut(&mut Run, usize, Vec<u64>) -> Result<(), String>,
    ) -> Result<(), String> {
        let asserts = self.mux.assertion_failures();
        let mut quiet = 0u64;
        while run.busy() {
            let mut io = MuxIo {
                out_ready: u8::from(!self.stall()),
                ..MuxIo::default()
            };
            for c in 0..Mux::N {
                if run.offer[c].is_none() && !run.queued[c].is_empty() && !self.stall() {
                    if let Some(r) = run.queued[c].front_mut() {
                        run.offer[c] = r.beats.get(r.next).copied();
                        r.next += 1;
                        if r.next >= r.beats.len() {
                            run.queued[c].pop_front();
                        }
                    }
                }
                if let Some((d, last)) = run.offer[c] {
                    io.in_valid |= 1 << c;
                    io.in_last |= u8::from(last) << c;
                    io.in_data[c] = d;
                }
            }
            self.mux.cycle(&mut io);
            self.counts.mux_cycles += 1;
            if run.prev_taken && io.out_valid == 0 {
                return Err(
                    "bubble: a beat taken in the previous cycle is not on the output".into(),
                );
            }
            quiet += 1;
            if io.out_valid == 1 && io.out_ready == 1 {
                quiet = 0;
                let c = usize::from(io.out_chan);
                if c >= Mux::N || run.out_locked.is_some_and(|l| l != c) {
                    return Err(format!("channel {c}'s beat inside another request"));
                }
                match run.taken[c].pop_front() {
                    Some((d, l)) if d == io.out_data && l == (io.out_last == 1) => {}
                    Some((d, l)) => {
                        return Err(format!(
                            "channel {c}: beat {:#x} last {} out, {d:#x} last {l} expected (lost or reordered)",
                            io.out_data, io.out_last
                        ))
                    }
                    None => {
                        return Err(format!(
                            "channel {c}: beat {:#x} out that never went in",
                            io.out_data
                        ))
                    }
                }
                self.counts.beats += 1;
                run.leaving[c].push(io.out_data);
                if io.out_last == 1 {
                    run.out_locked = None;
                    self.counts.requests += 1;
                    let beats = std::mem::take(&mut run.leaving[c]);
                    out(run, c, beats)?;
                } else {
                    run.out_locked = Some(c);
                }
            }
            let taken = io.in_valid & io.in_ready;
            if taken.count_ones() > 1 || io.in_ready & !io.in_valid != 0 {
                return Err(format!(
                    "in_ready {:#06b} for in_valid {:#06b}",
                    io.in_ready, io.in_valid
                ));
            }
            let eligible = match run.in_locked {
                Some(l) => io.in_valid & (1 << l),
                None => io.in_valid,
            };
            if run.prev_ready && eligible != 0 && taken == 0 {
                return Err(format!(
                    "bubble: channel(s) {eligible:#06b} offered a beat with room free and none was taken"
                ));
            }
            for c in 0..Mux::N {
                if taken & (1 << c) != 0 {
                    if let Some(b) = run.offer[c].take() {
                        run.taken[c].push_back(b);
                        run.in_locked = if b.1 { None } else { Some(c) };
                    }
                }
            }
            run.prev_taken = taken != 0;
            run.prev_ready = io.out_ready == 1;
            if quiet > STUCK {
                return Err(format!("no beat out for {STUCK} cycles with beats pending"));
            }
            if self.mux.assertion_failures() != asserts {
                return Err("a SystemVerilog assertion of the mux failed".into());
            }
        }
        Ok(())
    }

    /// Runs `run` through the mux; on a violation, counts and logs it, resets the mux and
    /// fails with `err`.
    fn go(
        &mut self,
        run: &mut Run,
        err: DmaError,
        out: impl FnMut(&mut Run, usize, Vec<u64>) -> Result<(), String>,
    ) -> Result<(), DmaError> {
        match self.drive(run, out) {
            Ok(()) => Ok(()),
            Err(what) => {
                self.counts.violations += 1;
                error!(addr = format_args!("{:#x}", err.addr), len = err.len, %what, "RTL DMA mux: violation");
                self.old_asserts += self.mux.assertion_failures();
                self.mux = Mux::new(self.cfg.mux);
                Err(err)
            }
        }
    }
}

impl Datapath for Rtl {
    fn read(
        &mut self,
        mem: &dyn Dma,
        chan: Chan,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: buf.len(),
        };
        if buf.is_empty() {
            return mem.dma_read(addr, buf);
        }
        if !carried(mem, addr, buf.len()) {
            return Err(err);
        }
        let mut run = Run::new();
        for (i, c) in buf.chunks(MAX_REQ).enumerate() {
            // CAST: i * MAX_REQ < buf.len(), and addr + buf.len() was checked.
            run.push(chan, header(addr + (i * MAX_REQ) as u64, c.len()), &[]);
        }
        self.go(&mut run, err, |_, _, beats| {
            let (a, n) = unheader(beats.first().copied().ok_or("no header")?);
            // CAST: a request of this read: within buf, or refused just below.
            let off = a.wrapping_sub(addr) as usize;
            let dst = buf
                .get_mut(off..off.saturating_add(n))
                .ok_or_else(|| format!("a read request for {a:#x}+{n} that was never made"))?;
            mem.dma_read(a, dst).map_err(|e| e.to_string())
        })
    }

    fn write(&mut self, mem: &dyn Dma, chan: Chan, addr: u64, data: &[u8]) -> Result<(), DmaError> {
        let err = DmaError {
            addr,
            len: data.len(),
        };
        if data.is_empty() {
            return mem.dma_write(addr, data);
        }
        if !carried(mem, addr, data.len()) {
            return Err(err);
        }
        let mut run = Run::new();
        for (i, c) in data.chunks(MAX_REQ).enumerate() {
            // CAST: i * MAX_REQ < data.len(), and addr + data.len() was checked.
            run.push(chan, header(addr + (i * MAX_REQ) as u64, c.len()), c);
        }
        self.go(&mut run, err, |_, _, beats| write_out(mem, &beats))
    }

    fn copy(&mut self, mem: &dyn Dma, src: u64, dst: u64, len: usize) -> Result<(), DmaError> {
        let err = DmaError { addr: src, len };
        if len == 0 {
            return mem.dma_copy(src, dst, len);
        }
        if !carried(mem, src, len) || !carried(mem, dst, len) {
            return Err(err);
        }
        let chunks = len.div_ceil(MAX_REQ);
        // CAST: i * MAX_REQ < len, and src + len was checked.
        let chunk = |i: usize| (src + (i * MAX_REQ) as u64, MAX_REQ.min(len - i * MAX_REQ));
        let mut run = Run::new();
        let mut next = 0usize;
        while next < chunks.min(READS_AHEAD) {
            let (a, n) = chunk(next);
            run.push(Chan::PayloadRead, header(a, n), &[]);
            next += 1;
        }
        let mut buf = vec![0u8; MAX_REQ];
        self.go(&mut run, err, |run, c, beats| {
            if c == Chan::PayloadWrite as usize {
                return write_out(mem, &beats);
            }
            let (a, n) = unheader(beats.first().copied().ok_or("no header")?);
            let b = buf.get_mut(..n).ok_or("a read past the copy")?;
            mem.dma_read(a, b).map_err(|e| e.to_string())?;
            run.push(
                Chan::PayloadWrite,
                header(dst.wrapping_add(a.wrapping_sub(src)), n),
                b,
            );
            if next < chunks {
                let (a, n) = chunk(next);
                run.push(Chan::PayloadRead, header(a, n), &[]);
                next += 1;
            }
            Ok(())
        })
    }

    fn atomic64(&mut self, mem: &dyn Dma, addr: u64, op: Atomic64) -> Result<u64, DmaError> {
        let err = DmaError { addr, len: 8 };
        if addr % 8 != 0 || !carried(mem, addr, 8) {
            return Err(err);
        }
        let operands = match op {
            Atomic64::CmpSwap { compare, swap } => [compare, swap],
            Atomic64::FetchAdd(a) => [a, 0],
            Atomic64::Store(v) => [v, 0],
        };
        let mut data = [0u8; 16];
        data[..8].copy_from_slice(&operands[0].to_le_bytes());
        data[8..].copy_from_slice(&operands[1].to_le_bytes());
        let mut run = Run::new();
        // The header says 16 bytes (the operands); the operation is on the word at addr.
        run.push(Chan::PayloadWrite, header(addr, 16), &data);
        let mut old = None;
        self.go(&mut run, err, |_, _, beats| {
            let (a, _) = unheader(beats.first().copied().ok_or("no header")?);
            if data_of(&beats, 16).as_deref() != Some(&data[..]) {
                return Err("an atomic's operands changed in the mux".into());
            }
            old = Some(mem.dma_atomic64(a, op).map_err(|e| e.to_string())?);
            Ok(())
        })?;
        old.ok_or(err)
    }

    fn icrc(&mut self, frame: &[u8]) -> Option<u32> {
        let covered = frame.get(..frame.len().checked_sub(4)?)?;
        if covered.len() < ordma_rtl::icrc_headers(covered) {
            return None;
        }
        let beats: Vec<&[u8]> = covered.chunks(64).collect();
        let (mut next, mut offered) = (0usize, false);
        let mut io = IcrcIo::default();
        let limit = 4 * beats.len() as u64 + STUCK;
        for _ in 0..limit {
            io.out_ready = u8::from(!self.stall());
            offered = offered || (next < beats.len() && !self.stall());
            match beats.get(next).filter(|_| offered) {
                Some(b) => {
                    io.in_valid = 1;
                    io.in_last = u8::from(next + 1 == beats.len());
                    set_beat(&mut io, b);
                }
                None => io.in_valid = 0,
            }
            self.icrc.cycle(&mut io);
            self.counts.icrc_cycles += 1;
            if io.in_valid == 1 && io.in_ready == 1 {
                next += 1;
                offered = false;
            }
            if io.out_valid == 1 && io.out_ready == 1 {
                self.counts.icrc_frames += 1;
                // The scoreboard: the unit's ICRC is the model's, IPv4 or IPv6.
                let model = crate::engine::wire::icrc(frame);
                if model != Some(io.out_icrc) {
                    self.counts.violations += 1;
                    error!(
                        len = frame.len(),
                        rtl = io.out_icrc,
                        ?model,
                        "RTL ICRC differs"
                    );
                }
                return Some(io.out_icrc);
            }
        }
        self.counts.violations += 1;
        error!(len = frame.len(), "RTL ICRC unit: no answer");
        self.old_asserts += self.icrc.assertion_failures();
        self.icrc = Icrc::new();
        None
    }

    fn status(&self) -> String {
        let c = self.counts;
        format!(
            " rtl=1 rtl_requests={} rtl_beats={} rtl_mux_cycles={} rtl_icrc_frames={} \
             rtl_icrc_cycles={} rtl_stall_cycles={} rtl_violations={} rtl_assert_failures={}",
            c.requests,
            c.beats,
            c.mux_cycles,
            c.icrc_frames,
            c.icrc_cycles,
            c.stall_cycles,
            c.violations,
            self.assertion_failures()
        )
    }
}

/// Acts on a write request that left the mux: its data, as it came out, to memory.
fn write_out(mem: &dyn Dma, beats: &[u64]) -> Result<(), String> {
    let (a, n) = unheader(
        beats
            .first()
            .copied()
            .ok_or("a write request without its header")?,
    );
    let data = data_of(beats, n).ok_or_else(|| {
        format!(
            "a write of {n} bytes left the mux with {} data beats",
            beats.len().saturating_sub(1)
        )
    })?;
    mem.dma_write(a, &data).map_err(|e| e.to_string())
}
