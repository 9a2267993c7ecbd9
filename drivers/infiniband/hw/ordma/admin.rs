// SPDX-License-Identifier: GPL-2.0

//! The admin queue engine: one command at a time, completions signalled by MSI-X.

use kernel::{
    device,
    dma::Coherent,
    io::{io_project, Io},
    irq::{self, IrqReturn},
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{CondVar, CondVarTimeoutResult, Mutex, SpinLockIrq},
    time::{delay::fsleep, msecs_to_jiffies, Delta, Jiffies},
};

use crate::hw;

/// How long a command may take. Generous: the model runs under TCG on a busy host.
const ADMIN_TIMEOUT_MS: u32 = 5000;

/// While a signal is pending, how long each uninterruptible wait for a completion sleeps,
/// and the jiffies that counts for (at least one: the budget must run out).
const SIGNALLED_POLL_US: i64 = 1000;
const SIGNALLED_POLL_JIFFIES: Jiffies = 1;

/// log2 of the admin queue depth.
pub(crate) const AQ_LOG_DEPTH: u32 = 4;
const AQ_DEPTH: u16 = 1 << AQ_LOG_DEPTH;

/// The admin-completion interrupt: counts interrupts and wakes the waiter.
#[pin_data]
pub(crate) struct AdminIrq {
    /// Interrupts seen; the lock also orders the waiter's check against the wake-up.
    #[pin]
    count: SpinLockIrq<u64>,
    #[pin]
    done: CondVar,
}

impl AdminIrq {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            count <- new_spinlock_irq!(0, "ordma_admin_irq"),
            done <- new_condvar!("ordma_admin_done"),
        })
    }
}

impl irq::Handler for AdminIrq {
    fn handle(&self) -> IrqReturn {
        *self.count.lock() += 1;
        self.done.notify_all();
        IrqReturn::Handled
    }
}

/// Submission state, one command in flight at a time.
struct AdminState {
    /// Next SQ slot (free-running).
    prod: u16,
    /// Next CQ slot to read (free-running).
    cq_head: u16,
    /// Next command tag.
    next_id: u32,
    /// A command timed out: the rings are out of step with the NIC until a reset.
    broken: bool,
}

/// The admin SQ and CQ in DMA-coherent memory.
#[pin_data]
pub(crate) struct AdminQueue {
    sq: Coherent<[[u8; hw::AQ_SQE_SIZE]]>,
    cq: Coherent<[[u8; hw::AQ_CQE_SIZE]]>,
    #[pin]
    state: Mutex<AdminState>,
}

impl AdminQueue {
    /// Allocates the rings (zeroed: every CQ entry reads as "not yet written").
    pub(crate) fn new(dev: &device::Device<device::Bound>) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            sq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            cq: Coherent::zeroed_slice(dev, usize::from(AQ_DEPTH), GFP_KERNEL)?,
            state <- new_mutex!(AdminState { prod: 0, cq_head: 0, next_id: 1, broken: false }, "ordma_admin"),
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

    /// Runs one command: writes it, rings the doorbell, waits for its completion.
    ///
    /// # Errors
    ///
    /// `ETIMEDOUT` if the NIC does not answer in time, `ENOMEM` if the NIC has no room for
    /// the object, `EIO` if the completion does not match the command or reports another
    /// error status (logged). Signals do not interrupt a command.
    pub(crate) fn execute(
        &self,
        dev: &device::Device,
        bar: &crate::driver::Bar0<'_>,
        irq: &AdminIrq,
        opcode: u8,
        params: [u8; hw::AQ_SQE_SIZE - 8],
    ) -> Result<u64> {
        let mut st = self.state.lock();
        if st.broken {
            return Err(EIO);
        }
        let cmd_id = st.next_id;
        st.next_id = st.next_id.wrapping_add(1);
        let cmd = hw::AdminCmd {
            opcode,
            cmd_id,
            params,
        };
        let slot = usize::from(st.prod % AQ_DEPTH);
        io_project!(self.sq, [try: slot]).copy_write(cmd.encode());
        st.prod = st.prod.wrapping_add(1);
        // The entry must be visible to the NIC before the doorbell: the MMIO write orders
        // it after the coherent-memory store (writel has the needed barrier).
        bar.write32(u32::from(st.prod), hw::REG_AQ_SQ_DB);

        let head = st.cq_head;
        let cslot = usize::from(head % AQ_DEPTH);
        let mut remaining = msecs_to_jiffies(ADMIN_TIMEOUT_MS);
        let mut guard = irq.count.lock();
        let c = loop {
            let raw: [u8; hw::AQ_CQE_SIZE] = io_project!(self.cq, [try: cslot]).copy_read();
            let c = hw::AdminCompletion::decode(&raw);
            if c.phase == hw::phase(head, AQ_DEPTH) {
                break c;
            }
            let timed_out = match irq.done.wait_interruptible_timeout(&mut guard, remaining) {
                CondVarTimeoutResult::Woken { jiffies } => {
                    remaining = jiffies;
                    false
                }
                CondVarTimeoutResult::Timeout => true,
                // A signal (a process being killed while it frees its PDs) must not
                // abandon a command the NIC will still complete: the rings would go out of
                // step. Keep waiting, in uninterruptible sleeps, on the same budget.
                CondVarTimeoutResult::Signal { jiffies } => {
                    drop(guard);
                    fsleep(Delta::from_micros(SIGNALLED_POLL_US));
                    guard = irq.count.lock();
                    remaining = jiffies.saturating_sub(SIGNALLED_POLL_JIFFIES);
                    remaining == 0
                }
            };
            if timed_out {
                dev_err!(dev, "admin command {opcode:#x} (id {cmd_id}) timed out\n");
                drop(guard);
                st.broken = true;
                return Err(ETIMEDOUT);
            }
        };
        drop(guard);
        st.cq_head = head.wrapping_add(1);
        if c.cmd_id != cmd_id {
            dev_err!(
                dev,
                "admin completion for id {} while waiting for {cmd_id}\n",
                c.cmd_id
            );
            return Err(EIO);
        }
        match c.status {
            hw::AQ_OK => {}
            // The NIC's table is full: the caller's ENOMEM, not a NIC failure.
            hw::AQ_NO_RESOURCES => {
                dev_dbg!(dev, "admin command {opcode:#x}: no resources\n");
                return Err(ENOMEM);
            }
            status => {
                dev_err!(
                    dev,
                    "admin command {opcode:#x} failed with status {status}\n"
                );
                return Err(EIO);
            }
        }
        Ok(c.result)
    }
}
