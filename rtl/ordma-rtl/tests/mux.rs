//! The DMA channel mux under random request mixes and stalls, against the scoreboard's
//! reference of per-channel order (`ordma_rtl::scoreboard`) and its own SystemVerilog
//! assertions; and its two mutants, each caught by both.

use ordma_rtl::scoreboard::{run, Stalls};
use ordma_rtl::MuxKind;

const PROFILES: [Stalls; 5] = [
    Stalls {
        offer: 1.0,
        ready: 1.0,
    },
    Stalls {
        offer: 0.5,
        ready: 1.0,
    },
    Stalls {
        offer: 1.0,
        ready: 0.5,
    },
    Stalls {
        offer: 0.3,
        ready: 0.3,
    },
    Stalls {
        offer: 0.9,
        ready: 0.95,
    },
];

#[test]
fn mux_keeps_every_channels_order_on_100000_random_requests() {
    let mut total = 0;
    for (i, s) in PROFILES.iter().enumerate() {
        let st = run(MuxKind::Good, 100 + i as u64, 20_000, *s)
            .unwrap_or_else(|e| panic!("profile {s:?}: {e}"));
        eprintln!("{s:?}: {st:?}");
        total += st.requests;
        if s.offer == 1.0 && s.ready == 1.0 {
            // Fully pipelined: a beat a cycle, only the pipeline's fill and drain besides.
            assert!(st.cycles <= st.beats + 10, "{st:?}");
        }
    }
    assert!(total >= 100_000);
}

#[test]
fn a_mux_that_loses_a_beat_under_backpressure_is_caught() {
    let e =
        run(MuxKind::LosesBeat, 1, 2_000, PROFILES[2]).expect_err("the scoreboard must catch it");
    eprintln!("caught: {e}");
    assert!(
        e.contains("lost or reordered") || e.contains("holds two"),
        "{e}"
    );
    assert_assertions_fail(MuxKind::LosesBeat, PROFILES[2]);
}

#[test]
fn a_mux_with_a_bubble_between_channels_is_caught() {
    let e = run(MuxKind::Bubble, 1, 2_000, PROFILES[0]).expect_err("the scoreboard must catch it");
    eprintln!("caught: {e}");
    assert!(e.contains("bubble"), "{e}");
    assert_assertions_fail(MuxKind::Bubble, PROFILES[0]);
}

/// The mutant's own assertions fail, the scoreboard aside: the run driven without it.
fn assert_assertions_fail(kind: MuxKind, s: Stalls) {
    use ordma_rtl::{Mux, MuxIo, Rng};
    let mut mux = Mux::new(kind);
    let mut rng = Rng::new(3);
    for _ in 0..10_000 {
        if mux.assertion_failures() > 0 {
            break;
        }
        let mut io = MuxIo {
            in_valid: 0b1111,
            in_last: (rng.next_u64() & 0xf) as u8,
            out_ready: u8::from(rng.chance(s.ready)),
            ..MuxIo::default()
        };
        mux.cycle(&mut io);
    }
    assert!(
        mux.assertion_failures() > 0,
        "{kind:?}: no SystemVerilog assertion failed"
    );
    eprintln!("{kind:?}: {} assertion failures", mux.assertion_failures());
}
