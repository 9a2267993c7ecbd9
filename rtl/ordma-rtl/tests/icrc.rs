//! The ICRC unit against the model's `wire::icrc`, bit for bit: 100 000 random frames, IPv4
//! and IPv6, streamed back to back through one unit with random stalls on both ports, and a
//! frame a real NIC sent.

use std::collections::VecDeque;

use ordma_model::engine::wire;
use ordma_rtl::{set_beat, Icrc, IcrcIo, Rng};

/// A random frame: random bytes (the unit must mask whatever the headers hold), most short,
/// some up to the largest frame; a third IPv6 (by the Ethernet type: its fields masked, its
/// BTH in the second beat), the rest read as IPv4.
fn frame(rng: &mut Rng) -> Vec<u8> {
    let v6 = rng.chance(0.33);
    let len = if rng.chance(0.7) {
        rng.range(if v6 { 78 } else { 58 }, 400)
    } else {
        rng.range(400, wire::MAX_FRAME as u64 + 1)
    } as usize;
    let mut f = vec![0u8; len];
    rng.fill(&mut f);
    if v6 {
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
    } else if wire::is_ipv6(&f) {
        f[13] ^= 1;
    }
    assert_eq!(wire::is_ipv6(&f), v6);
    f
}

#[test]
fn icrc_matches_the_model_on_100000_random_frames_under_stalls() {
    const FRAMES: usize = 100_000;
    let mut rng = Rng::new(0x1c2c);
    let mut unit = Icrc::new();
    let mut want = VecDeque::new();
    let (mut sent, mut got, mut bytes) = (0usize, 0usize, 0u64);
    let mut cur: Option<(Vec<u8>, usize)> = None; // the frame being sent, and its next beat
    let mut offer = false;
    // Phases: none stalls, the input stalls, the output stalls, both.
    let phase = |n: usize| [(1.0, 1.0), (0.6, 1.0), (1.0, 0.5), (0.8, 0.8)][n * 4 / FRAMES];
    while got < FRAMES {
        let (p_offer, p_ready) = phase(got.min(FRAMES - 1));
        if cur.is_none() && sent < FRAMES {
            let f = frame(&mut rng);
            want.push_back(wire::icrc(&f).expect("longer than the headers"));
            bytes += f.len() as u64;
            cur = Some((f, 0));
            sent += 1;
        }
        let mut io = IcrcIo {
            out_ready: u8::from(rng.chance(p_ready)),
            ..IcrcIo::default()
        };
        // An offered beat stays until taken.
        offer = offer || rng.chance(p_offer);
        if let (Some((f, beat)), true) = (&cur, offer) {
            let covered = &f[..f.len() - wire::ICRC_LEN];
            let start = beat * 64;
            let end = (start + 64).min(covered.len());
            set_beat(&mut io, &covered[start..end]);
            io.in_valid = 1;
            io.in_last = u8::from(end == covered.len());
        }
        unit.cycle(&mut io);
        if io.in_valid == 1 && io.in_ready == 1 {
            offer = false;
            if io.in_last == 1 {
                cur = None;
            } else if let Some((_, beat)) = &mut cur {
                *beat += 1;
            }
        }
        if io.out_valid == 1 && io.out_ready == 1 {
            let w = want
                .pop_front()
                .expect("an ICRC out for a frame never sent");
            assert_eq!(
                io.out_icrc, w,
                "frame {got}: RTL {:#010x}, model {w:#010x}",
                io.out_icrc
            );
            got += 1;
        }
        assert!(unit.cycles() < 4 * bytes / 64 + 100_000, "no progress");
    }
    assert!(want.is_empty());
    assert_eq!(
        unit.assertion_failures(),
        0,
        "SystemVerilog assertions failed (above)"
    );
    eprintln!(
        "{FRAMES} frames, {bytes} bytes, {} cycles: all ICRCs equal the model's",
        unit.cycles()
    );
}

#[test]
fn icrc_of_a_frame_captured_from_real_hardware() {
    // The CNP a ConnectX-4 Lx sent (wire.rs's test): ICRC 82 fd 00 2a on the wire.
    let hex = [
        "e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2",
        "003c 718c 4000 4011 9161 0a00 1101 0a00",
        "1201 0000 12b7 0028 0000 8100 ffff 4000",
        "0118 0000 0000 0000 0000 0000 0000 0000",
        "0000 0000 0000 82fd 002a",
    ]
    .concat()
    .replace(' ', "");
    let f: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(f.len(), 74);
    let mut unit = Icrc::new();
    let got = unit.icrc(&f[..70]).expect("an answer");
    assert_eq!(got.to_le_bytes(), [0x82, 0xfd, 0x00, 0x2a]);
    // Every length that is a multiple of the beat and every empty count, one unit.
    let mut rng = Rng::new(7);
    for len in 58..=(3 * 64 + 4) {
        let mut f = vec![0u8; len];
        rng.fill(&mut f);
        assert_eq!(unit.icrc(&f[..len - 4]), wire::icrc(&f), "length {len}");
        if len >= 78 {
            // The same over IPv6: the BTH's reserved byte in the second beat.
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            assert_eq!(
                unit.icrc(&f[..len - 4]),
                wire::icrc(&f),
                "IPv6, length {len}"
            );
        }
    }
    assert_eq!(unit.icrc(&f[..53]), None, "shorter than the headers");
    assert_eq!(unit.assertion_failures(), 0);
}
