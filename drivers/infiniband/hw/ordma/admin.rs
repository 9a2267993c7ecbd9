// SPDX-License-Identifier: GPL-2.0

//! The admin queue engine: submit a command, wait for its completion (signalled by MSI-X),
//! time out. The typed commands are in `commands.rs`.

use kernel::{
    device,
    dma::Coherent,
    io::{io_project, Io},
    irq::{self, IrqReturn},
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        barrier::{dma_mb, Read},
        Arc, CondVar, CondVarTimeoutResult, Mutex, SpinLockIrq,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
};

use crate::{
    hw,
    nic::{Bar0, Nic},
};

/// How long a command may take, on the monotonic clock (not jiffies, not affected by
/// signals). Generous: the model runs under TCG on a busy host.
const ADMIN_TIMEOUT: Delta = Delta::from_millis(5000);

/// While a signal is pending, how long each uninterruptible sleep between checks lasts.
const SIGNALLED_POLL: Delta = Delta::from_micros(1000);

/// log2 of the admin queue depth.
pub(crate) const AQ_LOG_DEPTH: u32 = 4;
const AQ_DEPTH: u16 = 1 << AQ_LOG_DEPTH;

/// Submission state, one command in flight at a time.
struct AdminState {
    /// Next SQ slot (free-running).
    prod: u16,
    /// Next CQ slot to read (free-running).
    cq_head: u16,
    /// Next command tag.
    next_id: u32,
    /// A command was abandoned (timeout, or the NIC died): the rings are out of step with
    /// the NIC until a reset. (The caller then treats the NIC as dead.)
    broken: bool,
}

/// Why a command did not succeed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Not sent: the NIC is dead, or the rings are out of step since an earlier command.
    NotSent,
    /// Sent, and not answered within `ADMIN_TIMEOUT`.
    TimedOut,
    /// Sent, and the NIC died (a `FATAL` event) before it answered.
    DiedWaiting,
    /// Answered, for another command.
    WrongId {
        /// The tag the completion carries.
        got: u32,
        /// The command's.
        want: u32,
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
            Self::TimedOut | Self::DiedWaiting | Self::WrongId { .. }
        )
    }
}

/// What the completion interrupt and `fail_all` tell a waiter.
struct Wake {
    /// Interrupts seen.
    irqs: u64,
    /// The NIC is dead: stop waiting.
    dead: bool,
}

/// The admin SQ and CQ in DMA-coherent memory, and the waiter's wake-up.
#[pin_data]
pub(crate) struct AdminQueue {
    sq: Coherent<[[u8; hw::AQ_SQE_SIZE]]>,
    cq: Coherent<[[u8; hw::AQ_CQE_SIZE]]>,
    #[pin]
    state: Mutex<AdminState>,
    /// The lock orders the waiter's check against the wake-up.
    #[pin]
    wake: SpinLockIrq<Wake>,
    #[pin]
    done: CondVar,
}

impl AdminQueue {
    /// Allocates the rings (zeroed: every CQ entry reads as "not yet written").
    pub(crate) fn new(dev: &device::Device<device::Bound>) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            sq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            cq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            state <- new_mutex!(
                AdminState { prod: 0, cq_head: 0, next_id: 1, broken: false },
                "ordma_admin"
            ),
            wake <- new_spinlock_irq!(Wake { irqs: 0, dead: false }, "ordma_admin_wake"),
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

    /// The completion interrupt.
    fn completed(&self) {
        self.wake.lock().irqs += 1;
        self.done.notify_all();
    }

    /// The NIC is dead: commands in flight and to come fail at once with `EIO`.
    pub(crate) fn fail_all(&self) {
        self.wake.lock().dead = true;
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

    /// Runs one command: writes it, rings the doorbell, waits for its completion, and
    /// returns its result. Signals do not interrupt a command: the NIC would still complete
    /// it, and the rings would go out of step. What a failure means is for the caller
    /// ([`Nic::command`]) to act on.
    pub(crate) fn execute(
        &self,
        bar: &Bar0<'_>,
        opcode: u8,
        params: [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<u64, Failure> {
        let mut st = self.state.lock();
        if st.broken || self.wake.lock().dead {
            return Err(Failure::NotSent);
        }
        let cmd_id = st.next_id;
        st.next_id = st.next_id.wrapping_add(1);
        let cmd = hw::AdminCmd {
            opcode,
            cmd_id,
            params,
        };
        let slot = usize::from(st.prod % AQ_DEPTH);
        // PANIC: `slot < AQ_DEPTH`, the ring's length.
        io_project!(self.sq, [panic: slot]).copy_write(cmd.encode());
        st.prod = st.prod.wrapping_add(1);
        // The entry must be visible to the NIC before the doorbell: the MMIO write orders
        // it after the coherent-memory store (writel has the needed barrier).
        bar.write_reg(hw::regs::AQ_SQ_DB::zeroed().with_prod(st.prod));

        let head = st.cq_head;
        let c = match self.wait(head) {
            Ok(c) => c,
            Err(f) => {
                // The NIC may still complete the command: the rings are out of step.
                st.broken = true;
                return Err(f);
            }
        };
        st.cq_head = head.wrapping_add(1);
        if c.cmd_id != cmd_id {
            return Err(Failure::WrongId {
                got: c.cmd_id,
                want: cmd_id,
            });
        }
        match c.status {
            hw::AQ_OK => Ok(c.result),
            status => Err(Failure::Status(status)),
        }
    }

    /// Waits for the completion in slot `head`: until it is written, the NIC dies
    /// ([`Failure::DiedWaiting`]), or `ADMIN_TIMEOUT` passes on the monotonic clock with the
    /// ring checked once more ([`Failure::TimedOut`]).
    fn wait(&self, head: u16) -> Result<hw::AdminCompletion, Failure> {
        let start = Instant::<Monotonic>::now();
        let mut guard = self.wake.lock();
        loop {
            if let Some(c) = self.completion(head) {
                return Ok(c);
            }
            if guard.dead {
                return Err(Failure::DiedWaiting);
            }
            let left = ADMIN_TIMEOUT - start.elapsed();
            if left.is_negative() || left.is_zero() {
                return Err(Failure::TimedOut);
            }
            // CAST: `left` is at most 5000 ms.
            let jiffies = msecs_to_jiffies(left.as_millis_ceil() as u32).max(1);
            if let CondVarTimeoutResult::Signal { .. } =
                self.done.wait_interruptible_timeout(&mut guard, jiffies)
            {
                // A signal (a process being killed while it frees its objects) must not
                // abandon the command: sleep uninterruptibly between checks instead.
                drop(guard);
                fsleep(SIGNALLED_POLL);
                guard = self.wake.lock();
            }
        }
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
