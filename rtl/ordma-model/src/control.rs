//! The control channel: a test changes the NIC while the guest runs.
//!
//! `ordma-model --control PATH` listens on a Unix stream socket at PATH. Each connection
//! carries one request line and gets one reply line: `ok`, `ok key=value ...`, or
//! `error: <message>`. Requests:
//!
//! | Request | Effect |
//! |---|---|
//! | `link up`, `link down` | the port's link changes; `PORT_ACTIVE`/`PORT_DOWN` is posted (MSI-X if armed) |
//! | `fatal [CODE]` | the NIC stops as on an internal error: `STATUS.FATAL`, `ERROR = CODE` (default `ERR_INTERNAL`, 5), `EVENT_FATAL` |
//! | `inject FAULT [until-reset]` | arms an `--inject` fault now (`none` clears it): e.g. `destroy-fails` (`DESTROY_CQ`/`DESTROY_QP` fail, the queues stay), `admin-stuck` (no admin command completes), `admin-dies` (the next admin doorbell makes the NIC fatal), `admin-lost` (the next admin command runs and its completion is never written; disarms itself). It lasts through every reset until disarmed; with `until-reset`, until the next function reset disarms it |
//! | `die`, `die fatal` | the NIC dies softly (below); an error reply if it is dead already (`die fatal`: or fatal) |
//! | `event KIND DATA [COUNT]` | posts COUNT (1..=64, default 1) events of any kind with `data` DATA, as the NIC would |
//! | `doorbell-pages` | `ok PAGE=N ...`: each doorbell page written since the model started, with its count of 32-bit writes (accepted or not) |
//! | `counters` | `ok sent_pkts=N rcvd_pkts=N ...`: port 1's counters, as `CMD_QUERY_COUNTERS` reports them (`hardware.md`, "Port counters") |
//! | `mr KEY` | `ok pdn=N access=N iova=0xN length=N npages=N page_shift=N levels=N`: the MR with key KEY as the NIC holds it (what `CMD_CREATE_MR` gave it); an error if there is none |
//! | `wire loss\|duplicate\|reorder\|corrupt P`, `wire clear` | the port's link fails on request: from now on each unicast frame it sends is lost, duplicated, held back behind the frames sent after it in the same action, or has one bit flipped past its Ethernet header, with probability P (0 to 1); `clear` sets every P to 0. The counters are `status`' `wire_lost`, `wire_duplicated`, `wire_reordered`, `wire_corrupted` |
//! | `status` | `ok link=up\|down enabled=0\|1 fatal=0\|1 error=N dead=0\|1 bme=0\|1 pds=N mrs=N cqs=N qps=N pds_created=N mrs_created=N cqs_created=N qps_created=N pds_destroyed=N mrs_destroyed=N cqs_destroyed=N qps_destroyed=N srqs=N srqs_created=N srqs_destroyed=N mws=N mws_created=N mws_destroyed=N atomics=N atomics_replayed=N timer_resends=N seq_naks_sent=N seq_naks_received=N uc_dropped=N doorbells=N commands=N events=N events_coalesced=N events_unread=N admin_pending=N` and every anomaly counter |
//!
//! A soft death ([`Death`], [`crate::engine::Nic::die`]) kills the NIC while the model
//! process and its vfio-user connection live on, so a test of a NIC death needs no new
//! guest boot (QEMU's vfio-user client never reconnects to a model that exited). Either
//! way the NIC forgets, at once, everything it holds: every PD, MR, memory window, CQ,
//! QP and SRQ, the doorbell pages' bindings, each QP's counters, wire state and peers,
//! the packets in flight, the GID table, and every counter the model keeps (`status` then
//! reads as a new model process's); it holds nothing that could DMA, interrupt or send a
//! frame.
//!
//! - `die`: the NIC stops answering, as a killed model process looks to the guest: BAR0
//!   reads return all ones, BAR0 and doorbell writes are ignored, no event, interrupt, DMA
//!   or frame, frames arriving dropped (an Ethernet port's netdev's too, both ways);
//!   `status` says `dead=1`. Configuration space still answers. Only a function reset
//!   revives it: the PM capability's D3hot -> D0 (what the guest's
//!   `echo 1 > /sys/bus/pci/devices/<bdf>/reset` does, [`crate::pci`]) or vfio-user's
//!   `DEVICE_RESET`. It is then a NIC in its power-on state, as a new process's, bus
//!   mastering off, which the driver can probe again.
//! - `die fatal`: the NIC goes fatal as on an internal error (`STATUS.FATAL`, `ERROR` 5,
//!   `EVENT_FATAL` if its event queue works) and forgets everything but its registers and
//!   that event; a NIC reset (`CONTROL = RESET`: the driver's at unbind and probe)
//!   revives it, as after any fatal error.
//!
//! A function reset also disarms a fault injected `until-reset`; a NIC reset
//! (`CONTROL = RESET`) does not.
//!
//! The listener runs on a thread of its own and acts on the shared [`Device`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ordma_hw as hw;
use tracing::{info, warn};

use crate::device::Device;
use crate::engine::wire::Impairment;
use crate::engine::{Death, Fault};

/// The longest request line accepted, in bytes.
pub const MAX_REQUEST: u64 = 256;
/// How long either side waits for the other.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// One parsed control request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Request {
    /// `link up` / `link down`.
    Link(bool),
    /// `fatal [CODE]`.
    Fatal(u32),
    /// `inject FAULT [until-reset]` (`None`: `inject none`).
    Inject {
        /// The fault; `None` disarms.
        fault: Option<Fault>,
        /// `until-reset`: the next function reset disarms it.
        until_reset: bool,
    },
    /// `die` ([`Death::Silent`]), `die fatal` ([`Death::Fatal`]).
    Die(Death),
    /// `event KIND DATA [COUNT]`.
    Event {
        /// The event kind (`EVENT_*`, or one the NIC does not define).
        kind: u8,
        /// Its `data` word.
        data: u32,
        /// How many, 1..=[`MAX_EVENTS`].
        count: u32,
    },
    /// `doorbell-pages`.
    DoorbellPages,
    /// `counters`.
    Counters,
    /// `mr KEY`.
    Mr(u32),
    /// `wire KIND P`; `wire clear` is every kind at 0.
    Wire(Option<Impairment>, f64),
    /// `status`.
    Status,
}

/// The most events one `event` request posts (an event queue's worth).
pub const MAX_EVENTS: u32 = 64;

/// Parses a request line.
///
/// # Errors
///
/// A message for the `error:` reply if the line is not a request.
pub fn parse(line: &str) -> Result<Request, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["link", "up"] => Ok(Request::Link(true)),
        ["link", "down"] => Ok(Request::Link(false)),
        ["link", ..] => Err("usage: link up|down".into()),
        ["fatal"] => Ok(Request::Fatal(hw::ERR_INTERNAL)),
        ["fatal", code] => {
            let code = parse_u32(code).ok_or_else(|| format!("fatal: bad code {code}"))?;
            if code == hw::ERR_NONE {
                return Err("fatal: the code must not be 0 (no error)".into());
            }
            Ok(Request::Fatal(code))
        }
        ["fatal", ..] => Err("usage: fatal [CODE]".into()),
        ["inject", "none"] => Ok(Request::Inject {
            fault: None,
            until_reset: false,
        }),
        ["inject", fault] => Ok(Request::Inject {
            fault: Some(fault.parse()?),
            until_reset: false,
        }),
        ["inject", fault, "until-reset"] if *fault != "none" => Ok(Request::Inject {
            fault: Some(fault.parse()?),
            until_reset: true,
        }),
        ["inject", ..] => Err(format!(
            "usage: inject {} [until-reset], inject none",
            Fault::NAMES
        )),
        ["die"] => Ok(Request::Die(Death::Silent)),
        ["die", "fatal"] => Ok(Request::Die(Death::Fatal)),
        ["die", ..] => Err("usage: die [fatal]".into()),
        ["event", kind, data, rest @ ..] if rest.len() <= 1 => {
            let kind = parse_u32(kind)
                .and_then(|k| u8::try_from(k).ok())
                .ok_or_else(|| format!("event: bad kind {kind} (0..=255)"))?;
            let data = parse_u32(data).ok_or_else(|| format!("event: bad data {data}"))?;
            let count = match rest.first() {
                None => 1,
                Some(c) => parse_u32(c)
                    .filter(|c| (1..=MAX_EVENTS).contains(c))
                    .ok_or_else(|| format!("event: bad count {c} (1..={MAX_EVENTS})"))?,
            };
            Ok(Request::Event { kind, data, count })
        }
        ["event", ..] => Err(format!("usage: event KIND DATA [COUNT (1..={MAX_EVENTS})]")),
        ["doorbell-pages"] => Ok(Request::DoorbellPages),
        ["counters"] => Ok(Request::Counters),
        ["mr", key] => Ok(Request::Mr(
            parse_u32(key).ok_or_else(|| format!("mr: bad key {key}"))?,
        )),
        ["mr", ..] => Err("usage: mr KEY".into()),
        ["wire", "clear"] => Ok(Request::Wire(None, 0.0)),
        ["wire", kind, p] => {
            let kind = Impairment::from_name(kind).ok_or_else(|| {
                format!("wire: {kind} is not loss, duplicate, reorder or corrupt")
            })?;
            let p: f64 = p
                .parse()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(|| format!("wire: {p} is not a probability (0 to 1)"))?;
            Ok(Request::Wire(Some(kind), p))
        }
        ["wire", ..] => Err("usage: wire loss|duplicate|reorder|corrupt P, wire clear".into()),
        ["status"] => Ok(Request::Status),
        [] => Err("empty request".into()),
        [w, ..] => Err(format!(
            "unknown request {w} (link, fatal, inject, die, event, doorbell-pages, counters, mr, wire, status)"
        )),
    }
}

/// A decimal or `0x` hexadecimal `u32`.
fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Carries out `req` on `dev`; the reply line (without newline).
pub fn execute(dev: &Device, req: Request) -> String {
    let mut l = dev.lock();
    match req {
        Request::Link(up) => {
            l.nic.set_link(up, &*l.mem, l.irq);
            "ok".into()
        }
        Request::Fatal(code) => {
            if l.nic.is_dead() {
                return "error: the NIC is dead".into();
            }
            if l.nic.status() & hw::STATUS_FATAL != 0 {
                return format!("error: the NIC is already fatal (ERROR {})", l.nic.error());
            }
            l.nic.fatal(code, &*l.mem, l.irq);
            "ok".into()
        }
        Request::Inject { fault, until_reset } => {
            match fault {
                Some(f) if until_reset => l.nic.inject_until_reset(f),
                _ => l.nic.inject(fault),
            }
            "ok".into()
        }
        Request::Die(how) => match l.nic.die(how, &*l.mem, l.irq) {
            Ok(()) => "ok".into(),
            Err(e) => format!("error: {e}"),
        },
        Request::Event { kind, data, count } => {
            if l.nic.is_dead() {
                return "error: the NIC is dead".into();
            }
            for _ in 0..count {
                if !l.nic.post_any_event(kind, data, &*l.mem, l.irq) {
                    return "error: the NIC's queues are not running".into();
                }
            }
            "ok".into()
        }
        Request::DoorbellPages => {
            let mut r = String::from("ok");
            for (page, n) in l.nic.doorbell_page_writes().iter().enumerate() {
                if *n != 0 {
                    r.push_str(&format!(" {page}={n}"));
                }
            }
            r
        }
        Request::Counters => {
            let c = l.nic.port_counters();
            let mut r = String::from("ok");
            for (name, n) in hw::COUNTERS.iter().zip(c.0) {
                r.push_str(&format!(" {}={n}", name.to_string_lossy()));
            }
            r
        }
        Request::Mr(key) => match l.nic.mr(key) {
            Some(m) => format!(
                "ok pdn={} access={} iova={:#x} length={} npages={} page_shift={} levels={}",
                m.pdn,
                m.access,
                m.iova,
                m.length,
                m.pages.npages,
                m.pages.page_shift,
                m.pages.levels
            ),
            None => format!("error: no MR with key {key:#x}"),
        },
        Request::Wire(kind, p) => {
            let kinds = match kind {
                Some(k) => vec![k],
                None => Impairment::ALL.to_vec(),
            };
            for k in kinds {
                if let Err(e) = l.nic.wire_impair(k, p) {
                    return format!("error: {e}");
                }
            }
            "ok".into()
        }
        Request::Status => format!(
            "ok {}{}{}",
            l.nic.status_snapshot(),
            l.nic.wire_impairments(),
            crate::engine::datapath::status()
        ),
    }
}

/// Serves one connection: one request line, one reply line.
fn serve(dev: &Device, stream: UnixStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut line = String::new();
    let mut reader = BufReader::new((&stream).take(MAX_REQUEST));
    let reply = match reader.read_line(&mut line) {
        Ok(_) if !line.ends_with('\n') && line.len() as u64 >= MAX_REQUEST => {
            "error: request too long".to_string()
        }
        Ok(_) => match parse(line.trim()) {
            Ok(req) => {
                info!(request = line.trim(), "control request");
                execute(dev, req)
            }
            Err(e) => format!("error: {e}"),
        },
        Err(e) => format!("error: {e}"),
    };
    (&stream).write_all(format!("{reply}\n").as_bytes())
}

/// The control channel's listener thread; dropping it stops the thread and removes the
/// socket.
pub struct Listener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Listens at `path` (which must not exist) and serves requests on `dev` on a thread.
    ///
    /// # Errors
    ///
    /// Binding the socket or starting the thread failed.
    pub fn spawn(path: &Path, dev: Arc<Device>) -> std::io::Result<Self> {
        let listener = UnixListener::bind(path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    match stream {
                        Ok(s) => {
                            if let Err(e) = serve(&dev, s) {
                                warn!(%e, "control connection failed");
                            }
                        }
                        Err(e) => warn!(%e, "control accept failed"),
                    }
                }
            });
        let thread = match thread {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
        };
        info!(path = %path.display(), "control channel listening");
        Ok(Self {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so it sees the flag.
        if UnixStream::connect(&self.path).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sends `request` to the control channel at `path` and returns the reply line (trimmed).
///
/// # Errors
///
/// Connecting, sending or receiving failed, or no reply came within [`TIMEOUT`].
pub fn request(path: &Path, request: &str) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    s.write_all(format!("{}\n", request.trim()).as_bytes())?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut reply = String::new();
    BufReader::new(s.take(4096)).read_line(&mut reply)?;
    if reply.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no reply",
        ));
    }
    Ok(reply.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(parse("link up"), Ok(Request::Link(true)));
        assert_eq!(parse("  link   down \n"), Ok(Request::Link(false)));
        assert_eq!(parse("fatal"), Ok(Request::Fatal(hw::ERR_INTERNAL)));
        assert_eq!(parse("fatal 7"), Ok(Request::Fatal(7)));
        assert_eq!(parse("fatal 0x10"), Ok(Request::Fatal(16)));
        assert_eq!(parse("status"), Ok(Request::Status));
        assert_eq!(parse("counters"), Ok(Request::Counters));
        let inject = |fault, until_reset| Ok(Request::Inject { fault, until_reset });
        assert_eq!(
            parse("inject reset-stuck"),
            inject(Some(Fault::ResetStuck), false)
        );
        assert_eq!(parse("inject none"), inject(None, false));
        assert_eq!(
            parse("inject admin-stuck"),
            inject(Some(Fault::AdminStuck), false)
        );
        assert_eq!(
            parse("inject admin-stuck until-reset"),
            inject(Some(Fault::AdminStuck), true)
        );
        assert_eq!(
            parse("inject destroy-fails"),
            inject(Some(Fault::DestroyFails), false)
        );
        assert_eq!(parse("die"), Ok(Request::Die(Death::Silent)));
        assert_eq!(parse(" die  fatal"), Ok(Request::Die(Death::Fatal)));
        assert_eq!(
            parse("event 200 7"),
            Ok(Request::Event {
                kind: 200,
                data: 7,
                count: 1
            })
        );
        assert_eq!(
            parse("event 0x3 5 64"),
            Ok(Request::Event {
                kind: 3,
                data: 5,
                count: 64
            })
        );
        assert_eq!(
            parse("wire loss 0.01"),
            Ok(Request::Wire(Some(Impairment::Loss), 0.01))
        );
        assert_eq!(
            parse("wire reorder 1"),
            Ok(Request::Wire(Some(Impairment::Reorder), 1.0))
        );
        assert_eq!(parse("wire clear"), Ok(Request::Wire(None, 0.0)));
        for bad in [
            "wire",
            "wire loss",
            "wire loss 1.5",
            "wire loss -0.1",
            "wire loss NaN",
            "wire drop 0.1",
            "event",
            "event 1",
            "event 256 0",
            "event 1 2 0",
            "event 1 2 65",
            "event 1 2 3 4",
            "",
            "link",
            "link sideways",
            "link up now",
            "fatal 0",
            "fatal -1",
            "fatal 1 2",
            "fatal 0x1_0000_0000",
            "inject",
            "inject nonsense",
            "inject none until-reset",
            "inject admin-stuck until-later",
            "inject admin-stuck until-reset now",
            "die now",
            "die fatal 5",
            "status please",
            "reboot",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn any_line_parses_or_errs_without_panicking() {
        let words = [
            "link",
            "up",
            "down",
            "fatal",
            "0x",
            "7",
            "inject",
            "none",
            "status",
            "\u{0}",
            "event",
            "65",
            "300",
            "die",
            "until-reset",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 4) as usize;
            let line: Vec<&str> = (0..n)
                .map(|i| words[((x >> (8 * i)) % words.len() as u64) as usize])
                .collect();
            let _ = parse(&line.join(" "));
        }
    }
}
