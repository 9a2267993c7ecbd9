//! The mux's scoreboard: random request mixes from four channels, with random stalls on
//! every port, checked against a reference of per-channel order.
//!
//! The reference is a queue per channel of the beats the mux took (`in_valid && in_ready`);
//! every beat out must be the head of its channel's queue (no loss, no duplicate, no
//! reordering, data bit for bit), a request's beats leave together, and at the end every
//! queue is empty. From outside, as open-rdma's `checkFullyPipeline` did: a beat taken in
//! one cycle is on the output in the next, and when the output was ready in the previous
//! cycle (so the mux has room) and a channel that may be granted offers a beat, a beat is
//! taken: no bubble unless a port stalls. Fairness: a request waits for at most the beats
//! of one request of each other channel (and the two the mux holds).

use std::collections::VecDeque;

use crate::{Mux, MuxIo, MuxKind, Rng};

/// How often each port stalls.
#[derive(Debug, Clone, Copy)]
pub struct Stalls {
    /// Probability that a channel with a beat to send offers it in a cycle.
    pub offer: f64,
    /// Probability that the output is ready in a cycle.
    pub ready: f64,
}

/// What a run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    /// Requests sent (all channels).
    pub requests: u64,
    /// Beats through the mux.
    pub beats: u64,
    /// Clock cycles.
    pub cycles: u64,
    /// The longest wait of a request's first beat, in beats of other requests.
    pub max_wait: u64,
}

/// Longest request, in beats.
pub const MAX_LEN: u64 = 16;

/// One run: `requests` random requests (1 to [`MAX_LEN`] beats, random data) spread over
/// the channels, through a mux of `kind` with `stalls`. `Err` names the first violation,
/// with the cycle it happened in.
pub fn run(kind: MuxKind, seed: u64, requests: u64, stalls: Stalls) -> Result<Stats, String> {
    let mut rng = Rng::new(seed);
    let mut mux = Mux::new(kind);
    let n = Mux::N;
    // Each channel's remaining requests, and the beat it offers (held until taken).
    let mut left = [0u64; 4];
    for _ in 0..requests {
        left[rng.range(0, n as u64) as usize] += 1;
    }
    let mut beats_left = [0u64; 4]; // beats left in the current request
    let mut offer: [Option<(u64, bool)>; 4] = [None; 4];
    let mut queue: Vec<VecDeque<(u64, bool)>> = vec![VecDeque::new(); n];
    let mut st = Stats {
        requests,
        ..Stats::default()
    };
    // The channel in the middle of a request at the input (granted) and at the output.
    let mut in_locked: Option<usize> = None;
    let mut out_locked: Option<usize> = None;
    let mut wait = [0u64; 4];
    let mut prev_taken = false;
    let mut prev_ready = true;
    let mut idle = 0u64;
    let mut cycle = 0u64;
    loop {
        let draining = left.iter().all(|&l| l == 0) && beats_left.iter().all(|&b| b == 0);
        let mut io = MuxIo {
            out_ready: u8::from(draining || rng.chance(stalls.ready)),
            ..MuxIo::default()
        };
        for c in 0..n {
            if offer[c].is_none() && rng.chance(stalls.offer) {
                if beats_left[c] == 0 && left[c] > 0 {
                    left[c] -= 1;
                    beats_left[c] = rng.range(1, MAX_LEN + 1);
                }
                if beats_left[c] > 0 {
                    beats_left[c] -= 1;
                    offer[c] = Some((rng.next_u64(), beats_left[c] == 0));
                }
            }
            if let Some((d, last)) = offer[c] {
                io.in_valid |= 1 << c;
                io.in_last |= u8::from(last) << c;
                io.in_data[c] = d;
            }
        }
        mux.cycle(&mut io);
        // The output's beat, against its channel's queue.
        if prev_taken && io.out_valid == 0 {
            return fail(
                cycle,
                "bubble: a beat taken in the previous cycle is not on the output".into(),
            );
        }
        if io.out_valid == 1 && io.out_ready == 1 {
            let c = usize::from(io.out_chan);
            if c >= n {
                return fail(cycle, format!("beat out on channel {c}"));
            }
            if out_locked.is_some_and(|l| l != c) {
                return fail(
                    cycle,
                    format!("channel {c}'s beat inside channel {out_locked:?}'s request"),
                );
            }
            match queue[c].pop_front() {
                Some((d, l)) if d == io.out_data && l == (io.out_last == 1) => {}
                Some((d, l)) => {
                    return fail(cycle, format!(
                        "channel {c}: beat {:#x} last {} out, {d:#x} last {l} expected (lost or reordered)",
                        io.out_data, io.out_last
                    ))
                }
                None => return fail(cycle, format!("channel {c}: beat {:#x} out that never went in", io.out_data)),
            }
            out_locked = if io.out_last == 1 { None } else { Some(c) };
            st.beats += 1;
        }
        // The beats taken.
        let taken = io.in_valid & io.in_ready;
        if taken.count_ones() > 1 || io.in_ready & !io.in_valid != 0 {
            return fail(
                cycle,
                format!(
                    "in_ready {:#06b} for in_valid {:#06b}",
                    io.in_ready, io.in_valid
                ),
            );
        }
        let eligible = match in_locked {
            Some(l) => io.in_valid & (1 << l),
            None => io.in_valid,
        };
        if prev_ready && eligible != 0 && taken == 0 {
            return fail(cycle, format!(
                "bubble: channel(s) {eligible:#06b} offered a beat with the mux's room free and none was taken"
            ));
        }
        for c in 0..n {
            if taken & (1 << c) != 0 {
                let Some(b) = offer[c].take() else {
                    return fail(cycle, format!("channel {c} taken without an offer"));
                };
                queue[c].push_back(b);
                in_locked = if b.1 { None } else { Some(c) };
                wait[c] = 0;
            } else if offer[c].is_some() && in_locked != Some(c) {
                wait[c] += taken.count_ones() as u64;
                st.max_wait = st.max_wait.max(wait[c]);
                if wait[c] > (n as u64 - 1) * MAX_LEN + 2 {
                    return fail(
                        cycle,
                        format!(
                            "channel {c} starved: {} beats of others while it waited",
                            wait[c]
                        ),
                    );
                }
            }
        }
        let held: usize = queue.iter().map(VecDeque::len).sum();
        if held > 2 {
            return fail(
                cycle,
                format!("{held} beats taken and not out: the mux holds two"),
            );
        }
        prev_taken = taken != 0;
        prev_ready = io.out_ready == 1;
        cycle += 1;
        if draining && offer.iter().all(Option::is_none) && held == 0 {
            idle += 1;
            if idle > 4 {
                break;
            }
        }
        if cycle > 64 * requests * MAX_LEN + 1000 {
            return fail(cycle, "no progress".into());
        }
    }
    st.cycles = mux.cycles();
    match mux.assertion_failures() {
        0 => Ok(st),
        k => Err(format!(
            "{k} SystemVerilog assertion(s) failed (Verilator's messages above)"
        )),
    }
}

fn fail(cycle: u64, what: String) -> Result<Stats, String> {
    Err(format!("cycle {cycle}: {what}"))
}
