//! Bounded logging of bad input, and the counters behind it.
//!
//! A guest can ring a bad doorbell or submit a bad command as fast as it likes; the model
//! must not write a log line for each. Every anomaly is counted; the first [`LOG_FIRST`] of
//! each kind are logged in full, after that one summary line each time the count reaches a
//! power of two, so a guest hammering one mistake costs O(log n) lines. The counts are never
//! reset (a NIC reset does not clear them) and are readable through the control channel.

use std::fmt;

use tracing::warn;

/// How many anomalies of one kind are logged in full.
pub const LOG_FIRST: u64 = 8;

/// A kind of bad input (or refused work) the model counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anomaly {
    /// A doorbell write the NIC could not accept (queue off or unknown, index out of
    /// range, unknown doorbell offset).
    BadDoorbell,
    /// A write to a read-only or unknown register, or an unknown `CONTROL` command.
    BadRegisterWrite,
    /// A BAR0 access that is not an aligned 32-bit access (ignored).
    BadAccess,
    /// An admin command answered with `BAD_OPCODE` or `BAD_PARAM`.
    BadCommand,
    /// A guest buffer or queue the NIC could not reach (`BAD_ADDRESS`, queue DMA failure).
    BadAddress,
    /// An admin command answered with `NO_RESOURCES`.
    NoResources,
    /// Work that needed DMA while the guest had bus mastering off (deferred, not lost).
    DmaRefused,
    /// An event dropped because the event queue (or the NIC's event FIFO) was full.
    EventDropped,
    /// A doorbell on one context's page for a queue another context owns (ignored).
    ForeignDoorbell,
    /// A send or receive WQE the data path refused (malformed, or a local key, address or
    /// length the MR table refuses): an error completion, the QP to `ERR`.
    BadWqe,
    /// A frame from the wire refused (short, bad checksum or ICRC, not RoCEv2, an opcode
    /// that is not RC's, another NIC's LID): dropped.
    BadFrame,
}

impl Anomaly {
    /// Every kind, in the order the status line lists them.
    pub const ALL: [Anomaly; 11] = [
        Anomaly::BadDoorbell,
        Anomaly::BadRegisterWrite,
        Anomaly::BadAccess,
        Anomaly::BadCommand,
        Anomaly::BadAddress,
        Anomaly::NoResources,
        Anomaly::DmaRefused,
        Anomaly::EventDropped,
        Anomaly::ForeignDoorbell,
        Anomaly::BadWqe,
        Anomaly::BadFrame,
    ];

    /// The counter's name in logs and in the control channel's `status` line.
    pub fn name(self) -> &'static str {
        match self {
            Anomaly::BadDoorbell => "bad_doorbells",
            Anomaly::BadRegisterWrite => "bad_register_writes",
            Anomaly::BadAccess => "bad_accesses",
            Anomaly::BadCommand => "bad_commands",
            Anomaly::BadAddress => "bad_addresses",
            Anomaly::NoResources => "no_resources",
            Anomaly::DmaRefused => "dma_refused",
            Anomaly::EventDropped => "events_dropped",
            Anomaly::ForeignDoorbell => "foreign_doorbells",
            Anomaly::BadWqe => "bad_wqes",
            Anomaly::BadFrame => "bad_frames",
        }
    }
}

/// The anomaly counters of one NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    n: [u64; Anomaly::ALL.len()],
}

impl Counters {
    /// Counts one `a`; `true` if it is to be logged in full.
    pub fn note(&mut self, a: Anomaly) -> bool {
        // CAST: the discriminants are 0..ALL.len() (declaration order).
        let Some(n) = self.n.get_mut(a as usize) else {
            return false;
        };
        *n = n.saturating_add(1);
        let n = *n;
        if n <= LOG_FIRST {
            return true;
        }
        if n.is_power_of_two() {
            warn!(
                kind = a.name(),
                count = n,
                "{n} so far; only the first {LOG_FIRST} and each power of two are logged"
            );
        }
        false
    }

    /// How many `a` there were.
    pub fn get(&self, a: Anomaly) -> u64 {
        self.n.get(a as usize).copied().unwrap_or(0)
    }
}

impl fmt::Display for Counters {
    /// `name=N` for every kind, space-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in Anomaly::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{}={}", a.name(), self.get(*a))?;
        }
        Ok(())
    }
}

/// Logs a warning for anomaly `$a` if the counters allow it (`$nic.counters.note`).
macro_rules! bounded_warn {
    ($counters:expr, $a:expr, $($arg:tt)+) => {
        if $counters.note($a) {
            tracing::warn!($($arg)+);
        }
    };
}
pub(crate) use bounded_warn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_few_then_powers_of_two() {
        let mut c = Counters::default();
        let logged: Vec<u64> = (1..=1000)
            .filter(|_| c.note(Anomaly::BadDoorbell))
            .collect();
        assert_eq!(logged.len() as u64, LOG_FIRST);
        assert_eq!(c.get(Anomaly::BadDoorbell), 1000);
        assert_eq!(c.get(Anomaly::BadCommand), 0);
        assert!(c
            .to_string()
            .starts_with("bad_doorbells=1000 bad_register_writes=0"));
    }
}
