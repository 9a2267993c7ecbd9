//! `ordma-model`: one ordma NIC, served to QEMU over vfio-user.

use std::io::Write;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::ExitCode;

use ordma_model::engine::{Nic, NicConfig};
use ordma_model::server::Backend;
use tracing::{error, info};

const HELP: &str = "\
ordma-model: the ordma RDMA NIC's behavioral model, served to QEMU over vfio-user

Usage: ordma-model --socket PATH [options]

  --socket PATH     vfio-user socket to listen on (must not exist); QEMU connects with
                    -device vfio-user-pci,socket={\"type\":\"unix\",\"path\":\"PATH\"}
  --guid HEX        node GUID (default 02000000000000 + --index)
  --index N         this NIC's number, for the default GUID, the LID (N + 1) and the
                    logs (default 0)
  --link up|down    the port's initial link state (default up)
  --log FILE        log file (default: standard error)
  --log-level L     error, warn, info, debug or trace (default info)
  --inject FAULT    misbehave, to test the driver: bad-version (VERSION says 2.0),
                    reset-stuck (READY never returns after a reset), query-device-error
                    (QUERY_DEVICE fails)
  --attr NAME=N     report N for a device attribute: max_qp, max_qp_wr, max_cq,
                    max_cqe, max_mr, max_pd, max_sge, hw_ver (repeatable)
  --ready-fd N      write \"ready\\n\" to file descriptor N once listening, then close it
  -h, --help        this text

One process serves one NIC for one QEMU connection and exits when QEMU disconnects.
The interface it implements is Documentation/hardware.md.
";

struct Args {
    socket: PathBuf,
    guid: Option<u64>,
    index: u64,
    link_up: bool,
    log: Option<PathBuf>,
    level: tracing::Level,
    ready_fd: Option<i32>,
    fault: Option<ordma_model::engine::Fault>,
    attrs: Vec<(String, u32)>,
}

/// Parses `--attr NAME=N`.
fn parse_attr(v: &str) -> Result<(String, u32), String> {
    let (name, n) = v
        .split_once('=')
        .ok_or_else(|| format!("--attr {v}: want NAME=N"))?;
    let n = n.parse().map_err(|e| format!("--attr {v}: {e}"))?;
    Ok((name.to_string(), n))
}

/// Applies one `--attr` to the attributes the NIC reports.
fn set_attr(a: &mut ordma_hw::DeviceAttrs, name: &str, n: u32) -> Result<(), String> {
    let field = match name {
        "max_qp" => &mut a.max_qp,
        "max_qp_wr" => &mut a.max_qp_wr,
        "max_cq" => &mut a.max_cq,
        "max_cqe" => &mut a.max_cqe,
        "max_mr" => &mut a.max_mr,
        "max_pd" => &mut a.max_pd,
        "max_sge" => &mut a.max_sge,
        "hw_ver" => &mut a.hw_ver,
        _ => return Err(format!("--attr: unknown attribute {name}")),
    };
    *field = n;
    Ok(())
}

fn parse() -> Result<Option<Args>, String> {
    let mut a = Args {
        socket: PathBuf::new(),
        guid: None,
        index: 0,
        link_up: true,
        log: None,
        level: tracing::Level::INFO,
        ready_fd: None,
        fault: None,
        attrs: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(opt) = it.next() {
        if opt == "-h" || opt == "--help" {
            return Ok(None);
        }
        let mut val = || it.next().ok_or_else(|| format!("{opt} needs a value"));
        match opt.as_str() {
            "--socket" => a.socket = PathBuf::from(val()?),
            "--guid" => {
                let v = val()?;
                let hex = v.trim_start_matches("0x");
                a.guid =
                    Some(u64::from_str_radix(hex, 16).map_err(|e| format!("--guid {v}: {e}"))?);
            }
            "--index" => {
                let v = val()?;
                a.index = v.parse().map_err(|e| format!("--index {v}: {e}"))?;
            }
            "--link" => {
                a.link_up = match val()?.as_str() {
                    "up" => true,
                    "down" => false,
                    v => return Err(format!("--link wants up or down, not {v}")),
                }
            }
            "--log" => a.log = Some(PathBuf::from(val()?)),
            "--log-level" => {
                let v = val()?;
                a.level = v
                    .parse()
                    .map_err(|_| format!("--log-level {v}: not a level"))?;
            }
            "--inject" => a.fault = Some(val()?.parse()?),
            "--attr" => a.attrs.push(parse_attr(&val()?)?),
            "--ready-fd" => {
                let v = val()?;
                a.ready_fd = Some(v.parse().map_err(|e| format!("--ready-fd {v}: {e}"))?);
            }
            _ => return Err(format!("unknown option {opt}")),
        }
    }
    if a.socket.as_os_str().is_empty() {
        return Err("--socket is required".into());
    }
    Ok(Some(a))
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ordma-model: {e} (see --help)");
            return ExitCode::from(2);
        }
    };
    let sub = tracing_subscriber::fmt()
        .with_max_level(args.level)
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
    config.link_up = args.link_up;
    // CAST: LIDs are 16-bit; --index is at most a few NICs.
    config.lid = (args.index + 1) as u16;
    config.fault = args.fault;
    for (name, n) in &args.attrs {
        if let Err(e) = set_attr(&mut config.attrs, name, *n) {
            eprintln!("ordma-model: {e} (see --help)");
            return ExitCode::from(2);
        }
    }
    info!(nic = args.index, guid = format_args!("{guid:016x}"), socket = %args.socket.display(), "starting");

    let server =
        match vfio_user::Server::new(&args.socket, true, Backend::irqs(), Backend::regions()) {
            Ok(s) => s,
            Err(e) => {
                error!(%e, "cannot listen");
                eprintln!(
                    "ordma-model: cannot listen on {}: {e}",
                    args.socket.display()
                );
                return ExitCode::FAILURE;
            }
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
    let mut backend = Backend::new(Nic::new(config));
    match server.run(&mut backend) {
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
