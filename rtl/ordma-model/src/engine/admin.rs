//! The admin queue: a submission ring of commands and a completion ring, one function per
//! command.
//!
//! The driver writes entries and then the producer index to `AQ_SQ_DB`. The NIC processes
//! entries in order, writes one completion each and raises MSI-X vector 0 once per batch. A
//! bad command gets an error completion and never stops the NIC. While bus mastering is off
//! the doorbell is validated and latched, and the entries are processed when it is back on.

use ordma_hw as hw;
use tracing::{debug, warn};

use super::counters::{bounded_warn, Anomaly};
use super::{Fault, Interrupts, Nic, Pd};
use crate::mem::Dma;

/// The admin queue pair, once enabled.
#[derive(Debug)]
pub(super) struct AdminQueue {
    sq_base: u64,
    cq_base: u64,
    depth: u16,
    /// Next SQ entry to process (free-running, mod 2^16).
    pub(super) sq_head: u16,
    /// The producer index of the last doorbell: entries up to it are to be processed.
    pub(super) sq_prod: u16,
    /// Next CQ slot to write (free-running, mod 2^16).
    cq_tail: u16,
}

impl AdminQueue {
    /// An empty queue pair of `depth` entries (already validated).
    pub(super) fn new(sq_base: u64, cq_base: u64, depth: u16) -> Self {
        Self {
            sq_base,
            cq_base,
            depth,
            sq_head: 0,
            sq_prod: 0,
            cq_tail: 0,
        }
    }
}

/// A command's outcome: (status, result).
pub(super) type Outcome = (u16, u64);

impl Nic {
    /// A write of `AQ_SQ_DB`: the new producer index.
    pub(super) fn admin_doorbell(&mut self, value: u32, mem: &dyn Dma, irq: &dyn Interrupts) {
        let Some(aq) = self.aq.as_mut() else {
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                value,
                "admin doorbell while the queues are off"
            );
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        };
        // CAST: the producer index is the low 16 bits by definition.
        let prod = value as u16;
        if prod.wrapping_sub(aq.sq_head) > aq.depth || value >> 16 != 0 {
            let (head, depth) = (aq.sq_head, aq.depth);
            bounded_warn!(
                self.counters,
                Anomaly::BadDoorbell,
                value,
                head,
                depth,
                "admin doorbell beyond the queue"
            );
            return self.fatal(hw::ERR_BAD_DOORBELL, mem, irq);
        }
        aq.sq_prod = prod;
        if self.config.fault == Some(Fault::AdminDies) {
            warn!("injected fault: the NIC dies with an admin command in flight");
            return self.fatal(hw::ERR_INTERNAL, mem, irq);
        }
        if !self.bus_master {
            self.refused("admin doorbell latched");
            return;
        }
        self.run_admin(mem, irq);
    }

    /// Processes the admin entries up to the latched producer index.
    pub(super) fn run_admin(&mut self, mem: &dyn Dma, irq: &dyn Interrupts) {
        if !self.bus_master {
            return;
        }
        if self.config.fault == Some(Fault::AdminStuck) {
            if self.aq.as_ref().is_some_and(|aq| aq.sq_head != aq.sq_prod) {
                debug!("injected fault: the admin queue is stuck, commands wait");
            }
            return;
        }
        let gated = self.gate(mem);
        let mut completed = false;
        while let Some(aq) = self.aq.as_ref().filter(|aq| aq.sq_head != aq.sq_prod) {
            let addr = aq.sq_base + u64::from(aq.sq_head % aq.depth) * hw::AQ_SQE_SIZE as u64;
            let mut raw = [0u8; hw::AQ_SQE_SIZE];
            if gated.dma_read(addr, &mut raw).is_err() {
                return self.admin_dma_failed(addr, mem, irq);
            }
            // Answer with the tag even for a malformed entry (it sits at a fixed place).
            let cmd_id = hw::get_le32(&raw, 4).unwrap_or(0);
            let (status, result) = match hw::AdminCmd::decode(&raw) {
                Some(cmd) => self.execute(&cmd, &gated),
                None => {
                    bounded_warn!(
                        self.counters,
                        Anomaly::BadCommand,
                        cmd_id,
                        "admin entry with non-zero reserved bytes"
                    );
                    (hw::AQ_BAD_PARAM, 0)
                }
            };
            if self.config.fault == Some(Fault::AdminLost) {
                warn!(
                    cmd_id,
                    "injected fault: the command ran, its completion is lost"
                );
                self.config.fault = None;
                if let Some(aq) = self.aq.as_mut() {
                    aq.sq_head = aq.sq_head.wrapping_add(1);
                }
                continue;
            }
            let Some(aq) = self.aq.as_mut() else { break };
            let c = hw::AdminCompletion {
                cmd_id,
                status,
                phase: hw::phase(aq.cq_tail, aq.depth),
                result,
            };
            let caddr = aq.cq_base + u64::from(aq.cq_tail % aq.depth) * hw::AQ_CQE_SIZE as u64;
            if gated
                .dma_write_entry(caddr, &c.encode(), hw::AQ_CQE_FLAGS_OFFSET)
                .is_err()
            {
                return self.admin_dma_failed(caddr, mem, irq);
            }
            aq.sq_head = aq.sq_head.wrapping_add(1);
            aq.cq_tail = aq.cq_tail.wrapping_add(1);
            self.commands_completed += 1;
            completed = true;
        }
        if completed {
            self.interrupt(hw::VECTOR_ADMIN, irq);
        }
        // Events the commands raised, after their completions.
        while let Some((kind, data, data2)) = self.deferred_events.pop_front() {
            self.post_event(kind, data, data2, mem, irq);
        }
        // QPs the commands moved to ERR flush; QPs back in RTS send.
        if completed {
            self.run_data_path(mem, irq);
        }
    }

    /// Runs one admin command.
    fn execute(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let outcome = match cmd.opcode {
            hw::CMD_QUERY_DEVICE => self.query_device(cmd, mem),
            hw::CMD_QUERY_PORT => self.query_port(cmd, mem),
            hw::CMD_ALLOC_PD => self.alloc_pd(cmd),
            hw::CMD_DEALLOC_PD => self.dealloc_pd(cmd),
            hw::CMD_CREATE_MR => self.create_mr(cmd, mem),
            hw::CMD_MODIFY_MR => self.modify_mr(cmd, mem),
            hw::CMD_DESTROY_MR => self.destroy_mr(cmd),
            hw::CMD_ALLOC_MW => self.alloc_mw(cmd),
            hw::CMD_DEALLOC_MW => self.dealloc_mw(cmd),
            hw::CMD_CREATE_CQ => self.create_cq(cmd, mem),
            hw::CMD_DESTROY_CQ | hw::CMD_DESTROY_QP
                if self.config.fault == Some(Fault::DestroyFails) =>
            {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadCommand,
                    cmd_id = cmd.cmd_id,
                    "injected fault: the destroy fails"
                );
                (hw::AQ_BAD_PARAM, 0)
            }
            hw::CMD_DESTROY_CQ => self.destroy_cq(cmd),
            hw::CMD_RESIZE_CQ => self.resize_cq(cmd, mem),
            hw::CMD_CREATE_QP => self.create_qp(cmd, mem),
            hw::CMD_MODIFY_QP => self.modify_qp(cmd, mem),
            hw::CMD_QUERY_QP => self.query_qp(cmd, mem),
            hw::CMD_DESTROY_QP => self.destroy_qp(cmd),
            hw::CMD_CREATE_SRQ => self.create_srq(cmd, mem),
            hw::CMD_MODIFY_SRQ => self.modify_srq(cmd, mem),
            hw::CMD_QUERY_SRQ => self.query_srq(cmd, mem),
            hw::CMD_DESTROY_SRQ => self.destroy_srq(cmd),
            hw::CMD_SET_GID => self.set_gid(cmd),
            hw::CMD_QUERY_COUNTERS => self.query_counters(cmd, mem),
            hw::CMD_QUERY_QP_COUNTERS => self.query_qp_counters(cmd, mem),
            _ => (hw::AQ_BAD_OPCODE, 0),
        };
        let (op, cmd_id, status) = (cmd.opcode, cmd.cmd_id, outcome.0);
        match status {
            hw::AQ_OK => {}
            hw::AQ_NO_RESOURCES => {
                bounded_warn!(
                    self.counters,
                    Anomaly::NoResources,
                    op,
                    cmd_id,
                    "admin command: no resources"
                );
            }
            hw::AQ_BAD_ADDRESS => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadAddress,
                    op,
                    cmd_id,
                    "admin command: buffer outside mapped memory"
                );
            }
            _ => {
                bounded_warn!(
                    self.counters,
                    Anomaly::BadCommand,
                    op,
                    cmd_id,
                    status,
                    "admin command failed"
                );
            }
        }
        outcome
    }

    /// Writes a query's response, `min(resp_len, bytes.len())` bytes.
    pub(super) fn respond(mem: &dyn Dma, addr: u64, resp_len: u32, bytes: &[u8]) -> Outcome {
        let len = bytes.len().min(resp_len as usize);
        let Some(bytes) = bytes.get(..len) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        match mem.dma_write(addr, bytes) {
            Ok(()) => (hw::AQ_OK, len as u64),
            Err(_) => (hw::AQ_BAD_ADDRESS, 0),
        }
    }

    /// `CMD_QUERY_DEVICE`: the device attributes.
    fn query_device(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        if self.config.fault == Some(Fault::QueryDeviceError) {
            // Counted (once) and logged as a failed command by `execute`.
            debug!(cmd_id = cmd.cmd_id, "injected fault: QUERY_DEVICE fails");
            return (hw::AQ_BAD_PARAM, 0);
        }
        match hw::QueryDeviceParams::decode(&cmd.params) {
            Some(p) if p.resp_len != 0 => {
                Self::respond(mem, p.resp_addr, p.resp_len, &self.config.attrs.encode())
            }
            _ => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// `CMD_QUERY_PORT`: a port's attributes.
    fn query_port(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let bytes = self.port_attrs().encode();
        self.port_response(cmd, mem, &bytes)
    }

    /// `CMD_QUERY_COUNTERS`: a port's counters.
    fn query_counters(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        let bytes = self.port_counters().encode();
        self.port_response(cmd, mem, &bytes)
    }

    /// `CMD_QUERY_QP_COUNTERS`: a QP's counters.
    fn query_qp_counters(&mut self, cmd: &hw::AdminCmd, mem: &dyn Dma) -> Outcome {
        match hw::QueryQpCountersParams::decode(&cmd.params) {
            Some(p) if p.resp_len != 0 => match self.qp_counters(p.qpn) {
                Some(c) => Self::respond(mem, p.resp_addr, p.resp_len, &c.encode()),
                None => (hw::AQ_BAD_PARAM, 0),
            },
            _ => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// `bytes`, the answer about the port a [`hw::QueryPortParams`] names, to its buffer.
    fn port_response(&self, cmd: &hw::AdminCmd, mem: &dyn Dma, bytes: &[u8]) -> Outcome {
        match hw::QueryPortParams::decode(&cmd.params) {
            Some(p) if p.resp_len != 0 && p.port != 0 && p.port <= self.config.attrs.num_ports => {
                Self::respond(mem, p.resp_addr, p.resp_len, bytes)
            }
            _ => (hw::AQ_BAD_PARAM, 0),
        }
    }

    /// `CMD_ALLOC_PD`: the lowest free PD number.
    fn alloc_pd(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        if cmd.params.iter().any(|&x| x != 0) {
            return (hw::AQ_BAD_PARAM, 0);
        }
        match self.pds.insert(Pd) {
            Some(h) => {
                debug!(pdn = h.index, "PD allocated");
                (hw::AQ_OK, u64::from(h.index))
            }
            None => (hw::AQ_NO_RESOURCES, 0),
        }
    }

    /// `CMD_DEALLOC_PD`: frees a PD; `AQ_BAD_PARAM` while an MR, window, QP or SRQ uses it.
    fn dealloc_pd(&mut self, cmd: &hw::AdminCmd) -> Outcome {
        let Some(p) = hw::PdParams::decode(&cmd.params) else {
            return (hw::AQ_BAD_PARAM, 0);
        };
        let used = self.mrs.iter().any(|(_, mr)| mr.pdn == p.pdn)
            || self.mws.iter().any(|(_, mw)| mw.pdn == p.pdn)
            || self.qps.iter().any(|(_, qp)| qp.pdn == p.pdn)
            || self.srqs.iter().any(|(_, srq)| srq.pdn == p.pdn);
        if used {
            return (hw::AQ_BAD_PARAM, 0);
        }
        match self.pds.remove_index(p.pdn) {
            Some(Pd) => {
                debug!(pdn = p.pdn, "PD freed");
                (hw::AQ_OK, 0)
            }
            None => (hw::AQ_BAD_PARAM, 0),
        }
    }
}
