//! Memory windows (interface 1.9, in progress): `ALLOC_MW` and `DEALLOC_MW`, their
//! refusals, a PD kept while a window uses it.

mod common;

use common::rig::*;
use ordma_hw as hw;

fn alloc(r: &mut Rig, pdn: u32, mw_type: u8) -> (u16, u64) {
    r.run(hw::CMD_ALLOC_MW, hw::AllocMwParams { pdn, mw_type }.encode())
}

fn dealloc(r: &mut Rig, rkey: u32) -> u16 {
    r.run(hw::CMD_DEALLOC_MW, hw::KeyParams { key: rkey }.encode()).0
}

#[test]
fn windows_are_allocated_and_freed() {
    let mut r = Rig::new();
    let (pdn, big) = (r.pdn, r.big);
    let (s1, k1) = alloc(&mut r, pdn, hw::MW_TYPE_1);
    let (s2, k2) = alloc(&mut r, pdn, hw::MW_TYPE_2);
    assert_eq!((s1, s2), (hw::AQ_OK, hw::AQ_OK));
    let (k1, k2) = (k1 as u32, k2 as u32);
    assert!(k1 & hw::MW_KEY_BIT != 0 && k2 & hw::MW_KEY_BIT != 0, "{k1:#x} {k2:#x}");
    assert_ne!(k1, k2);
    assert_eq!(r.nic.mws_in_use(), 2);
    // Refused: type 3, type 0, a PD that does not exist, a reserved byte.
    for (pdn, t) in [(pdn, 3), (pdn, 0), (pdn + 100, 1)] {
        assert_eq!(alloc(&mut r, pdn, t).0, hw::AQ_BAD_PARAM, "PD {pdn}, type {t}");
    }
    let mut p = hw::AllocMwParams {
        pdn,
        mw_type: 1,
    }
    .encode();
    p[5] = 1;
    assert_eq!(r.run(hw::CMD_ALLOC_MW, p).0, hw::AQ_BAD_PARAM, "reserved byte");
    // The PD stays while a window uses it.
    let pd = hw::PdParams { pdn }.encode();
    assert_eq!(r.run(hw::CMD_DEALLOC_PD, pd).0, hw::AQ_BAD_PARAM);
    // Freed once; an MR's key, a stale or unknown rkey are not a window's.
    assert_eq!(dealloc(&mut r, k1), hw::AQ_OK);
    assert_eq!(dealloc(&mut r, k1), hw::AQ_BAD_PARAM, "twice");
    assert_eq!(dealloc(&mut r, big), hw::AQ_BAD_PARAM, "an MR's key");
    assert_eq!(dealloc(&mut r, k2 ^ 1), hw::AQ_BAD_PARAM, "another key byte");
    assert_eq!(dealloc(&mut r, k2), hw::AQ_OK);
    assert_eq!(r.nic.mws_in_use(), 0);
    // The slot again: another key byte, so the old rkey stays dead.
    let (_, k3) = alloc(&mut r, pdn, hw::MW_TYPE_1);
    assert_ne!(k3 as u32, k1);
    assert_eq!(dealloc(&mut r, k1), hw::AQ_BAD_PARAM, "a stale rkey");
}
