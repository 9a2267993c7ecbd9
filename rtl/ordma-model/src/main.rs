//! `ordma-model`: one ordma NIC, served to QEMU over vfio-user.

use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use ordma_model::control;
use ordma_model::device::Device;
use ordma_model::engine::{Fault, Nic, NicConfig};
use ordma_model::mem::GuestRam;
use ordma_model::server::Backend;
use tracing::{error, info};

/// The ordma RDMA NIC's behavioral model, served to QEMU over vfio-user.
#[derive(Parser, Debug)]
#[command(
    name = "ordma-model",
    version,
    subcommand_negates_reqs = true,
    args_override_self = true,
    args_conflicts_with_subcommands = true,
    after_help = "One process serves one NIC for one QEMU connection and exits when QEMU \
                  disconnects.\nThe interface it implements is Documentation/hardware.md."
)]
struct Args {
    /// vfio-user socket to listen on (must not exist); QEMU connects with
    /// -device vfio-user-pci,socket={"type":"unix","path":"PATH"}
    #[arg(long, value_name = "PATH", required = true)]
    socket: Option<PathBuf>,
    /// Node GUID, hexadecimal (default 02000000000000 + --index)
    #[arg(long, value_name = "HEX", value_parser = parse_guid)]
    guid: Option<u64>,
    /// This NIC's number, for the default GUID, the LID (N + 1) and the logs
    #[arg(long, value_name = "N", default_value_t = 0)]
    index: u64,
    /// The port's initial link state
    #[arg(long, value_enum, default_value_t = Link::Up)]
    link: Link,
    /// Log file (default: standard error)
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// error, warn, info, debug or trace
    #[arg(long, value_name = "L", default_value = "info", value_parser = parse_level)]
    log_level: tracing::Level,
    /// Misbehave, to test the driver: bad-version (VERSION says 2.0), reset-stuck (READY
    /// never returns after a reset), query-device-error (QUERY_DEVICE fails), destroy-fails
    /// (DESTROY_CQ and DESTROY_QP fail, the queues stay), admin-stuck (no admin command
    /// completes), admin-dies (the next admin doorbell makes the NIC fatal), admin-lost
    /// (the next admin command runs, its completion never written). It lasts
    /// through every reset (the control channel's `inject FAULT until-reset` arms one that
    /// the next function reset ends; QEMU's machine reset before the guest boots is one)
    #[arg(long, value_name = "FAULT", value_parser = parse_fault)]
    inject: Option<Fault>,
    /// The shortest transport (ACK) timer, as an IB timeout exponent (4.096 µs × 2^E): a QP
    /// asking less waits this long. 17 (0.54 s): a model starved of CPU for a while on a
    /// loaded host does not exhaust a peer's retries (0: as each QP asks)
    #[arg(long, value_name = "E", default_value_t = 17, value_parser = clap::value_parser!(u8).range(0..=31))]
    min_ack_timeout: u8,
    /// Report N for a device attribute: max_qp, max_qp_wr, max_cq, max_cqe, max_mr,
    /// max_pd, max_sge, max_srq, max_srq_wr, max_srq_sge, max_mw, hw_ver, or fw_ver=MAJOR.MINOR.SUB
    /// (repeatable)
    #[arg(long, value_name = "NAME=N", value_parser = parse_attr)]
    attr: Vec<(Attr, u64)>,
    /// Write "ready\n" to file descriptor N once listening, then close it
    #[arg(long, value_name = "N")]
    ready_fd: Option<i32>,
    /// Listen for control requests (link up|down, fatal [CODE], inject FAULT [until-reset],
    /// die [fatal], event, counters, mr KEY, wire, status: Documentation/hardware.md) on a
    /// Unix socket at PATH (must not exist; removed on exit)
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// The wire between NICs, an L2 segment: a directory shared by every NIC of a run;
    /// this NIC binds DIR/<its MAC>.sock (02-6f-72-64-00-01.sock) and sends a frame for
    /// MAC M to DIR/M.sock
    #[arg(long, value_name = "DIR")]
    wire: Option<PathBuf>,
    /// The port's link layer: infiniband (LIDs; MAC and IPv4 address on the wire derived
    /// from the LID) or ethernet (RoCEv2: a MAC, a GID table the driver fills)
    #[arg(long, value_enum, default_value_t = LinkLayer::Infiniband)]
    link_layer: LinkLayer,
    /// An Ethernet port's MAC (default 02:6f:72:64:00:<N + 1>, N the --index)
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    mac: Option<[u8; 6]>,
    /// With --wire and an Ethernet port: the host's frames (a QEMU dgram netdev with the
    /// port's MAC) arrive on a socket this NIC binds at PATH and go onto the wire; frames
    /// from the wire that are not RoCEv2 for the port go to --netdev-peer
    #[arg(long, value_name = "PATH", requires_all = ["wire", "netdev_peer"])]
    netdev: Option<PathBuf>,
    /// With --netdev: the netdev's socket (QEMU's local.path)
    #[arg(long, value_name = "PATH", requires = "netdev")]
    netdev_peer: Option<PathBuf>,
    /// With --wire: capture every frame the port sends and receives in FILE (pcap)
    #[arg(long, value_name = "FILE", requires = "wire")]
    pcap: Option<PathBuf>,
    /// Co-simulation: every DMA through the RTL DMA channel mux and every frame's ICRC
    /// from the RTL ICRC unit (rtl/hdl, Verilated; needs a model built with the `rtl`
    /// feature, as `make` builds it)
    #[arg(long)]
    rtl: bool,
    /// With --rtl: the probability P (0 to 0.9) that each port of the RTL blocks stalls in
    /// a cycle
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_stalls)]
    rtl_stalls: f64,
    /// With --rtl: the stalls' seed
    #[arg(long, value_name = "N", default_value_t = 1)]
    rtl_seed: u64,
    /// With --rtl: the mux, good, or a mutant the checks must catch: loses-beat (a beat
    /// that arrives while the output stalls overwrites it) or bubble
    #[arg(long, value_name = "KIND", default_value = "good", value_parser = ["good", "loses-beat", "bubble"])]
    rtl_mux: String,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Send one request to a running model's control channel and print the reply; exit
    /// status 0 for "ok...", 1 for "error..." or no answer within 5 s
    Ctl {
        /// The model's --control socket
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// The request, e.g. "link down" or "status"
        #[arg(required = true, num_args = 1.., value_name = "WORDS")]
        words: Vec<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Link {
    Up,
    Down,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LinkLayer {
    Infiniband,
    Ethernet,
}

fn parse_mac(v: &str) -> Result<[u8; 6], String> {
    let mut mac = [0u8; 6];
    let mut parts = v.split([':', '-']);
    for b in &mut mac {
        let p = parts.next().ok_or("six bytes, as 02:6f:72:64:00:01")?;
        *b = u8::from_str_radix(p, 16).map_err(|e| format!("{p}: {e}"))?;
    }
    if parts.next().is_some() {
        return Err("six bytes, as 02:6f:72:64:00:01".into());
    }
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err("a unicast address, not zero".into());
    }
    Ok(mac)
}

/// A device attribute `--attr` can change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attr {
    MaxQp,
    MaxQpWr,
    MaxCq,
    MaxCqe,
    MaxMr,
    MaxPd,
    MaxSrq,
    MaxSrqWr,
    MaxSrqSge,
    MaxMw,
    MaxSge,
    HwVer,
    FwVer,
}

fn parse_guid(v: &str) -> Result<u64, String> {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).map_err(|e| format!("{v}: {e}"))
}

fn parse_stalls(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(p) if (0.0..=0.9).contains(&p) => Ok(p),
        _ => Err(format!("{v}: a probability from 0 to 0.9")),
    }
}

/// Installs the RTL datapath (`--rtl`).
#[cfg(feature = "rtl")]
fn install_rtl(args: &Args) -> Result<(), String> {
    use ordma_model::engine::datapath::{self, rtl};
    use ordma_rtl::MuxKind;
    let mux = match args.rtl_mux.as_str() {
        "loses-beat" => MuxKind::LosesBeat,
        "bubble" => MuxKind::Bubble,
        _ => MuxKind::Good,
    };
    let cfg = rtl::Config {
        stalls: args.rtl_stalls,
        seed: args.rtl_seed,
        mux,
    };
    if !datapath::install(Box::new(rtl::Rtl::new(cfg))) {
        return Err("a datapath is installed already".into());
    }
    info!(stalls = cfg.stalls, seed = cfg.seed, mux = ?cfg.mux, "co-simulation: DMA and ICRC through the RTL blocks");
    Ok(())
}

/// `--rtl` without the `rtl` feature.
#[cfg(not(feature = "rtl"))]
fn install_rtl(_: &Args) -> Result<(), String> {
    Err(
        "this ordma-model was built without the RTL (cargo's `rtl` feature, which needs Verilator)"
            .into(),
    )
}

fn parse_level(v: &str) -> Result<tracing::Level, String> {
    v.parse().map_err(|_| format!("{v}: not a level"))
}

fn parse_fault(v: &str) -> Result<Fault, String> {
    v.parse()
}

/// Parses `--attr NAME=N` (`fw_ver=MAJOR.MINOR.SUB`: 16 bits each, as the driver shows
/// it, into `fw_version`'s bits 47..0).
fn parse_attr(v: &str) -> Result<(Attr, u64), String> {
    let (name, n) = v
        .split_once('=')
        .ok_or_else(|| format!("{v}: want NAME=N"))?;
    if name == "fw_ver" {
        let parts: Vec<&str> = n.split('.').collect();
        let [a, b, c] = parts.as_slice() else {
            return Err(format!("{v}: want fw_ver=MAJOR.MINOR.SUB"));
        };
        let mut fw = 0u64;
        for p in [a, b, c] {
            let p: u16 = p.parse().map_err(|e| format!("{v}: {e}"))?;
            fw = (fw << 16) | u64::from(p);
        }
        return Ok((Attr::FwVer, fw));
    }
    let n: u32 = n.parse().map_err(|e| format!("{v}: {e}"))?;
    let attr = match name {
        "max_qp" => Attr::MaxQp,
        "max_qp_wr" => Attr::MaxQpWr,
        "max_cq" => Attr::MaxCq,
        "max_cqe" => Attr::MaxCqe,
        "max_mr" => Attr::MaxMr,
        "max_pd" => Attr::MaxPd,
        "max_sge" => Attr::MaxSge,
        "max_srq" => Attr::MaxSrq,
        "max_srq_wr" => Attr::MaxSrqWr,
        "max_srq_sge" => Attr::MaxSrqSge,
        "max_mw" => Attr::MaxMw,
        "hw_ver" => Attr::HwVer,
        _ => return Err(format!("unknown attribute {name}")),
    };
    Ok((attr, u64::from(n)))
}

/// Applies one `--attr` to the attributes the NIC reports (`n` as [`parse_attr`] made it).
fn set_attr(a: &mut ordma_hw::DeviceAttrs, attr: Attr, n: u64) {
    let field = match attr {
        Attr::FwVer => {
            a.fw_version = n;
            return;
        }
        Attr::MaxQp => &mut a.max_qp,
        Attr::MaxQpWr => &mut a.max_qp_wr,
        Attr::MaxCq => &mut a.max_cq,
        Attr::MaxCqe => &mut a.max_cqe,
        Attr::MaxMr => &mut a.max_mr,
        Attr::MaxPd => &mut a.max_pd,
        Attr::MaxSge => &mut a.max_sge,
        Attr::MaxSrq => &mut a.max_srq,
        Attr::MaxSrqWr => &mut a.max_srq_wr,
        Attr::MaxSrqSge => &mut a.max_srq_sge,
        Attr::MaxMw => &mut a.max_mw,
        Attr::HwVer => &mut a.hw_ver,
    };
    // CAST: parse_attr made every other attribute from a u32; never saturates.
    *field = u32::try_from(n).unwrap_or(u32::MAX);
}

/// `ordma-model ctl`: one request, the reply on standard output.
fn ctl(path: &std::path::Path, words: &[String]) -> ExitCode {
    match control::request(path, &words.join(" ")) {
        Ok(reply) => {
            println!("{reply}");
            if reply == "ok" || reply.starts_with("ok ") {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            println!("error: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Cmd::Ctl { control, words }) = &args.cmd {
        return ctl(control, words);
    }
    let Some(socket) = args.socket.clone() else {
        eprintln!("ordma-model: --socket is required (see --help)");
        return ExitCode::from(2);
    };
    // tracing-subscriber's `init` also installs the `log` bridge (tracing-log), so the
    // vfio_user crate's messages land in the same log, filtered by the same level.
    let sub = tracing_subscriber::fmt()
        .with_max_level(args.log_level)
        .with_ansi(false);
    match &args.log {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => sub.with_writer(std::sync::Mutex::new(f)).init(),
            Err(e) => {
                eprintln!("ordma-model: cannot create {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => sub.with_writer(std::io::stderr).init(),
    }

    let guid = args.guid.unwrap_or(0x0200_0000_0000_0000 | args.index);
    let mut config = NicConfig::with_guid(guid);
    config.link_up = args.link == Link::Up;
    // CAST: LIDs are 16-bit; --index is at most a few NICs.
    config.lid = (args.index + 1) as u16;
    if args.link_layer == LinkLayer::Ethernet {
        config.mac = Some(
            args.mac
                .unwrap_or_else(|| ordma_model::engine::port::lid_mac(config.lid)),
        );
    }
    config.fault = args.inject;
    config.min_ack_timeout = args.min_ack_timeout;
    for (attr, n) in &args.attr {
        set_attr(&mut config.attrs, *attr, *n);
    }
    info!(nic = args.index, guid = format_args!("{guid:016x}"), socket = %socket.display(), "starting");

    if args.rtl {
        if let Err(e) = install_rtl(&args) {
            error!(%e, "--rtl");
            eprintln!("ordma-model: --rtl: {e}");
            return ExitCode::FAILURE;
        }
    }

    let server = match vfio_user::Server::new(&socket, true, Backend::irqs(), Backend::regions()) {
        Ok(s) => s,
        Err(e) => {
            error!(%e, "cannot listen");
            eprintln!("ordma-model: cannot listen on {}: {e}", socket.display());
            return ExitCode::FAILURE;
        }
    };
    let dev = Arc::new(Device::new(Nic::new(config), GuestRam::default()));
    if let Err(e) = Device::spawn_timers(&dev) {
        error!(%e, "cannot start the timer thread");
        return ExitCode::FAILURE;
    }
    if let Some(dir) = &args.wire {
        let mac = dev.lock().nic.mac();
        let netdev = args.netdev.as_deref().zip(args.netdev_peer.as_deref());
        let extras = ordma_model::wire::Extras {
            netdev,
            pcap: args.pcap.as_deref(),
        };
        if let Err(e) = ordma_model::wire::attach(&dev, dir, mac, extras) {
            error!(%e, dir = %dir.display(), "cannot attach to the wire");
            eprintln!(
                "ordma-model: cannot attach to the wire in {}: {e}",
                dir.display()
            );
            return ExitCode::FAILURE;
        }
        info!(dir = %dir.display(), lid = config.lid, ?mac, netdev = netdev.is_some(), "on the wire");
    }
    let _control = match &args.control {
        Some(path) => match control::Listener::spawn(path, Arc::clone(&dev)) {
            Ok(l) => Some(l),
            Err(e) => {
                error!(%e, path = %path.display(), "cannot listen for control requests");
                eprintln!("ordma-model: cannot listen on {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    if let Some(fd) = args.ready_fd {
        // SAFETY: the caller handed us this descriptor for exactly this use (--ready-fd); we
        // take ownership and close it after the one write.
        let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
        if let Err(e) = f.write_all(b"ready\n") {
            error!(fd, %e, "cannot signal readiness");
            return ExitCode::FAILURE;
        }
    }
    info!("listening");
    let mut backend = Backend::new(Arc::clone(&dev));
    let result = server.run(&mut backend);
    info!(counters = %dev.lock().nic.counters(), "final counts");
    match result {
        Ok(()) => {
            info!("QEMU disconnected; exiting");
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!(%e, "vfio-user connection failed");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_command_lines_parse_as_before() {
        // What qemu-test/vm-inner.sh passes, with a test's --nic-args after it: a repeated
        // option's last value wins, --attr accumulates.
        let a = Args::try_parse_from([
            "ordma-model",
            "--socket",
            "/tmp/nic1.sock",
            "--index",
            "1",
            "--log",
            "/tmp/nic1.log",
            "--log-level",
            "info",
            "--control",
            "/tmp/nic1.ctl",
            "--wire",
            "/tmp/wire",
            "--log-level",
            "debug",
            "--attr",
            "max_qp=77",
            "--attr",
            "max_pd=4",
            "--attr",
            "fw_ver=3.14.15",
            "--link",
            "down",
            "--inject",
            "reset-stuck",
            "--guid",
            "0x0200000000000042",
            "--ready-fd",
            "3",
        ])
        .unwrap();
        assert_eq!(a.log_level, tracing::Level::DEBUG);
        assert_eq!(
            a.attr,
            vec![
                (Attr::MaxQp, 77),
                (Attr::MaxPd, 4),
                (Attr::FwVer, (3 << 32) | (14 << 16) | 15)
            ]
        );
        assert_eq!((a.index, a.link, a.ready_fd), (1, Link::Down, Some(3)));
        assert_eq!(a.inject, Some(Fault::ResetStuck));
        assert_eq!(a.guid, Some(0x0200_0000_0000_0042));
        assert!(a.control.is_some() && a.cmd.is_none());
        assert_eq!(a.wire, Some(PathBuf::from("/tmp/wire")));
        for bad in [
            &["ordma-model", "--index", "1"][..],
            &["ordma-model", "--socket", "s", "--attr", "max_foo=1"],
            &["ordma-model", "--socket", "s", "--attr", "fw_ver=1.2"],
            &["ordma-model", "--socket", "s", "--attr", "fw_ver=1.2.65536"],
            &[
                "ordma-model",
                "--socket",
                "s",
                "--attr",
                "max_qp=4294967296",
            ],
            &["ordma-model", "--socket", "s", "--link", "sideways"],
            &["ordma-model", "--socket", "s", "--log-level", "loud"],
            &["ordma-model", "--socket", "s", "--bogus"],
        ] {
            assert!(Args::try_parse_from(bad).is_err(), "{bad:?}");
        }
        let c =
            Args::try_parse_from(["ordma-model", "ctl", "--control", "p", "link", "down"]).unwrap();
        assert!(matches!(c.cmd, Some(Cmd::Ctl { ref words, .. }) if words == &["link", "down"]));
    }
}
