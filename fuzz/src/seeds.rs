//! The seed corpora (`fuzz/corpus/<target>/`): real WQEs, frames and admin commands, as
//! the rig and the driver make them, in the targets' scripts. `cargo test -p ordma-fuzz
//! -- --ignored write_seeds` writes them again (after a change of a script's format or of
//! the rig).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordma_hw as hw;
use ordma_model::engine::port;
use ordma_model::engine::wire::{self, Batch, Wire};

use crate::common::rig::{self, sge, split, wqe, Rig, BIG_VA, SMALL_VA};
use crate::common::BUF;
use crate::script::Writer;
use crate::{admin, frame, wqe as w};

/// Every seed: (target, name, bytes).
pub fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, s) in wqe_seeds() {
        out.push(("wqe", name, s));
    }
    for (name, s) in frame_seeds() {
        out.push(("frame", name, s));
    }
    for (name, s) in admin_seeds() {
        out.push(("admin", name, s));
    }
    out
}

/// A send WQE's bytes: the header, then SGEs or inline data.
fn send_bytes(wq: hw::SendWqe, sges: &[hw::Sge], inline: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; hw::SendWqe::sge_offset(sges.len().max(1)) + inline.len()];
    wq.encode_into(&mut b);
    for (i, s) in sges.iter().enumerate() {
        s.encode_into(&mut b, hw::SendWqe::sge_offset(i));
    }
    let at = hw::SendWqe::sge_offset(0);
    b[at..at + inline.len()].copy_from_slice(inline);
    b
}

/// A receive WQE's bytes.
fn recv_bytes(sges: &[hw::Sge]) -> Vec<u8> {
    let mut b = vec![0u8; hw::RecvWqe::sge_offset(sges.len())];
    // CAST: a handful.
    hw::RecvWqe {
        num_sge: sges.len() as u8,
    }
    .encode_into(&mut b);
    for (i, s) in sges.iter().enumerate() {
        s.encode_into(&mut b, hw::RecvWqe::sge_offset(i));
    }
    b
}

fn wqe_seeds() -> Vec<(String, Vec<u8>)> {
    // The rig's keys: every rig is built alike.
    let r = Rig::new();
    let (big, small, ro) = (r.big, r.small, r.ro);
    drop(r);
    let signaled = hw::WQE_FLAG_SIGNALED;
    let mut out = Vec::new();
    // SEND with immediate, three SGEs, into a receive of two on B; then poll.
    let mut s = Writer::new();
    s.u8(w::OP_RECV + 1)
        .chunk(&recv_bytes(&split(BIG_VA + 0x10_0000, 9000, 2, big)));
    let mut send = wqe(hw::WR_SEND_IMM, signaled | hw::WQE_FLAG_SOLICITED, 3);
    send.imm = 0x1234_5678;
    s.u8(w::OP_SEND).u8(1).chunk(&send_bytes(
        send,
        &split(SMALL_VA + 100, 5000, 3, small),
        &[],
    ));
    s.u8(w::OP_POLL);
    out.push(("send-recv".into(), s.finish()));
    // Inline SEND, WRITE, WRITE with immediate, READ from A to B, one doorbell.
    let mut s = Writer::new();
    let mut inl = wqe(hw::WR_SEND, signaled, 0);
    inl.flags |= hw::WQE_FLAG_INLINE;
    inl.inline_len = 100;
    s.u8(w::OP_RECV + 1)
        .chunk(&recv_bytes(&[sge(SMALL_VA, 4096, small)]));
    s.u8(w::OP_SEND)
        .u8(0)
        .chunk(&send_bytes(inl, &[], &rig::bytes(1, 100)));
    let mut wr = wqe(hw::WR_RDMA_WRITE, 0, 1);
    (wr.remote_addr, wr.rkey) = (BIG_VA + 0x20_0000, big);
    s.u8(w::OP_SEND)
        .u8(0)
        .chunk(&send_bytes(wr, &[sge(SMALL_VA, 300, small)], &[]));
    s.u8(w::OP_RECV + 1).chunk(&recv_bytes(&[]));
    let mut wi = wqe(hw::WR_RDMA_WRITE_IMM, signaled, 1);
    (wi.remote_addr, wi.rkey, wi.imm) = (BIG_VA + 0x30_0000, big, 7);
    s.u8(w::OP_SEND)
        .u8(0)
        .chunk(&send_bytes(wi, &[sge(SMALL_VA, 4097, small)], &[]));
    let mut rd = wqe(hw::WR_RDMA_READ, signaled | hw::WQE_FLAG_FENCE, 2);
    (rd.remote_addr, rd.rkey) = (BIG_VA + 0x30_0000, big);
    s.u8(w::OP_SEND).u8(1).chunk(&send_bytes(
        rd,
        &split(SMALL_VA + 0x8000, 4097, 2, small),
        &[],
    ));
    s.u8(w::OP_POLL);
    out.push(("write-read".into(), s.finish()));
    // A WRITE to a read-only MR, a READ into one; the QP to ERR with WQEs posted; SQD and
    // back.
    let mut s = Writer::new();
    let mut bad = wqe(hw::WR_RDMA_WRITE, signaled, 1);
    (bad.remote_addr, bad.rkey) = (0x3_0000_0000, ro);
    s.u8(w::OP_SEND)
        .u8(1)
        .chunk(&send_bytes(bad, &[sge(SMALL_VA, 64, small)], &[]));
    s.u8(w::OP_POLL);
    s.u8(w::OP_STATE).u8(2);
    s.u8(w::OP_SEND)
        .u8(0)
        .chunk(&send_bytes(wr, &[sge(SMALL_VA, 64, small)], &[]));
    s.u8(w::OP_STATE).u8(4);
    s.u8(w::OP_SEND)
        .u8(0)
        .chunk(&send_bytes(rd, &[sge(0x3_0000_0000, 64, ro)], &[]));
    s.u8(w::OP_STATE).u8(0);
    s.u8(w::OP_RECV)
        .chunk(&recv_bytes(&[sge(SMALL_VA, 64, small)]));
    s.u8(w::OP_POLL);
    out.push(("errors-states".into(), s.finish()));
    // An RNR: a SEND with no receive, the timer, then the receive.
    let mut s = Writer::new();
    s.u8(w::OP_SEND).u8(1).chunk(&send_bytes(
        wqe(hw::WR_SEND, signaled, 1),
        &[sge(SMALL_VA, 10, small)],
        &[],
    ));
    s.u8(w::OP_TICK).u8(1);
    s.u8(w::OP_RECV + 1)
        .chunk(&recv_bytes(&[sge(SMALL_VA, 64, small)]));
    s.u8(w::OP_TICK).u8(1);
    s.u8(w::OP_POLL);
    out.push(("rnr".into(), s.finish()));
    // Atomics from A to B's small MR: a compare and swap, a fetch and add, one misaligned.
    let mut s = Writer::new();
    let seg = hw::AtomicSeg {
        compare_add: 0,
        swap: 5,
    };
    let ops = [
        (hw::WR_ATOMIC_CMP_AND_SWP, seg, SMALL_VA + 0x100),
        (
            hw::WR_ATOMIC_FETCH_AND_ADD,
            hw::AtomicSeg { swap: 0, ..seg },
            SMALL_VA + 0x100,
        ),
        (
            hw::WR_ATOMIC_FETCH_AND_ADD,
            hw::AtomicSeg { swap: 0, ..seg },
            SMALL_VA + 0x104,
        ),
    ];
    for (k, (op, seg, va)) in ops.into_iter().enumerate() {
        let mut at = wqe(op, signaled, 1);
        (at.remote_addr, at.rkey) = (va, small);
        let mut b = vec![0u8; hw::SendWqe::atomic_sge_offset(1)];
        at.encode_into(&mut b);
        seg.encode_into(&mut b);
        sge(BIG_VA + 8 * k as u64, 8, big).encode_into(&mut b, hw::SendWqe::atomic_sge_offset(0));
        s.u8(w::OP_SEND).u8(1).chunk(&b);
    }
    s.u8(w::OP_POLL);
    out.push(("atomics".into(), s.finish()));
    // Doorbells: a CQ arm, SQ and RQ doorbells of the QPs and of a QP that does not exist.
    let mut s = Writer::new();
    let page = rig::PAGE * hw::DB_PAGE_SIZE as u32;
    for (reg, v) in [
        (hw::DB_CQ_ARM, hw::db_value(1, 0)),
        (hw::DB_CQ_ARM_SOLICITED, hw::db_value(2, 0)),
        (hw::DB_SQ, hw::db_value(hw::QPN_FIRST, 1)),
        (hw::DB_RQ, hw::db_value(hw::QPN_FIRST + 1, 1)),
        (hw::DB_SQ, hw::db_value(999, 1)),
    ] {
        // CAST: a doorbell offset.
        s.u8(w::OP_DOORBELL).u32(page + reg as u32).u8(0).u32(v);
    }
    out.push(("doorbells".into(), s.finish()));
    // The SRQ: two WQEs posted (slot 1 linked past slot 2), C sends to itself twice, the
    // limit armed, a third SEND finds none (RNR), a WQE and a doorbell beyond the ring, C
    // to ERR with a SEND waiting, polled.
    let mut s = Writer::new();
    s.u8(w::OP_SRQ)
        .u8(0)
        .u8(1)
        .chunk(&srq_bytes(1, &[sge(SMALL_VA + 0x1000, 4096, small)]));
    s.u8(w::OP_SRQ)
        .u8(1)
        .u8(1)
        .chunk(&srq_bytes(3, &split(SMALL_VA + 0x2000, 4000, 2, small)));
    s.u8(w::OP_SRQ_CTL).u8(128).u32(1);
    for n in [3000, 100, 50] {
        s.u8(w::OP_SEND_C).u8(1).chunk(&send_bytes(
            wqe(hw::WR_SEND, signaled, 1),
            &[sge(BIG_VA, n, big)],
            &[],
        ));
    }
    s.u8(w::OP_TICK).u8(1);
    s.u8(w::OP_SRQ)
        .u8(3)
        .u8(3)
        .chunk(&srq_bytes(4, &[sge(SMALL_VA, 64, small)]));
    s.u8(w::OP_SRQ_CTL).u8(0).u32(0);
    s.u8(w::OP_POLL);
    out.push(("srq".into(), s.finish()));
    out
}

/// An SRQ WQE's bytes, linked to `next`.
fn srq_bytes(next: u16, sges: &[hw::Sge]) -> Vec<u8> {
    let mut b = recv_bytes(sges);
    // CAST: a handful.
    hw::SrqWqe {
        num_sge: sges.len() as u8,
        next,
    }
    .encode_into(&mut b);
    b
}

type Queue = Arc<Mutex<VecDeque<(u16, Vec<u8>)>>>;

/// An in-memory wire between the seed generator's two NICs.
struct QueueWire(Queue);

impl Wire for QueueWire {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        // The LID of an InfiniBand port's MAC (`port::lid_mac`).
        let dlid = u16::from_be_bytes([dmac[4], dmac[5]]);
        if let Ok(mut q) = self.0.lock() {
            q.push_back((dlid, frame.to_vec()));
        }
    }
}

/// NIC 1 (QP A) talking to the `frame` target's NIC 2 (QP B): A sends a SEND of three
/// packets, a SEND with immediate, a WRITE, a WRITE with immediate, a READ, a compare and
/// swap and a fetch and add; B's own WRITE, READ, SEND and fetch and add (the target's
/// start) are answered. The frames NIC 2 received, in
/// order.
pub fn conversation() -> Vec<Vec<u8>> {
    let q = Queue::default();
    let mut n1 = Rig::bare(frame::PEER_LID);
    n1.nic.set_wire(Some(Box::new(QueueWire(Arc::clone(&q)))));
    let (a, b) = (n1.a.qpn, n1.b.qpn);
    n1.connect(a, b, 100, 500, |at| {
        at.ah.dlid = frame::LID;
        at.timeout = 10;
        at.path_mtu = frame::MTU_256;
    });
    let (big, small) = (n1.big, n1.small);
    n1.fill(BIG_VA, &rig::bytes(1, 0x2000));
    n1.recv('a', &[sge(SMALL_VA + 0x3000, 0x1000, small)]);
    let mut n2 = frame::nic(Box::new(QueueWire(Arc::clone(&q))));
    let signaled = hw::WQE_FLAG_SIGNALED;
    n1.send(
        'a',
        wqe(hw::WR_SEND, signaled, 1),
        &[sge(BIG_VA, 600, big)],
        &[],
    );
    let mut si = wqe(hw::WR_SEND_IMM, signaled | hw::WQE_FLAG_SOLICITED, 0);
    (si.flags, si.inline_len, si.imm) = (si.flags | hw::WQE_FLAG_INLINE, 8, 0x0102_0304);
    n1.send('a', si, &[], &rig::bytes(3, 8));
    let mut wr = wqe(hw::WR_RDMA_WRITE, signaled, 1);
    (wr.remote_addr, wr.rkey) = (BIG_VA + 0x4000, big);
    n1.send('a', wr, &[sge(BIG_VA, 600, big)], &[]);
    let mut wi = wqe(hw::WR_RDMA_WRITE_IMM, signaled, 1);
    (wi.remote_addr, wi.rkey, wi.imm) = (BIG_VA + 0x5000, big, 0x0a0b_0c0d);
    n1.send('a', wi, &[sge(BIG_VA, 10, big)], &[]);
    let mut rd = wqe(hw::WR_RDMA_READ, signaled, 1);
    (rd.remote_addr, rd.rkey) = (SMALL_VA + 0x2000, small);
    n1.send('a', rd, &[sge(BIG_VA + 0x6000, 600, big)], &[]);
    let word = SMALL_VA + 0x3f00;
    let swap = hw::AtomicSeg {
        compare_add: frame::ATOMIC_WORD,
        swap: frame::ATOMIC_WORD + 8,
    };
    let op = hw::WR_ATOMIC_CMP_AND_SWP;
    n1.put_atomic(
        'a',
        op,
        signaled,
        word,
        small,
        swap,
        &[sge(BIG_VA + 0x7000, 8, big)],
    );
    let add = hw::AtomicSeg {
        compare_add: 8,
        swap: 0,
    };
    let op = hw::WR_ATOMIC_FETCH_AND_ADD;
    n1.put_atomic(
        'a',
        op,
        signaled,
        word,
        small,
        add,
        &[sge(BIG_VA + 0x7008, 8, big)],
    );
    n1.ring_sq('a');
    let mut got = Vec::new();
    let mut ticks = 0;
    loop {
        let next = q.lock().ok().and_then(|mut q| q.pop_front());
        match next {
            Some((frame::LID, f)) => {
                n2.nic.receive_frame(&f, &n2.mem, &n2.irq);
                got.push(f);
            }
            Some((_, f)) => {
                n1.nic.receive_frame(&f, &n1.mem, &n1.irq);
            }
            None if ticks < 5 && (n1.nic.timers_pending() || n2.nic.timers_pending()) => {
                ticks += 1;
                let later = Instant::now() + Duration::from_secs(10);
                n1.nic.tick(later, &n1.mem, &n1.irq);
                n2.nic.tick(later, &n2.mem, &n2.irq);
            }
            None => break,
        }
    }
    got
}

/// NIC 1's UC QP to the `frame` target's UC QP U, as NIC 1 would send them (path MTU
/// 256): a SEND of three packets; a SEND whose middle packet is lost (its last is dropped);
/// a WRITE with immediate of 16 bytes into NIC 2's big MR.
pub fn uc_frames() -> Vec<Vec<u8>> {
    use ordma_model::engine::packet::{self, Bth, Packet, Reth};
    let r = Rig::bare(frame::LID);
    let big = r.big;
    drop(r);
    let pkt = |op: u8, psn: u32, last: bool| Packet {
        bth: Bth {
            opcode: packet::UC | op,
            pkey: 0xffff,
            dest_qp: frame::UC_QPN,
            psn,
            se: last,
            ..Default::default()
        },
        ..Default::default()
    };
    let full = rig::bytes(5, 256);
    let mut out = Vec::new();
    for (op, psn, len) in [
        (packet::SEND_FIRST, 300, 256),
        (packet::SEND_MIDDLE, 301, 256),
        (packet::SEND_LAST, 302, 10),
        (packet::SEND_FIRST, 303, 256),
        (packet::SEND_LAST, 305, 10),
    ] {
        let p = pkt(op, psn, op == packet::SEND_LAST);
        out.push(wire::encode(
            &port::lid_route(frame::PEER_LID, frame::LID),
            frame::UC_PEER,
            &p,
            &full[..len],
        ));
    }
    let mut w = pkt(packet::WRITE_ONLY_IMM, 306, true);
    w.reth = Some(Reth {
        va: BIG_VA + 0x8000,
        rkey: big,
        dma_len: 16,
    });
    w.imm = Some([1, 2, 3, 4]);
    out.push(wire::encode(
        &port::lid_route(frame::PEER_LID, frame::LID),
        frame::UC_PEER,
        &w,
        &full[..16],
    ));
    out
}

fn frame_seeds() -> Vec<(String, Vec<u8>)> {
    let frames = conversation();
    let mut out = Vec::new();
    // UC requests to U.
    let mut s = Writer::new();
    for f in uc_frames() {
        s.u8(frame::OP_FRAME).chunk(frame::transport(&f));
    }
    s.u8(frame::OP_POLL);
    out.push(("uc".into(), s.finish()));
    // The whole conversation, then the timers and the CQs.
    let mut s = Writer::new();
    for f in &frames {
        s.u8(frame::OP_FRAME).chunk(frame::transport(f));
    }
    s.u8(frame::OP_TICK).u8(1).u8(frame::OP_POLL);
    out.push(("conversation".into(), s.finish()));
    // As raw datagrams, with more work from B.
    let mut s = Writer::new();
    for f in &frames {
        s.u8(frame::OP_RAW).chunk(f);
    }
    s.u8(frame::OP_RECV)
        .u8(frame::OP_REQUEST)
        .u8(1)
        .u8(frame::OP_POLL);
    out.push(("raw".into(), s.finish()));
    // In batches of up to seven.
    let mut s = Writer::new();
    for part in frames.chunks(7) {
        // CAST: at most 7.
        s.u8(frame::OP_BATCH).u8(part.len() as u8);
        for f in part {
            s.chunk(frame::transport(f));
        }
    }
    s.u8(frame::OP_POLL);
    out.push(("batches".into(), s.finish()));
    // One frame of each opcode alone.
    let mut seen = Vec::new();
    for f in &frames {
        let Ok(d) = wire::decode(f) else { continue };
        if seen.contains(&d.packet.bth.opcode) {
            continue;
        }
        seen.push(d.packet.bth.opcode);
        let s = Writer::new()
            .u8(frame::OP_FRAME)
            .chunk(frame::transport(f))
            .finish();
        out.push((format!("opcode-{:02x}", d.packet.bth.opcode), s));
    }
    // A raw batch datagram (its magic and lengths) of the first two frames.
    let mut batch = Batch::default();
    for f in frames.iter().take(2) {
        batch.push(f);
    }
    let s = Writer::new()
        .u8(frame::OP_RAW)
        .chunk(batch.datagram())
        .finish();
    out.push(("raw-batch".into(), s));
    out
}

fn admin_seeds() -> Vec<(String, Vec<u8>)> {
    let r = Rig::bare(1);
    let (pdn, cqn, qpn, ro) = (r.pdn, r.scq.cqn, r.a.qpn, r.ro);
    drop(r);
    let mut out = Vec::new();
    let cmd = |s: &mut Writer, opcode: u8, p: hw::Params| {
        s.u8(admin::OP_CMD).u8(opcode).chunk(&p);
    };
    // Queries and a PD.
    let mut s = Writer::new();
    let q = hw::QueryDeviceParams {
        resp_addr: BUF + 0x100,
        resp_len: 4096,
    };
    cmd(&mut s, hw::CMD_QUERY_DEVICE, q.encode());
    let q = hw::QueryPortParams {
        port: 1,
        resp_addr: BUF + 0x100,
        resp_len: 4096,
    };
    cmd(&mut s, hw::CMD_QUERY_PORT, q.encode());
    cmd(&mut s, hw::CMD_ALLOC_PD, [0; 56]);
    cmd(
        &mut s,
        hw::CMD_DEALLOC_PD,
        hw::PdParams { pdn: pdn + 1 }.encode(),
    );
    s.u8(admin::OP_EVENTS);
    out.push(("queries-pd".into(), s.finish()));
    // An MR of two pages, a CQ and a QP on page lists written by the script, the QP to
    // RTS through the attributes, queried, everything destroyed.
    let mut s = Writer::new();
    let pt = admin::MEM_REGIONS[1];
    let ring = admin::MEM_REGIONS[2];
    let pages: Vec<u8> = (0..8u64)
        .flat_map(|i| (ring + i * 4096).to_le_bytes())
        .collect();
    s.u8(admin::OP_MEM).u8(1).u16(0).chunk(&pages);
    let list = |n: u32| hw::PageList {
        root: pt,
        npages: n,
        page_shift: 12,
        levels: 1,
    };
    let mr = hw::CreateMrParams {
        pdn,
        access: hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ,
        iova: 0x7000_0000,
        length: 2 * 4096,
        pages: list(2),
    };
    cmd(&mut s, hw::CMD_CREATE_MR, mr.encode());
    let cq = hw::CreateCqParams {
        db_page: 1,
        log_depth: 7,
        log_cqe_size: 5,
        ring: list(1),
        db_record: BUF + 0x900,
    };
    cmd(&mut s, hw::CMD_CREATE_CQ, cq.encode());
    // A resize (1.7) onto a ring of the same shape.
    let resize = hw::ResizeCqParams {
        cqn: 0,
        log_depth: cq.log_depth,
        ring: cq.ring,
    };
    cmd(&mut s, hw::CMD_RESIZE_CQ, resize.encode());
    let qp = hw::CreateQpParams {
        qp_type: hw::QP_TYPE_RC,
        db_page: 1,
        max_send_sge: 2,
        max_recv_sge: 2,
        pdn,
        send_cqn: cqn,
        recv_cqn: cqn,
        max_inline: 64,
        flags: 0,
        sq: hw::WorkQueue {
            log_depth: 4,
            log_wqe_size: 6,
            ring: list(1),
        },
        rq: hw::WorkQueue {
            log_depth: 4,
            log_wqe_size: 5,
            ring: list(1),
        },
    };
    cmd(&mut s, hw::CMD_CREATE_QP, qp.encode());
    let attr = hw::QpAttr {
        qp_state: hw::QPS_INIT,
        port_num: 1,
        qp_access_flags: hw::ACCESS_REMOTE_WRITE,
        ..Default::default()
    };
    s.u8(admin::OP_MEM).u8(0).u16(0).chunk(&attr.encode());
    let modify = hw::ModifyQpParams {
        qpn,
        attr_mask: hw::QP_ATTR_STATE
            | hw::QP_ATTR_PKEY_INDEX
            | hw::QP_ATTR_PORT
            | hw::QP_ATTR_ACCESS_FLAGS,
        attr_addr: BUF,
        attr_len: hw::QP_ATTR_SIZE as u32,
    };
    cmd(&mut s, hw::CMD_MODIFY_QP, modify.encode());
    let query = hw::QueryQpParams {
        qpn,
        resp_addr: BUF + 0x200,
        resp_len: hw::QP_ATTR_SIZE as u32,
    };
    cmd(&mut s, hw::CMD_QUERY_QP, query.encode());
    cmd(
        &mut s,
        hw::CMD_DESTROY_QP,
        hw::NumParams { num: qpn }.encode(),
    );
    cmd(
        &mut s,
        hw::CMD_DESTROY_CQ,
        hw::NumParams { num: cqn }.encode(),
    );
    cmd(
        &mut s,
        hw::CMD_DESTROY_MR,
        hw::KeyParams { key: ro }.encode(),
    );
    s.u8(admin::OP_EVENTS);
    out.push(("objects".into(), s.finish()));
    // An SRQ on a page list written by the script, a QP on it, its limit armed and
    // refused, queried, destroyed (first refused while the QP is there).
    let mut s = Writer::new();
    s.u8(admin::OP_MEM).u8(1).u16(0).chunk(&pages);
    let srq = hw::CreateSrqParams {
        db_page: 1,
        max_sge: 2,
        wq: hw::WorkQueue {
            log_depth: 5,
            log_wqe_size: 6,
            ring: list(1),
        },
        pdn,
    };
    cmd(&mut s, hw::CMD_CREATE_SRQ, srq.encode());
    let mut on_srq = hw::CreateQpParams {
        flags: hw::QP_FLAG_SRQ,
        max_recv_sge: 0,
        rq: hw::WorkQueue::default(),
        ..qp
    };
    on_srq.rq.ring.root = 0;
    cmd(&mut s, hw::CMD_CREATE_QP, on_srq.encode());
    for limit in [5, 40] {
        let m = hw::ModifySrqParams {
            srqn: 0,
            attr_mask: hw::SRQ_ATTR_LIMIT,
            srq_limit: limit,
            ..Default::default()
        };
        cmd(&mut s, hw::CMD_MODIFY_SRQ, m.encode());
    }
    let q = hw::QuerySrqParams {
        srqn: 0,
        resp_addr: BUF + 0x300,
        resp_len: hw::SRQ_ATTRS_SIZE as u32,
    };
    cmd(&mut s, hw::CMD_QUERY_SRQ, q.encode());
    cmd(
        &mut s,
        hw::CMD_DESTROY_SRQ,
        hw::NumParams { num: 0 }.encode(),
    );
    cmd(
        &mut s,
        hw::CMD_DESTROY_QP,
        hw::NumParams { num: qpn + 2 }.encode(),
    );
    cmd(
        &mut s,
        hw::CMD_DESTROY_SRQ,
        hw::NumParams { num: 0 }.encode(),
    );
    s.u8(admin::OP_EVENTS);
    out.push(("srq".into(), s.finish()));
    // A raw entry with a reserved byte set; registers: the version, a reset, the queues
    // set up again.
    let mut s = Writer::new();
    let mut e = hw::AdminCmd {
        opcode: hw::CMD_ALLOC_PD,
        cmd_id: 9,
        params: [0; 56],
    }
    .encode();
    s.u8(admin::OP_RAW).chunk(&e);
    e[1] = 1;
    s.u8(admin::OP_RAW).chunk(&e);
    // CAST: register offsets over 4.
    let reg = |s: &mut Writer, r: usize, v: u32| {
        s.u8(admin::OP_REG).u8((r / 4) as u8).u32(v);
    };
    reg(&mut s, hw::REG_VERSION, 0);
    reg(&mut s, hw::REG_CONTROL, hw::CONTROL_RESET);
    reg(&mut s, hw::REG_AQ_SQ_BASE, crate::common::SQ as u32);
    reg(&mut s, hw::REG_AQ_CQ_BASE, crate::common::CQ as u32);
    reg(&mut s, hw::REG_EQ_BASE, crate::common::EQ as u32);
    reg(&mut s, hw::REG_AQ_LOG_DEPTH, 4);
    reg(&mut s, hw::REG_EQ_LOG_DEPTH, 6);
    reg(&mut s, hw::REG_CONTROL, hw::CONTROL_ENABLE);
    reg(&mut s, hw::REG_AQ_SQ_DB, 1 << 16);
    s.u8(admin::OP_EVENTS);
    out.push(("raw-registers".into(), s.finish()));
    out
}
