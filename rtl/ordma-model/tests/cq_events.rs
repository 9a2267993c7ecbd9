//! Completion events that cannot pile up (issue 36): an arm with nothing new since the CQ's
//! last event posts nothing, at most one completion event per CQ is in the event queue, one
//! due meanwhile is owed and posted when the driver consumes the last, and a destroyed CQ's
//! event in the queue owes nothing to the next CQ with its number. So a consumer re-arming
//! in a loop costs the event queue nothing, and a queue sized by the CQs never overruns.

mod common;

use common::rig::*;
use common::BUF;
use ordma_hw as hw;
use ordma_model::engine::counters::Anomaly;
use ordma_model::mem::Dma;

/// The event `i` entries past the rig's consumer index, if written; the driver's consumer
/// index (`EQ_DB`) does not move.
fn peek(rig: &Rig, i: u16) -> Option<hw::Event> {
    let depth = 1u16 << EQ_LOG;
    let at = rig.ev.wrapping_add(i);
    let mut b = [0u8; hw::EQE_SIZE];
    rig.mem
        .dma_read(
            common::EQ + u64::from(at % depth) * hw::EQE_SIZE as u64,
            &mut b,
        )
        .unwrap();
    let e = hw::Event::decode(&b);
    (e.phase == hw::phase(at, depth)).then_some(e)
}

/// The completion events written and not yet consumed, by CQ number.
fn unread(rig: &Rig) -> Vec<u32> {
    (0..)
        .map_while(|i| peek(rig, i))
        .map(|e| {
            assert_eq!(e.kind, hw::EVENT_CQ_COMPLETION);
            e.data
        })
        .collect()
}

/// The driver consumes `n` events (writes its consumer index to `EQ_DB`).
fn consume(rig: &mut Rig, n: u16) {
    rig.ev = rig.ev.wrapping_add(n);
    let ev = rig.ev;
    rig.w(hw::REG_EQ_DB, u32::from(ev));
}

fn cqe(rig: &mut Rig, cqn: u32) {
    assert!(rig.nic.post_cqe(cqn, &[0; 32], false, &rig.mem, &rig.irq));
}

fn arm(rig: &mut Rig, cqn: u32, ci: u16) {
    rig.db(hw::DB_CQ_ARM, hw::db_value(cqn, ci));
}

fn coalesced(rig: &Rig) -> u64 {
    rig.nic.status_snapshot().events_coalesced
}

#[test]
fn an_arm_with_nothing_new_posts_nothing() {
    let mut rig = Rig::new();
    let cqn = rig.scq.cqn;
    cqe(&mut rig, cqn);
    // Armed with the completion unpolled: one event at once.
    arm(&mut rig, cqn, 0);
    assert_eq!(unread(&rig), [cqn]);
    // The same arm again and again, pending or consumed: nothing new, nothing posted.
    for _ in 0..1000 {
        arm(&mut rig, cqn, 0);
    }
    assert_eq!(unread(&rig), [cqn], "no second event while nothing is new");
    consume(&mut rig, 1);
    for _ in 0..1000 {
        arm(&mut rig, cqn, 0);
    }
    assert!(unread(&rig).is_empty(), "nor after the first was consumed");
    assert_eq!(coalesced(&rig), 2000);
    // Still armed: the next completion wakes the consumer.
    cqe(&mut rig, cqn);
    assert_eq!(unread(&rig), [cqn]);
    consume(&mut rig, 1);
    // The consumer's progress is news: polled one of two, armed, an event.
    arm(&mut rig, cqn, 1);
    assert_eq!(unread(&rig), [cqn]);
    consume(&mut rig, 1);
    // All polled: armed for the next, which raises one event, and the one after none.
    arm(&mut rig, cqn, 2);
    assert!(unread(&rig).is_empty());
    cqe(&mut rig, cqn);
    cqe(&mut rig, cqn);
    assert_eq!(unread(&rig), [cqn], "one event per arm");
}

#[test]
fn one_event_per_cq_in_the_queue_the_next_owed_until_it_is_consumed() {
    let mut rig = Rig::new();
    let cqn = rig.scq.cqn;
    arm(&mut rig, cqn, 0);
    cqe(&mut rig, cqn);
    assert_eq!(unread(&rig), [cqn]);
    // Re-armed before the driver consumed that event, with news each time (a completion,
    // then the consumer's progress): due, but owed, not written.
    arm(&mut rig, cqn, 0);
    cqe(&mut rig, cqn);
    arm(&mut rig, cqn, 1);
    assert_eq!(
        unread(&rig),
        [cqn],
        "one completion event per CQ in the queue"
    );
    // The driver consumes it: the owed event goes out then, once.
    consume(&mut rig, 1);
    assert_eq!(unread(&rig), [cqn]);
    consume(&mut rig, 1);
    assert!(unread(&rig).is_empty(), "owed once, posted once");
    // The owed event was for the news up to then: re-armed as it left things, nothing.
    arm(&mut rig, cqn, 1);
    assert!(unread(&rig).is_empty());
    // Another CQ is not held back by this one's pending event.
    cqe(&mut rig, cqn);
    assert_eq!(unread(&rig), [cqn]);
    let other = rig.rcq.cqn;
    arm(&mut rig, other, 0);
    cqe(&mut rig, other);
    assert_eq!(unread(&rig), [cqn, other]);
}

#[test]
fn a_destroyed_cqs_pending_event_owes_nothing_to_its_number_s_next_cq() {
    let mut rig = Rig::new();
    let old = rig.cq(RINGS + 0x30_0000, BUF + 0x900);
    arm(&mut rig, old.cqn, 0);
    cqe(&mut rig, old.cqn);
    assert_eq!(unread(&rig), [old.cqn]);
    rig.ok(hw::CMD_DESTROY_CQ, hw::NumParams { num: old.cqn }.encode());
    let new = rig.cq(RINGS + 0x31_0000, BUF + 0x908);
    assert_eq!(new.cqn, old.cqn, "the number is reused");
    // The new CQ's first event is not held behind the old one's.
    arm(&mut rig, new.cqn, 0);
    cqe(&mut rig, new.cqn);
    assert_eq!(unread(&rig), [old.cqn, new.cqn]);
    // Consuming the old CQ's event does not count as consuming the new one's: news for the
    // new CQ stays owed until its own event is consumed.
    consume(&mut rig, 1);
    cqe(&mut rig, new.cqn);
    arm(&mut rig, new.cqn, 1);
    assert_eq!(unread(&rig), [new.cqn]);
    consume(&mut rig, 1);
    assert_eq!(
        unread(&rig),
        [new.cqn],
        "the owed event after its own was consumed"
    );
}

#[test]
fn cqs_re_armed_in_a_loop_never_overrun_an_event_queue_sized_for_them() {
    let mut rig = Rig::new();
    // Two CQs of the rig and 40 more: 42 of the queue's 64 slots (one kept for FATAL).
    let mut cqs = vec![rig.scq.cqn, rig.rcq.cqn];
    for i in 0..40u64 {
        cqs.push(
            rig.cq(RINGS + 0x30_0000 + i * 0x1000, BUF + 0x900 + i * 8)
                .cqn,
        );
    }
    // Each holds one unpolled completion and is re-armed 100 times; nobody consumes events.
    for &cqn in &cqs {
        cqe(&mut rig, cqn);
    }
    for _ in 0..100 {
        for &cqn in &cqs {
            arm(&mut rig, cqn, 0);
        }
    }
    assert_eq!(
        unread(&rig),
        cqs,
        "one event per CQ, in the order they came due"
    );
    assert_eq!(rig.nic.events_dropped(), 0);
    assert_eq!(rig.nic.status() & hw::STATUS_FATAL, 0);
    assert_eq!(rig.nic.counters().get(Anomaly::EventDropped), 0);
    assert_eq!(coalesced(&rig), 42 * 99);
}
