//! Loopback WRITE and READ over MRs of scattered 4 KiB pages: what the data path's
//! translation (each page-table page read once per translation) and its coalescing (a
//! WRITE's middle packets moved together with the first packet's translation, a READ's
//! responses together) must keep: every byte and no other, the PSNs per packet, every
//! check before a byte moves (a bad entry in the middle of a table), and no translation
//! kept from one message to the next (an MR destroyed or registered again between them).

mod common;

use common::rig::*;
use ordma_hw as hw;
use ordma_model::mem::Dma;

const SIGNALED: u8 = hw::WQE_FLAG_SIGNALED;
/// Two MRs of 512 scattered 4 KiB pages (2 MiB each): source and destination.
const SRC_VA: u64 = 0x5_0000_0000;
const DST_VA: u64 = 0x6_0000_0000;
const SRC_PHYS: u64 = DATA + 0x3000_0000;
const DST_PHYS: u64 = DATA + 0x3800_0000;
const PAGES: u64 = 512;
const MR_LEN: u64 = PAGES * 4096;
/// An aligned bus address no memory is mapped at.
const UNMAPPED: u64 = 0x7f00_0000_0000;

/// The physical page of virtual page `i` (37 is prime to 512: no two neighbours adjacent).
fn scat(i: u64) -> u64 {
    (i * 37) % PAGES
}

/// The page entries of a scattered MR at `phys`.
fn entries(phys: u64) -> Vec<u64> {
    (0..PAGES).map(|i| phys + scat(i) * 4096).collect()
}

/// Bytes `[off, off + len)` of the scattered MR at `phys`: written from `data` if given,
/// read back.
fn io(rig: &Rig, phys: u64, off: u64, len: usize, data: Option<&[u8]>) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut done = 0usize;
    while done < len {
        let at = off + done as u64;
        let n = ((4096 - at % 4096) as usize).min(len - done);
        let bus = phys + scat(at / 4096) * 4096 + at % 4096;
        match data {
            Some(d) => rig.mem.dma_write(bus, &d[done..done + n]).unwrap(),
            None => rig.mem.dma_read(bus, &mut out[done..done + n]).unwrap(),
        }
        done += n;
    }
    out
}

/// An MR over `pages` at `va`; its key and its page table's root.
fn mr(rig: &mut Rig, va: u64, pages: &[u64]) -> (u32, u64) {
    let all = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ;
    let list = rig.list(12, pages);
    let p = hw::CreateMrParams {
        pdn: rig.pdn,
        access: all,
        iova: va,
        length: MR_LEN,
        pages: list,
    };
    (rig.ok(hw::CMD_CREATE_MR, p.encode()) as u32, list.root)
}

/// The rig with both scattered MRs: (rig, source key and root, destination key and root).
fn scattered() -> (Rig, (u32, u64), (u32, u64)) {
    let mut rig = Rig::new();
    let s = mr(&mut rig, SRC_VA, &entries(SRC_PHYS));
    let d = mr(&mut rig, DST_VA, &entries(DST_PHYS));
    (rig, s, d)
}

/// Posts an RDMA WRITE or READ of `len` bytes between local `lva` (`lkey`) and remote
/// `rva` (`rkey`) and returns its send CQE.
fn rdma(rig: &mut Rig, op: u8, lva: u64, lkey: u32, rva: u64, rkey: u32, len: u32) -> hw::Cqe {
    let mut w = wqe(op, SIGNALED, 1);
    w.remote_addr = rva;
    w.rkey = rkey;
    let i = rig.send('a', w, &[sge(lva, len, lkey)], &[]);
    let c = rig.cqe('s');
    assert_eq!(c.wqe_index, i);
    c
}

/// `a`'s send PSN and `b`'s receive PSN.
fn psns(rig: &mut Rig) -> (u32, u32) {
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    (rig.query(a).sq_psn, rig.query(b).rq_psn)
}

#[test]
fn writes_and_reads_over_scattered_pages_move_every_byte_and_the_psns_follow() {
    let (mut rig, (s, _), (d, _)) = scattered();
    let full = MR_LEN as usize;
    // (source offset, destination offset, length): many middle packets, none, one, none
    // but the only packet, a length ending mid-page.
    let cases: [(u64, u64, u32); 6] = [
        (0x123, 0x777, (2 << 20) - 0x1000),
        (0, 0, 2 << 20),
        (5, 4091, 3 * 4096 + 7),
        (0, 0, 8192),
        (4000, 100, 3 * 4096),
        (17, 33, 1000),
    ];
    for (n, &(so, doff, len)) in cases.iter().enumerate() {
        let data = bytes(n as u64 + 40, len as usize);
        io(&rig, SRC_PHYS, so, len as usize, Some(&data));
        io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
        let (sq0, rq0) = psns(&mut rig);
        assert_eq!(sq0, rq0);
        let c = rdma(
            &mut rig,
            hw::WR_RDMA_WRITE,
            SRC_VA + so,
            s,
            DST_VA + doff,
            d,
            len,
        );
        assert_eq!(
            (c.status, c.opcode, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_WRITE, len),
            "WRITE {n}"
        );
        let got = io(&rig, DST_PHYS, 0, full, None);
        let end = (doff + u64::from(len)) as usize;
        assert!(got[doff as usize..end] == data[..], "WRITE {n}: the bytes");
        assert!(
            got[..doff as usize].iter().all(|&b| b == 0xee),
            "WRITE {n}: before"
        );
        assert!(got[end..].iter().all(|&b| b == 0xee), "WRITE {n}: after");
        let pkts = u64::from(len).div_ceil(4096).max(1) as u32;
        assert_eq!(psns(&mut rig), (sq0 + pkts, rq0 + pkts), "WRITE {n}: PSNs");
        // READ it back into the source MR, elsewhere.
        let back = (so + 0x1_0000) % (MR_LEN - u64::from(len) + 1);
        io(&rig, SRC_PHYS, 0, full, Some(&vec![0x55; full]));
        let c = rdma(
            &mut rig,
            hw::WR_RDMA_READ,
            SRC_VA + back,
            s,
            DST_VA + doff,
            d,
            len,
        );
        assert_eq!(
            (c.status, c.opcode, c.byte_len),
            (hw::WC_SUCCESS, hw::WC_RDMA_READ, len),
            "READ {n}"
        );
        let got = io(&rig, SRC_PHYS, 0, full, None);
        let end = (back + u64::from(len)) as usize;
        assert!(got[back as usize..end] == data[..], "READ {n}: the bytes");
        assert!(
            got[..back as usize].iter().all(|&b| b == 0x55),
            "READ {n}: before"
        );
        assert!(got[end..].iter().all(|&b| b == 0x55), "READ {n}: after");
        assert_eq!(
            psns(&mut rig),
            (sq0 + 2 * pkts, rq0 + 2 * pkts),
            "READ {n}: PSNs"
        );
    }
    // A SEND after them all: the PSNs still agree.
    rig.recv('b', &[]);
    rig.send('a', wqe(hw::WR_SEND, SIGNALED, 0), &[], &[]);
    assert_eq!(rig.cqe('s').status, hw::WC_SUCCESS);
    assert_eq!(rig.cqe('r').status, hw::WC_SUCCESS);
}

#[test]
fn a_bad_entry_in_the_middle_of_a_table_fails_the_message_before_a_byte_moves() {
    let full = MR_LEN as usize;
    let data = bytes(3, full);
    // A misaligned entry for page 300 of the destination: the responder's translation of
    // the whole range refuses it on the first packet.
    let (mut rig, (s, _), (d, droot)) = scattered();
    let b = rig.b.qpn;
    rig.events();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    rig.mem
        .dma_write(droot + 300 * 8, &(DST_PHYS + 8).to_le_bytes())
        .unwrap();
    let c = rdma(
        &mut rig,
        hw::WR_RDMA_WRITE,
        SRC_VA,
        s,
        DST_VA,
        d,
        MR_LEN as u32,
    );
    assert_eq!(c.status, hw::WC_REM_ACCESS_ERR, "destination");
    assert_eq!(rig.events(), [(hw::EVENT_QP_ACCESS_ERR, b)]);
    let got = io(&rig, DST_PHYS, 0, full, None);
    assert!(got.iter().all(|&b| b == 0xee), "no byte moved");
    assert_eq!(rig.state(b), hw::QPS_ERR);

    // The same in the source's table: the requester's translation refuses it.
    let (mut rig, (s, sroot), (d, _)) = scattered();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    rig.mem
        .dma_write(sroot + 300 * 8, &(SRC_PHYS + 8).to_le_bytes())
        .unwrap();
    let c = rdma(
        &mut rig,
        hw::WR_RDMA_WRITE,
        SRC_VA,
        s,
        DST_VA,
        d,
        MR_LEN as u32,
    );
    assert_eq!(c.status, hw::WC_LOC_PROT_ERR, "source");
    let got = io(&rig, DST_PHYS, 0, full, None);
    assert!(got.iter().all(|&b| b == 0xee), "no byte moved");
    // And a READ into it.
    let (mut rig, (s, sroot), (d, _)) = scattered();
    io(&rig, DST_PHYS, 0, full, Some(&data));
    io(&rig, SRC_PHYS, 0, full, Some(&vec![0xee; full]));
    rig.mem
        .dma_write(sroot + 300 * 8, &(SRC_PHYS + 8).to_le_bytes())
        .unwrap();
    let c = rdma(
        &mut rig,
        hw::WR_RDMA_READ,
        SRC_VA,
        s,
        DST_VA,
        d,
        MR_LEN as u32,
    );
    assert_eq!(c.status, hw::WC_LOC_PROT_ERR, "READ's destination");
    let got = io(&rig, SRC_PHYS, 0, full, None);
    assert!(got.iter().all(|&b| b == 0xee), "no byte moved");

    // An aligned entry naming memory that is not there: the translation cannot tell, the
    // copy refuses that page: the message fails and nothing from that page on is written.
    let (mut rig, (s, _), (d, droot)) = scattered();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    rig.mem
        .dma_write(droot + 300 * 8, &UNMAPPED.to_le_bytes())
        .unwrap();
    let c = rdma(
        &mut rig,
        hw::WR_RDMA_WRITE,
        SRC_VA,
        s,
        DST_VA,
        d,
        MR_LEN as u32,
    );
    assert_eq!(c.status, hw::WC_REM_OP_ERR, "unmapped destination page");
    let got = io(&rig, DST_PHYS, 301 * 4096, full - 301 * 4096, None);
    assert!(got.iter().all(|&b| b == 0xee), "nothing past the page");
    let (a, b) = (rig.a.qpn, rig.b.qpn);
    assert_eq!(rig.state(a), hw::QPS_ERR);
    assert_ne!(rig.state(b), hw::QPS_RESET);
}

#[test]
fn no_translation_outlives_its_message() {
    let full = MR_LEN as usize;
    let data = bytes(5, full);
    let (mut rig, (s, _), (d, _)) = scattered();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    let len = MR_LEN as u32;
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_SUCCESS);
    // The destination registered again over other pages (the source's): a new key, and
    // the next WRITE lands there.
    assert_eq!(
        rig.run(hw::CMD_DESTROY_MR, hw::KeyParams { key: d }.encode())
            .0,
        hw::AQ_OK
    );
    let (d2, _) = mr(&mut rig, DST_VA, &entries(SRC_PHYS + 0x40_0000));
    assert_ne!(d2, d);
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d2, len);
    assert_eq!(c.status, hw::WC_SUCCESS, "the new key");
    assert!(io(&rig, SRC_PHYS + 0x40_0000, 0, full, None) == data);
    assert!(
        io(&rig, DST_PHYS, 0, full, None).iter().all(|&b| b == 0xee),
        "not the old pages"
    );
    // The old key: refused before a byte moves.
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_REM_ACCESS_ERR, "the destroyed key");
    assert!(io(&rig, DST_PHYS, 0, full, None).iter().all(|&b| b == 0xee));

    // A source destroyed between two WRITEs and a READ into it.
    let (mut rig, (s, _), (d, _)) = scattered();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_SUCCESS);
    assert_eq!(
        rig.run(hw::CMD_DESTROY_MR, hw::KeyParams { key: s }.encode())
            .0,
        hw::AQ_OK
    );
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_LOC_PROT_ERR, "the destroyed source");
    assert!(io(&rig, DST_PHYS, 0, full, None).iter().all(|&b| b == 0xee));
}

/// `CMD_MODIFY_MR`: the key stays, the next message uses the new registration only (new
/// pages: the old ones untouched; new access: refused), a stale key or parameters
/// `CMD_CREATE_MR` refuses leave the MR as it was.
#[test]
fn an_mr_registered_again_in_place_keeps_its_key_and_not_its_old_registration() {
    let full = MR_LEN as usize;
    let data = bytes(6, full);
    let (mut rig, (s, _), (d, _)) = scattered();
    io(&rig, SRC_PHYS, 0, full, Some(&data));
    let len = MR_LEN as u32;
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_SUCCESS);
    let all = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ;
    let moved = SRC_PHYS + 0x40_0000;
    let list = rig.list(12, &entries(moved));
    let mut p = hw::ModifyMrParams {
        key: d,
        mr: hw::CreateMrParams {
            pdn: rig.pdn,
            access: all,
            iova: DST_VA,
            length: MR_LEN,
            pages: list,
        },
    };
    assert_eq!(rig.run(hw::CMD_MODIFY_MR, p.encode()), (hw::AQ_OK, 0));
    io(&rig, DST_PHYS, 0, full, Some(&vec![0xee; full]));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_SUCCESS, "the same key");
    assert!(io(&rig, moved, 0, full, None) == data, "the new pages");
    assert!(
        io(&rig, DST_PHYS, 0, full, None).iter().all(|&b| b == 0xee),
        "not the old pages"
    );
    // Refused: a stale key (another tag), a zero length, an unknown access flag, a PD that
    // does not exist; the MR is unchanged by each.
    let mut bad = p;
    bad.key = d ^ 1;
    assert_eq!(rig.run(hw::CMD_MODIFY_MR, bad.encode()).0, hw::AQ_BAD_PARAM);
    for f in [
        |m: &mut hw::CreateMrParams| m.length = 0,
        |m: &mut hw::CreateMrParams| m.access |= 1 << 9,
        |m: &mut hw::CreateMrParams| m.pdn += 100,
    ] {
        let mut bad = p;
        f(&mut bad.mr);
        assert_eq!(rig.run(hw::CMD_MODIFY_MR, bad.encode()).0, hw::AQ_BAD_PARAM);
    }
    io(&rig, moved, 0, full, Some(&vec![0; full]));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_SUCCESS, "unchanged by the refusals");
    assert!(io(&rig, moved, 0, full, None) == data);
    // Remote write taken away: the next WRITE is refused before a byte moves.
    p.mr.access = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ;
    assert_eq!(rig.run(hw::CMD_MODIFY_MR, p.encode()), (hw::AQ_OK, 0));
    io(&rig, moved, 0, full, Some(&vec![0; full]));
    let c = rdma(&mut rig, hw::WR_RDMA_WRITE, SRC_VA, s, DST_VA, d, len);
    assert_eq!(c.status, hw::WC_REM_ACCESS_ERR, "no remote write any more");
    assert!(io(&rig, moved, 0, full, None).iter().all(|&b| b == 0));
}
