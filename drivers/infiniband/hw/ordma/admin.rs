// SPDX-License-Identifier: GPL-2.0

//! The admin queue engine: submit a command, wait for its completion (signalled by MSI-X),
//! time out. Commands run in parallel up to the queue's depth, each answer matched to its
//! command by tag; a command that times out fails for its caller alone, and the NIC is
//! taken for failed only when it answers nothing at all for `ADMIN_SILENCE`. The typed
//! commands are in `commands.rs`.

use kernel::{
    device,
    dma::Coherent,
    io::{io_project, Io},
    irq::{self, IrqReturn},
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{
        barrier::{dma_mb, Read},
        Arc, CondVar, CondVarTimeoutResult, SpinLockIrq, SpinLockIrqGuard,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
};

use crate::{
    hw,
    nic::{Bar0, Nic},
};

/// How long a command may take, on the monotonic clock (not jiffies, not affected by
/// signals). Generous: the model runs under TCG on a busy host. A command past it fails
/// with `ETIMEDOUT` for its caller alone.
const ADMIN_TIMEOUT: Delta = Delta::from_millis(5000);

/// How long the NIC may answer no command at all while commands are outstanding before it
/// is taken for failed: two timeouts in a row with nothing answered between them.
const ADMIN_SILENCE: Delta = Delta::from_millis(10000);

/// While a signal is pending, how long each uninterruptible sleep between checks lasts.
const SIGNALLED_POLL: Delta = Delta::from_micros(1000);

/// log2 of the admin queue depth.
pub(crate) const AQ_LOG_DEPTH: u32 = 4;
const AQ_DEPTH: u16 = 1 << AQ_LOG_DEPTH;

/// A submission slot: the command it holds until the NIC answers it, or has at least read
/// it (it reads the ring in order: an answer to a later command says so).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    /// Sent with this tag at this producer index, waiting for its answer.
    Waiting(u32, u16),
    /// Answered (tag, status, result), for its waiter to take.
    Answered(u32, u16, u64),
    /// Its waiter gave up (timeout, the NIC died): the answer is dropped when it comes. The
    /// caller kept what the command reaches ([`Failure::may_have_run`]).
    Abandoned(u32, u16),
}

impl Slot {
    /// The tag of the command the slot holds, if any.
    fn tag(self) -> Option<u32> {
        match self {
            Self::Free => None,
            Self::Waiting(t, _) | Self::Answered(t, ..) | Self::Abandoned(t, _) => Some(t),
        }
    }

    /// The producer index the command was sent at, while it is unanswered.
    fn sent_at(self) -> Option<u16> {
        match self {
            Self::Waiting(_, at) | Self::Abandoned(_, at) => Some(at),
            _ => None,
        }
    }
}

/// The queues' state: several commands in flight, up to the depth, each matched to its
/// answer by its tag.
struct AdminState {
    /// Next SQ slot (free-running).
    prod: u16,
    /// Next CQ slot to read (free-running).
    cq_head: u16,
    /// Next command tag.
    next_id: u32,
    /// What each SQ slot holds; a slot is reused once its command is answered, or, for
    /// an abandoned one, once the NIC answered a command sent after it.
    slots: [Slot; AQ_DEPTH as usize],
    /// Tags of abandoned commands whose slots were reused: an answer that comes for one
    /// late is dropped. A ring, the oldest overwritten.
    late: [u32; AQ_DEPTH as usize],
    /// Next entry of `late` to write.
    late_next: usize,
    /// Since when the NIC has answered nothing while commands were outstanding.
    silent_since: Option<Instant<Monotonic>>,
    /// An answer carried a tag no command has: the tag, and the rings are out of step.
    stray: Option<u32>,
    /// The NIC is dead: stop waiting, send nothing.
    dead: bool,
}

impl AdminState {
    /// Whether a command is sent and not answered (or answered and not yet taken).
    fn outstanding(&self) -> bool {
        self.slots.iter().any(|s| s.sent_at().is_some())
    }

    /// The NIC answered the command sent at `at`: it has read every one sent before, and
    /// the slots of those abandoned are free again (their tags kept in `late`).
    fn read_before(&mut self, at: u16) {
        for s in self.slots.iter_mut() {
            if let Slot::Abandoned(tag, sent) = *s {
                // CAST: the distance between two producer indexes, as a signed offset.
                if (at.wrapping_sub(sent) as i16) > 0 {
                    *s = Slot::Free;
                    if let Some(l) = self.late.get_mut(self.late_next) {
                        *l = tag;
                    }
                    self.late_next = (self.late_next + 1) % self.late.len();
                }
            }
        }
    }
}

/// Why a command did not succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Not sent: the NIC is dead, or its answers are out of step since an earlier command.
    NotSent,
    /// Not sent: every slot held a command the NIC did not answer, for `ADMIN_TIMEOUT`.
    QueueFull,
    /// Sent, and not answered within `ADMIN_TIMEOUT`; the NIC answers others.
    TimedOut,
    /// Sent, not answered, and the NIC answered nothing for `ADMIN_SILENCE`: it has stopped.
    Unresponsive,
    /// Sent, and the NIC died (a `FATAL` event) before it answered.
    DiedWaiting,
    /// The NIC answered with a tag no command has: its answers are out of step.
    Stray {
        /// The tag the answer carries.
        got: u32,
    },
    /// Answered with an error status.
    Status(u16),
}

impl Failure {
    /// Whether the NIC may have carried the command out: it was sent and no completion of
    /// its own said it failed.
    pub(crate) fn may_have_run(self) -> bool {
        matches!(
            self,
            Self::TimedOut | Self::Unresponsive | Self::DiedWaiting | Self::Stray { .. }
        )
    }
}

/// The admin SQ and CQ in DMA-coherent memory, their state, and the waiters' wake-up.
#[pin_data]
pub(crate) struct AdminQueue {
    sq: Coherent<[[u8; hw::AQ_SQE_SIZE]]>,
    cq: Coherent<[[u8; hw::AQ_CQE_SIZE]]>,
    /// An interrupt-safe lock: the completion interrupt takes it to order its wake-up
    /// against a waiter's look at the CQ.
    #[pin]
    state: SpinLockIrq<AdminState>,
    #[pin]
    done: CondVar,
}

impl AdminQueue {
    /// Allocates the rings (zeroed: every CQ entry reads as "not yet written").
    pub(crate) fn new(dev: &device::Device<device::Bound>) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            sq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            cq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            state <- new_spinlock_irq!(
                AdminState {
                    prod: 0,
                    cq_head: 0,
                    next_id: 1,
                    slots: [Slot::Free; AQ_DEPTH as usize],
                    late: [0; AQ_DEPTH as usize],
                    late_next: 0,
                    silent_since: None,
                    stray: None,
                    dead: false,
                },
                "ordma_admin"
            ),
            done <- new_condvar!("ordma_admin_done"),
        })
    }

    /// Bus address of the SQ.
    pub(crate) fn sq_addr(&self) -> u64 {
        self.sq.dma_address()
    }

    /// Bus address of the CQ.
    pub(crate) fn cq_addr(&self) -> u64 {
        self.cq.dma_address()
    }

    /// The completion interrupt: wakes the waiters, which read the answers.
    fn completed(&self) {
        drop(self.state.lock());
        self.done.notify_all();
    }

    /// The NIC is dead: commands in flight and to come fail at once with `EIO`.
    pub(crate) fn fail_all(&self) {
        self.state.lock().dead = true;
        self.done.notify_all();
    }

    /// The completion in slot `head`, if the NIC has written it: its phase first, then,
    /// after a read barrier, the whole entry again (the NIC writes the phase byte last).
    fn completion(&self, head: u16) -> Option<hw::AdminCompletion> {
        let slot = usize::from(head % AQ_DEPTH);
        // PANIC: `slot < AQ_DEPTH`, the ring's length.
        let raw: [u8; hw::AQ_CQE_SIZE] = io_project!(self.cq, [panic: slot]).copy_read();
        if hw::AdminCompletion::decode(&raw).phase != hw::phase(head, AQ_DEPTH) {
            return None;
        }
        dma_mb(Read);
        // PANIC: as above.
        let raw: [u8; hw::AQ_CQE_SIZE] = io_project!(self.cq, [panic: slot]).copy_read();
        Some(hw::AdminCompletion::decode(&raw))
    }

    /// Takes every answer the NIC has written, each to the slot of the command with its
    /// tag; an abandoned command's is dropped (its slot freed). An answer with a tag no
    /// command has puts the queue out of step ([`Failure::Stray`]).
    fn reap(&self, st: &mut AdminState) {
        let mut answered = false;
        while let Some(c) = self.completion(st.cq_head) {
            st.cq_head = st.cq_head.wrapping_add(1);
            answered = true;
            let found = st
                .slots
                .iter_mut()
                .find(|s| s.sent_at().is_some() && s.tag() == Some(c.cmd_id));
            let at = match found {
                Some(s) => {
                    let at = s.sent_at();
                    *s = match *s {
                        Slot::Waiting(..) => Slot::Answered(c.cmd_id, c.status, c.result),
                        _ => Slot::Free,
                    };
                    at
                }
                None => {
                    // A late answer to an abandoned command whose slot was reused: dropped.
                    // Any other tag: the NIC is out of step.
                    if let Some(l) = st
                        .late
                        .iter_mut()
                        .find(|l| **l == c.cmd_id && c.cmd_id != 0)
                    {
                        *l = 0;
                    } else {
                        st.stray = Some(c.cmd_id);
                    }
                    None
                }
            };
            if let Some(at) = at {
                st.read_before(at);
            }
        }
        if answered {
            st.silent_since = st.outstanding().then(Instant::now);
        }
    }

    /// How a wait that ran out ends: the NIC stopped answering altogether, or only this
    /// command (or this submission) failed.
    fn ran_out(st: &AdminState, alone: Failure) -> Failure {
        match st.silent_since {
            Some(since) if since.elapsed() >= ADMIN_SILENCE => Failure::Unresponsive,
            _ => alone,
        }
    }

    /// Runs one command: takes a free slot (waiting while every slot holds a command),
    /// writes it, rings the doorbell, waits for its answer, and returns its result. Several
    /// commands are in flight at once; each waits for its own answer, by its tag. Signals
    /// do not interrupt a command (the NIC would still run it). What a failure means is
    /// for the caller ([`Nic::command`]) to act on.
    pub(crate) fn execute(
        &self,
        bar: &Bar0<'_>,
        opcode: u8,
        params: [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<u64, Failure> {
        let start = Instant::<Monotonic>::now();
        let mut st = self.state.lock();
        let slot = loop {
            self.reap(&mut st);
            if st.dead || st.stray.is_some() {
                return Err(Failure::NotSent);
            }
            let slot = usize::from(st.prod % AQ_DEPTH);
            if st.slots.get(slot) == Some(&Slot::Free) {
                break slot;
            }
            let waited;
            (st, waited) = self.wait(st, start);
            if !waited {
                return Err(Self::ran_out(&st, Failure::QueueFull));
            }
        };
        let cmd_id = st.next_id;
        st.next_id = st.next_id.wrapping_add(1).max(1);
        let cmd = hw::AdminCmd {
            opcode,
            cmd_id,
            params,
        };
        // PANIC: `slot < AQ_DEPTH`, the ring's length.
        io_project!(self.sq, [panic: slot]).copy_write(cmd.encode());
        let at = st.prod;
        if let Some(s) = st.slots.get_mut(slot) {
            *s = Slot::Waiting(cmd_id, at);
        }
        if st.silent_since.is_none() {
            st.silent_since = Some(Instant::now());
        }
        st.prod = st.prod.wrapping_add(1);
        // The entry must be visible to the NIC before the doorbell: the MMIO write orders
        // it after the coherent-memory store (writel has the needed barrier).
        bar.write_reg(hw::regs::AQ_SQ_DB::zeroed().with_prod(st.prod));

        let abandon = |st: &mut AdminState, f: Failure| {
            if let Some(s) = st.slots.get_mut(slot) {
                *s = Slot::Abandoned(cmd_id, at);
            }
            Err(f)
        };
        loop {
            self.reap(&mut st);
            if let Some(&Slot::Answered(_, status, result)) = st.slots.get(slot) {
                if let Some(s) = st.slots.get_mut(slot) {
                    *s = Slot::Free;
                }
                // A slot is free for a command waiting for one.
                self.done.notify_all();
                return match status {
                    hw::AQ_OK => Ok(result),
                    status => Err(Failure::Status(status)),
                };
            }
            if let Some(got) = st.stray {
                return abandon(&mut st, Failure::Stray { got });
            }
            if st.dead {
                return abandon(&mut st, Failure::DiedWaiting);
            }
            let waited;
            (st, waited) = self.wait(st, start);
            if !waited {
                let f = Self::ran_out(&st, Failure::TimedOut);
                return abandon(&mut st, f);
            }
        }
    }

    /// Waits for an interrupt (or a freed slot) until `ADMIN_TIMEOUT` after `start`, the
    /// lock released meanwhile; false once that time has passed. The caller looks at the CQ
    /// again either way.
    fn wait<'a>(
        &'a self,
        mut st: SpinLockIrqGuard<'a, AdminState>,
        start: Instant<Monotonic>,
    ) -> (SpinLockIrqGuard<'a, AdminState>, bool) {
        let left = ADMIN_TIMEOUT - start.elapsed();
        if left.is_negative() || left.is_zero() {
            return (st, false);
        }
        // CAST: `left` is at most 5000 ms.
        let jiffies = msecs_to_jiffies(left.as_millis_ceil() as u32).max(1);
        if let CondVarTimeoutResult::Signal { .. } =
            self.done.wait_interruptible_timeout(&mut st, jiffies)
        {
            // A signal (a process being killed while it frees its objects) must not
            // abandon the command: sleep uninterruptibly between checks instead.
            drop(st);
            fsleep(SIGNALLED_POLL);
            st = self.state.lock();
        }
        (st, true)
    }
}

/// The admin-completion interrupt handler.
pub(crate) struct AdminIrq<'bound>(pub(crate) Arc<Nic<'bound>>);

impl irq::Handler for AdminIrq<'_> {
    fn handle(&self) -> IrqReturn {
        self.0.admin.completed();
        IrqReturn::Handled
    }
}
