//! The control channel end to end: a listener on a real Unix socket over a shared device,
//! driven by the library's client and by the `ordma-model ctl` binary.

mod common;

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use ordma_hw as hw;
use ordma_model::control::{execute, parse, request, Listener};
use ordma_model::device::Device;
use ordma_model::engine::{Nic, NicConfig};
use ordma_model::mem::{anonymous, Dma, GuestRam};

const SQ: u64 = 0x10_0000;
const CQ: u64 = 0x20_0000;
const EQ: u64 = 0x30_0000;

fn sock(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("ordma-ctl-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// An eventfd as a `File`.
fn eventfd() -> File {
    // SAFETY: eventfd has no memory-safety preconditions; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd");
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    unsafe { File::from_raw_fd(fd) }
}

/// An enabled NIC with its event queue armed and MSI-X vector 1 on an eventfd.
fn device() -> (Arc<Device>, File) {
    let mem = anonymous(&[(SQ, 0x1_0000), (CQ, 0x1_0000), (EQ, 0x1_0000)]).unwrap();
    let dev = Arc::new(Device::new(
        Nic::new(NicConfig::with_guid(7)),
        GuestRam::new(mem),
    ));
    let efd = eventfd();
    assert!(dev.msix.set(
        usize::from(hw::VECTOR_EVENT),
        usize::from(hw::NUM_VECTORS),
        Some(efd.try_clone().unwrap())
    ));
    let mut l = dev.lock();
    l.nic.set_bus_master(true, &*l.mem, l.irq);
    for (reg, v) in [
        (hw::REG_AQ_SQ_BASE, SQ as u32),
        (hw::REG_AQ_CQ_BASE, CQ as u32),
        (hw::REG_EQ_BASE, EQ as u32),
        (hw::REG_AQ_LOG_DEPTH, 3),
        (hw::REG_EQ_LOG_DEPTH, 3),
        (hw::REG_CONTROL, hw::CONTROL_ENABLE),
        (hw::REG_EQ_DB, 1 | hw::EQ_DB_ARM), // PORT_ACTIVE consumed, armed
    ] {
        l.nic.bar0_write(reg as u64, 4, v, &*l.mem, l.irq);
    }
    drop(l);
    (dev, efd)
}

fn event(dev: &Device, index: u64) -> hw::Event {
    let mut b = [0u8; hw::EQE_SIZE];
    dev.mem
        .snapshot()
        .dma_read(EQ + index * hw::EQE_SIZE as u64, &mut b)
        .unwrap();
    hw::Event::decode(&b)
}

fn interrupts(efd: &mut File) -> u64 {
    let mut b = [0u8; 8];
    match efd.read(&mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        _ => 0,
    }
}

#[test]
fn link_fatal_status_and_bad_requests_over_the_socket() {
    let (dev, mut efd) = device();
    let path = sock("lib");
    let listener = Listener::spawn(&path, Arc::clone(&dev)).unwrap();

    let status = request(&path, "status").unwrap();
    assert!(
        status.starts_with("ok link=up enabled=1 fatal=0"),
        "{status}"
    );
    assert!(status.contains(" pds=0 mrs=0 cqs=0 qps=0 "), "{status}");
    // The PORT_ACTIVE of the enable, consumed.
    assert!(
        status.contains(" events=1 events_coalesced=0 events_unread=0 "),
        "{status}"
    );
    assert!(status.contains(" foreign_doorbells=0"), "{status}");
    assert!(status.contains(" bad_doorbells=0"), "{status}");

    // link down: the event the NIC's own link change posts, with its interrupt.
    assert_eq!(request(&path, "link down").unwrap(), "ok");
    let e = event(&dev, 1);
    assert_eq!((e.kind, e.data, e.phase), (hw::EVENT_PORT_DOWN, 1, true));
    assert_eq!(interrupts(&mut efd), 1);
    assert!(request(&path, "status")
        .unwrap()
        .starts_with("ok link=down "));
    // Again: no change, no event.
    assert_eq!(request(&path, "link down").unwrap(), "ok");
    assert!(!event(&dev, 2).phase);
    dev.lock().nic.bar0_write(
        hw::REG_EQ_DB as u64,
        4,
        2 | hw::EQ_DB_ARM,
        &*dev.mem.snapshot(),
        &dev.msix,
    );
    assert_eq!(request(&path, "link up").unwrap(), "ok");
    assert_eq!(event(&dev, 2).kind, hw::EVENT_PORT_ACTIVE);
    assert_eq!(interrupts(&mut efd), 1);

    // Bad requests: an error line, nothing changes.
    for bad in ["", "bogus", "link sideways", "fatal 0", "inject nonsense"] {
        let r = request(&path, bad).unwrap();
        assert!(r.starts_with("error: "), "{bad:?} -> {r}");
    }

    // fatal CODE: STATUS.FATAL, ERROR = CODE, EVENT_FATAL.
    dev.lock().nic.bar0_write(
        hw::REG_EQ_DB as u64,
        4,
        3 | hw::EQ_DB_ARM,
        &*dev.mem.snapshot(),
        &dev.msix,
    );
    assert_eq!(request(&path, "fatal 9").unwrap(), "ok");
    let e = event(&dev, 3);
    assert_eq!((e.kind, e.data), (hw::EVENT_FATAL, 9));
    assert_eq!(interrupts(&mut efd), 1);
    {
        let mut l = dev.lock();
        assert_eq!(l.nic.bar0_read(hw::REG_ERROR as u64, 4), 9);
        assert_ne!(l.nic.status() & hw::STATUS_FATAL, 0);
    }
    let status = request(&path, "status").unwrap();
    assert!(status.contains(" fatal=1 error=9 "), "{status}");
    // PORT_ACTIVE, PORT_DOWN, PORT_ACTIVE, FATAL: the unchanged link posted none; the
    // consumer index written was 3.
    assert!(
        status.contains(" events=4 events_coalesced=0 events_unread=1 "),
        "{status}"
    );
    assert!(request(&path, "fatal").unwrap().starts_with("error: "));

    // inject: armed at run time.
    assert_eq!(request(&path, "inject bad-version").unwrap(), "ok");
    assert_eq!(dev.lock().nic.bar0_read(hw::REG_VERSION as u64, 4), 2 << 16);
    assert_eq!(request(&path, "inject none").unwrap(), "ok");
    assert_eq!(
        dev.lock().nic.bar0_read(hw::REG_VERSION as u64, 4),
        hw::VERSION
    );

    drop(listener);
    assert!(!path.exists(), "the socket is removed");
}

#[test]
fn the_ctl_client_prints_the_reply_and_exits_by_it() {
    let (dev, _efd) = device();
    let path = sock("bin");
    let _listener = Listener::spawn(&path, dev).unwrap();
    let ctl = |words: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ordma-model"))
            .arg("ctl")
            .arg("--control")
            .arg(&path)
            .args(words)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        )
    };
    let (rc, out) = ctl(&["status"]);
    assert_eq!(rc, Some(0), "{out}");
    assert!(out.starts_with("ok link=up "), "{out}");
    assert_eq!(ctl(&["link", "down"]), (Some(0), "ok".to_string()));
    let (rc, out) = ctl(&["frobnicate"]);
    assert_eq!(rc, Some(1));
    assert!(
        out.starts_with("error: unknown request frobnicate"),
        "{out}"
    );
    // No model listening: error, status 1.
    let (rc, out) = {
        let out = Command::new(env!("CARGO_BIN_EXE_ordma-model"))
            .args(["ctl", "--control", "/nonexistent/ordma.ctl", "status"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    assert_eq!(rc, Some(1));
    assert!(out.starts_with("error: "), "{out}");
}

/// `mr KEY`: the MR as the NIC holds it, from the rig's small MR (64 pages of 4 KiB, one
/// level); an error for a key no MR has.
#[test]
fn mr_shows_the_nics_view_of_an_mr() {
    let mut rig = common::rig::Rig::bare(1);
    let (key, pdn) = (rig.small, rig.pdn);
    let nic = std::mem::replace(&mut rig.nic, Nic::new(NicConfig::with_guid(0)));
    let dev = Device::new(nic, GuestRam::new(rig.mem.clone()));
    let all = hw::ACCESS_LOCAL_WRITE
        | hw::ACCESS_REMOTE_WRITE
        | hw::ACCESS_REMOTE_READ
        | hw::ACCESS_REMOTE_ATOMIC;
    assert_eq!(
        execute(&dev, parse(&format!("mr {key:#x}")).unwrap()),
        format!(
            "ok pdn={pdn} access={all} iova=0x200000000 length=262144 npages=64 page_shift=12 \
             levels=1"
        )
    );
    let r = execute(&dev, parse(&format!("mr {}", key + 1)).unwrap());
    assert!(r.starts_with("error: no MR with key"), "{r}");
    for bad in ["mr", "mr 1 2", "mr key", "doorbell-pages 1"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

/// `doorbell-pages`: every page written, with its count, accepted or not; a reset keeps
/// them; writes outside BAR2 count nowhere.
#[test]
fn doorbell_pages_counts_the_writes_per_page() {
    let mut rig = common::rig::Rig::bare(1);
    let cqn = rig.scq.cqn;
    rig.db(hw::DB_CQ_ARM, hw::db_value(cqn, 0));
    for (off, v) in [(5 * 4096 + 0x10, 1), (5 * 4096, 2), (63 * 4096, 3)] {
        rig.nic.doorbell_write(off, 4, v, &rig.mem, &rig.irq);
    }
    rig.nic
        .doorbell_write(hw::BAR2_SIZE as u64, 4, 0, &rig.mem, &rig.irq);
    rig.w(hw::REG_CONTROL, hw::CONTROL_RESET);
    let nic = std::mem::replace(&mut rig.nic, Nic::new(NicConfig::with_guid(0)));
    let dev = Device::new(nic, GuestRam::new(rig.mem.clone()));
    let r = execute(&dev, parse("doorbell-pages").unwrap());
    assert_eq!(r, format!("ok {}=1 5=2 63=1", common::rig::PAGE));
}

/// `die` over the socket: the NIC answers BAR0 reads with all ones and forgets everything
/// while the model lives on; requests to a dead NIC fail; configuration space still
/// answers, with the PM capability whose D3hot -> D0 is the guest's function reset, which
/// revives it (D0 -> D0, D1 and D3hot alone do not); QEMU's `DEVICE_RESET` revives it too.
#[test]
fn die_and_the_function_resets_that_revive() {
    use ordma_model::server::Backend;
    use vfio_bindings::bindings::vfio::{VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX};
    use vfio_user::ServerBackend;

    const PMCSR: u64 = 0x54;
    let (dev, mut efd) = device();
    let path = sock("die");
    let _listener = Listener::spawn(&path, Arc::clone(&dev)).unwrap();
    let mut b = Backend::new(Arc::clone(&dev));
    let cfg = |b: &mut Backend, off: u64| {
        let mut d = [0u8; 2];
        b.region_read(VFIO_PCI_CONFIG_REGION_INDEX, off, &mut d)
            .unwrap();
        u16::from_le_bytes(d)
    };
    let bar0 = |b: &mut Backend, reg: usize| {
        let mut d = [0u8; 4];
        b.region_read(VFIO_PCI_BAR0_REGION_INDEX, reg as u64, &mut d)
            .unwrap();
        u32::from_le_bytes(d)
    };
    let set = |b: &mut Backend, off: u64, v: u16| {
        b.region_write(VFIO_PCI_CONFIG_REGION_INDEX, off, &v.to_le_bytes())
            .unwrap();
    };
    // The driver's view: memory space and bus mastering on.
    set(&mut b, 0x04, 0x0006);
    assert_eq!(bar0(&mut b, hw::REG_VERSION), hw::VERSION);
    // The capabilities: MSI-X at 0x40, then power management at 0x50 (PMC version 3, no
    // D1, D2 or PME), PMCSR D0 with No_Soft_Reset clear.
    assert_eq!(cfg(&mut b, 0x34) & 0xff, 0x40);
    assert_eq!(cfg(&mut b, 0x40), 0x5011);
    assert_eq!((cfg(&mut b, 0x50), cfg(&mut b, 0x52)), (0x0001, 0x0003));
    assert_eq!(cfg(&mut b, PMCSR), 0);

    assert_eq!(request(&path, "die").unwrap(), "ok");
    let status = request(&path, "status").unwrap();
    assert!(
        status.starts_with("ok link=up enabled=0 fatal=0 error=0 dead=1 bme=1 pds=0 "),
        "{status}"
    );
    for reg in [hw::REG_VERSION, hw::REG_STATUS, hw::REG_ERROR] {
        assert_eq!(bar0(&mut b, reg), u32::MAX);
    }
    assert_eq!(interrupts(&mut efd), 0);
    for (req, reply) in [
        ("die", "error: the NIC is dead already"),
        ("die fatal", "error: the NIC is dead already"),
        ("fatal", "error: the NIC is dead"),
        ("event 1 1", "error: the NIC is dead"),
        ("link down", "ok"),
        ("inject admin-stuck until-reset", "ok"),
    ] {
        assert_eq!(request(&path, req).unwrap(), reply, "{req}");
    }
    assert_eq!(interrupts(&mut efd), 0, "no event, no interrupt");

    // PMCSR written with D0 kept (as Linux clears PME status), or asking for D1, which
    // the function does not offer: no reset.
    set(&mut b, PMCSR, 0x8000);
    set(&mut b, PMCSR, 0x0001);
    assert_eq!(cfg(&mut b, PMCSR), 0);
    assert!(dev.lock().nic.is_dead());
    // D3hot is only half of it.
    set(&mut b, PMCSR, 0x0003);
    assert_eq!(cfg(&mut b, PMCSR), 3);
    assert!(dev.lock().nic.is_dead());
    // Back to D0: the function resets. Configuration space is at its power-on values (bus
    // mastering off), the NIC alive in its power-on state; the link as it was set.
    set(&mut b, PMCSR, 0x0000);
    assert_eq!(cfg(&mut b, 0x04), 0);
    assert_eq!(bar0(&mut b, hw::REG_VERSION), hw::VERSION);
    assert_eq!(bar0(&mut b, hw::REG_STATUS), hw::STATUS_READY);
    let status = request(&path, "status").unwrap();
    assert!(
        status.starts_with("ok link=down enabled=0 fatal=0 error=0 dead=0 bme=0 pds=0 "),
        "{status}"
    );

    // QEMU's DEVICE_RESET is a function reset too.
    assert_eq!(request(&path, "die").unwrap(), "ok");
    set(&mut b, 0x04, 0x0006);
    b.reset().unwrap();
    assert_eq!(cfg(&mut b, 0x04), 0);
    assert_eq!(bar0(&mut b, hw::REG_VERSION), hw::VERSION);
    assert!(request(&path, "status").unwrap().contains(" dead=0 bme=0 "));
}

/// `die fatal` over the socket: the fatal error reaches the driver (`EVENT_FATAL` with its
/// interrupt), the NIC forgets its objects, its registers answer, and a NIC reset revives.
#[test]
fn die_fatal_over_the_socket() {
    let (dev, mut efd) = device();
    let path = sock("die-fatal");
    let _listener = Listener::spawn(&path, Arc::clone(&dev)).unwrap();
    assert_eq!(request(&path, "die fatal").unwrap(), "ok");
    let e = event(&dev, 1);
    assert_eq!((e.kind, e.data), (hw::EVENT_FATAL, hw::ERR_INTERNAL));
    assert_eq!(interrupts(&mut efd), 1);
    let status = request(&path, "status").unwrap();
    assert!(
        status.starts_with("ok link=up enabled=0 fatal=1 error=5 dead=0 bme=1 pds=0 "),
        "{status}"
    );
    assert!(status.contains(" commands=0 events=0 "), "{status}");
    assert!(request(&path, "die fatal")
        .unwrap()
        .starts_with("error: the NIC is fatal"));
    let mut l = dev.lock();
    assert_eq!(l.nic.bar0_read(hw::REG_VERSION as u64, 4), hw::VERSION);
    l.nic.bar0_write(
        hw::REG_CONTROL as u64,
        4,
        hw::CONTROL_RESET,
        &*dev.mem.snapshot(),
        &dev.msix,
    );
    assert_eq!(l.nic.status(), hw::STATUS_READY);
}
