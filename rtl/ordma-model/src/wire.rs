//! The wire between model processes: one Unix datagram socket per NIC, named by its MAC.
//!
//! Every NIC of a run gets the same directory (`--wire DIR`): the L2 segment. The NIC with
//! MAC `M` binds `DIR/M.sock` ([`socket_path`]: `02-6f-72-64-00-01.sock`), and frames for
//! `M` are datagrams sent to that path; a broadcast or multicast frame goes to every other
//! socket in the directory. An InfiniBand port's MAC is derived from its LID
//! ([`crate::engine::port::lid_mac`]), an Ethernet port's is its own. More NICs are more
//! sockets in the directory, and anything that binds `DIR/<its MAC>.sock` and speaks
//! Ethernet frames is on the segment.
//!
//! An Ethernet port also carries its host's traffic: with `--netdev`, the NIC binds a
//! second socket that a QEMU `dgram` netdev (the guest's virtio-net device with the
//! port's MAC) sends its frames to ([`attach_netdev`]). The host's frames go onto the
//! segment as they are; a frame from the segment that is not the RDMA engine's (not
//! RoCEv2 to one of the port's GIDs: ARP, ICMP, TCP) goes to the netdev
//! ([`crate::engine::remote::Steer::Host`]).
//!
//! Sending happens under the NIC lock: the frames an action sends to one peer are gathered
//! and leave together when the action ends ([`Wire::flush`], called as the lock is
//! released), as one datagram of several frames ([`crate::engine::wire::Batch`]: at most
//! [`MAX_BATCH`] bytes, or [`SMALL_BATCH`] where the kernel's send buffer is too small for
//! that) or a single frame as it is. Each peer has its own socket,
//! connected to its path once (no path lookup per datagram). A send waits at most a short
//! timeout for room: a datagram that cannot go is lost, as frames on a wire, and the
//! requester's retries recover.
//!
//! Two threads take datagrams in: a reader drains the socket into a bounded queue without
//! the NIC lock (so a peer sending a burst never waits for our lock), a worker hands each
//! datagram's frames to [`crate::engine::Nic::receive_datagram`] under the device lock,
//! several datagrams per lock when they queue up.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tracing::{debug, warn};

use crate::device::Device;
use crate::engine::wire::{self, Batch, Impairment, Wire, MAX_BATCH, MAX_FRAME};
use crate::pcap::Pcap;

/// Datagrams held between the reader and the worker; more are dropped.
const QUEUE: usize = 256;
/// Datagrams the worker takes under one lock at most.
const DRAIN: usize = 16;
/// How long a send may wait for room in the peer's socket.
const SEND_TIMEOUT: Duration = Duration::from_millis(20);
/// The send buffer asked for on each peer's socket: room for several full batches in
/// the receiver's queue. The kernel may give less (`net.core.wmem_max`): a batch too big
/// for it goes as batches of [`SMALL_BATCH`], and so do the peer's later ones.
const SNDBUF: usize = 4 << 20;
/// The batch size when the kernel refused a [`MAX_BATCH`] one (fits in the default
/// 208 KiB send buffer).
pub const SMALL_BATCH: usize = 32 << 10;

/// The path of the socket of the port with MAC `mac` in `dir`.
pub fn socket_path(dir: &Path, mac: [u8; 6]) -> PathBuf {
    let [a, b, c, d, e, f] = mac;
    dir.join(format!(
        "{a:02x}-{b:02x}-{c:02x}-{d:02x}-{e:02x}-{f:02x}.sock"
    ))
}

/// The most peers a port keeps a socket and a batch for. Ports on one segment are a
/// handful; the bound is for a user whose UD datagrams name random MACs: they cost a
/// table of this size, not one entry each, nor a walk of every one at each flush.
pub const MAX_PEERS: usize = 64;

/// Whether `mac` is a group (broadcast or multicast) address.
fn is_group(mac: [u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// One peer: its connected socket (once it could connect), the frames held for it and
/// the largest batch its socket takes.
struct Peer {
    sock: Option<UnixDatagram>,
    batch: Batch,
    limit: usize,
    /// A frame held back to be reordered ([`Impairment::Reorder`]), and whether a frame
    /// went out behind it.
    held: Option<(Vec<u8>, bool)>,
}

impl Peer {
    /// Whether `frame` goes in the held batch (else the batch is sent first).
    fn fits(&self, frame: &[u8]) -> bool {
        self.batch.fits(frame) && self.batch.bytes().max(4) + 2 + frame.len() <= self.limit
    }

    /// Sends the held frames as one datagram (as batches of [`SMALL_BATCH`] if the kernel
    /// refuses the batch's size) and empties the batch; a failure loses them.
    fn flush(&mut self, dir: &Path, dmac: [u8; 6], sndbuf: usize, faults: &Mutex<Faults>) {
        if let Some((f, overtaken)) = self.held.take() {
            if overtaken {
                faults
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .count(Impairment::Reorder);
            }
            if !self.fits(&f) {
                self.flush(dir, dmac, sndbuf, faults);
            }
            self.batch.push(&f);
        }
        if self.batch.is_empty() {
            return;
        }
        if self.sock.is_none() {
            self.sock = connect(dir, dmac, sndbuf);
        }
        if let Some(s) = &self.sock {
            match s.send(self.batch.datagram()) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    debug!(
                        ?dmac,
                        bytes = self.batch.bytes(),
                        "batch too big: smaller ones"
                    );
                    self.limit = SMALL_BATCH;
                    let mut small = Batch::default();
                    for f in self.batch.frames().flatten() {
                        if small.bytes().max(4) + 2 + f.len() > SMALL_BATCH {
                            send_or_lose(s, &small, dmac);
                            small.clear();
                        }
                        small.push(f);
                    }
                    send_or_lose(s, &small, dmac);
                }
                Err(e) => {
                    debug!(?dmac, %e, frames = self.batch.len(), "datagram not sent: lost");
                    if e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::TimedOut
                    {
                        // The peer went away (or was replaced): connect again next time.
                        self.sock = None;
                    }
                }
            }
        }
        self.batch.clear();
    }
}

/// Sends `batch` on `s` (nothing if it is empty); a failure loses it.
fn send_or_lose(s: &UnixDatagram, batch: &Batch, dmac: [u8; 6]) {
    if !batch.is_empty() {
        if let Err(e) = s.send(batch.datagram()) {
            debug!(?dmac, %e, frames = batch.len(), "datagram not sent: lost");
        }
    }
}

/// A socket connected to the path of MAC `dmac`, with the send timeout and a send buffer
/// of `sndbuf` bytes asked for; `None` (logged) if the peer is not there.
fn connect(dir: &Path, dmac: [u8; 6], sndbuf: usize) -> Option<UnixDatagram> {
    let path = socket_path(dir, dmac);
    let s = UnixDatagram::unbound()
        .and_then(|s| {
            s.set_write_timeout(Some(SEND_TIMEOUT))?;
            s.connect(&path)?;
            Ok(s)
        })
        .map_err(|e| debug!(?dmac, %e, "no peer at {}: frames lost", path.display()))
        .ok()?;
    let size = libc::c_int::try_from(sndbuf).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket descriptor and a c_int option value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            std::ptr::from_ref(&size).cast(),
            // CAST: size_of::<c_int>() is 4.
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        debug!(?dmac, "SO_SNDBUF not raised: big batches go frame by frame");
    }
    Some(s)
}

/// The sending side: frames for MAC `M` go to `DIR/M.sock`, gathered per peer until
/// [`Wire::flush`]; group frames to every other socket in `DIR`, at once.
pub struct SocketWire {
    dir: PathBuf,
    own: PathBuf,
    /// At most [`MAX_PEERS`]: a user's UD WQE carries any destination MAC.
    peers: Mutex<HashMap<[u8; 6], Peer>>,
    /// Peers dropped to make room for a new one ([`SocketWire::peer`]).
    peers_evicted: AtomicU64,
    sndbuf: usize,
    pcap: Option<Arc<Pcap>>,
    faults: Mutex<Faults>,
    /// The NIC died softly ([`Wire::silence`]): nothing crosses the port.
    silent: AtomicBool,
}

/// The link's failures on request ([`Wire::impair`]): each kind's probability, what each
/// did, and the generator that decides (xorshift64*, seeded from the port's MAC: a run
/// repeats).
#[derive(Debug)]
struct Faults {
    p: [f64; 4],
    n: [u64; 4],
    rng: u64,
}

/// What happens to one frame.
#[derive(Clone, Copy, Debug, Default)]
struct Fate {
    lost: bool,
    duplicated: bool,
    held: bool,
    /// Where one bit is flipped.
    corrupt: Option<usize>,
}

impl Faults {
    fn new(mac: [u8; 6]) -> Self {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for b in mac {
            seed = (seed ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Self {
            p: [0.0; 4],
            n: [0; 4],
            rng: seed | 1,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Whether an event of probability `p` happens.
    fn happens(&mut self, p: f64) -> bool {
        // CAST: 53 random bits as a fraction of 1.
        p > 0.0 && ((self.next() >> 11) as f64) / ((1u64 << 53) as f64) < p
    }

    fn count(&mut self, kind: Impairment) {
        if let Some(n) = self.n.get_mut(kind as usize) {
            *n += 1;
        }
    }

    /// The fate of a frame of `len` bytes (counted, but for reordering: counted when a
    /// frame overtakes it).
    fn fate(&mut self, len: usize) -> Fate {
        let mut f = Fate::default();
        if self.p == [0.0; 4] {
            return f;
        }
        let [loss, dup, reorder, corrupt] = self.p;
        if self.happens(loss) {
            self.count(Impairment::Loss);
            f.lost = true;
            return f;
        }
        if self.happens(corrupt) && len > 14 {
            self.count(Impairment::Corrupt);
            // CAST: a frame's length fits 64 bits.
            f.corrupt = Some(14 + (self.next() % (len as u64 - 14)) as usize);
        }
        if self.happens(dup) {
            self.count(Impairment::Duplicate);
            f.duplicated = true;
        }
        f.held = self.happens(reorder);
        f
    }
}

impl SocketWire {
    /// Binds the socket of MAC `mac` in `dir` (replacing a stale one): the sending side,
    /// and the socket frames for `mac` arrive on.
    ///
    /// # Errors
    ///
    /// The socket could not be bound or set up.
    pub fn bind(dir: &Path, mac: [u8; 6]) -> std::io::Result<(Self, UnixDatagram)> {
        let path = socket_path(dir, mac);
        let sock = bind_fresh(&path)?;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                own: path,
                peers: Mutex::default(),
                peers_evicted: AtomicU64::new(0),
                sndbuf: SNDBUF,
                pcap: None,
                faults: Mutex::new(Faults::new(mac)),
                silent: AtomicBool::new(false),
            },
            sock,
        ))
    }

    /// Asks for `bytes` of send buffer on the sockets to peers connected from now on (the
    /// tests: a buffer too small for a whole batch).
    pub fn set_send_buffer(&mut self, bytes: usize) {
        self.sndbuf = bytes;
    }

    /// Records every frame sent from now on in `pcap`.
    pub fn set_capture(&mut self, pcap: Arc<Pcap>) {
        self.pcap = Some(pcap);
    }

    /// Sends group frame `frame` to every other socket in the directory, now.
    fn broadcast(&self, frame: &[u8]) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let Ok(s) = UnixDatagram::unbound() else {
            return;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_some_and(|x| x == "sock") && path != self.own {
                if let Err(e) = s.send_to(frame, &path) {
                    debug!(%e, path = %path.display(), "group frame not sent");
                }
            }
        }
    }

    /// Sends `frame` to `dmac` now, after the frames held for it (the host's frames: they
    /// do not wait for an action of the NIC to end).
    pub fn send_now(&self, dmac: [u8; 6], frame: &[u8]) {
        if self.silent.load(Ordering::Acquire) {
            debug!("the NIC is dead: a frame of the host's dropped");
            return;
        }
        if let Some(p) = &self.pcap {
            p.frame(frame);
        }
        if is_group(dmac) {
            return self.broadcast(frame);
        }
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let peer = self.peer(&mut peers, dmac);
        self.transmit(peer, dmac, frame);
        peer.flush(&self.dir, dmac, self.sndbuf, &self.faults);
    }

    /// The peer for `dmac`, made if new. The table is bounded ([`MAX_PEERS`]): a new peer
    /// in a full table first takes the place of one with nothing held (its socket closed,
    /// counted in `peers_evicted`); if every one holds frames, they go out first.
    fn peer<'a>(&self, peers: &'a mut HashMap<[u8; 6], Peer>, dmac: [u8; 6]) -> &'a mut Peer {
        if !peers.contains_key(&dmac) && peers.len() >= MAX_PEERS {
            let idle = peers
                .iter()
                .find(|(_, p)| p.batch.is_empty() && p.held.is_none())
                .map(|(&m, _)| m);
            let victim = idle.or_else(|| {
                for (&m, p) in peers.iter_mut() {
                    p.flush(&self.dir, m, self.sndbuf, &self.faults);
                }
                peers.keys().next().copied()
            });
            if let Some(m) = victim {
                peers.remove(&m);
                self.peers_evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        peers.entry(dmac).or_insert_with(Peer::new)
    }

    /// Puts `frame` in `peer`'s batch as the link's failures decide (lost, corrupted,
    /// twice, held back behind the next frames).
    fn transmit(&self, peer: &mut Peer, dmac: [u8; 6], frame: &[u8]) {
        let fate = self
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fate(frame.len());
        if fate.lost {
            return;
        }
        let mut bad;
        let frame = match fate.corrupt {
            Some(at) => {
                bad = frame.to_vec();
                if let Some(b) = bad.get_mut(at) {
                    *b ^= 0x10;
                }
                &bad[..]
            }
            None => frame,
        };
        if fate.held && peer.held.is_none() {
            peer.held = Some((frame.to_vec(), false));
            return;
        }
        for _ in 0..1 + usize::from(fate.duplicated) {
            if !peer.fits(frame) {
                peer.flush(&self.dir, dmac, self.sndbuf, &self.faults);
            }
            if !peer.batch.push(frame) {
                debug!(
                    ?dmac,
                    len = frame.len(),
                    "frame too long for the wire: lost"
                );
            }
        }
        if let Some((_, overtaken)) = peer.held.as_mut() {
            *overtaken = true;
        }
    }
}

impl Peer {
    fn new() -> Self {
        Self {
            sock: None,
            batch: Batch::default(),
            limit: MAX_BATCH,
            held: None,
        }
    }
}

/// Binds a datagram socket at `path`, replacing a stale one.
fn bind_fresh(path: &Path) -> std::io::Result<UnixDatagram> {
    match std::fs::remove_file(path) {
        Ok(()) => debug!(path = %path.display(), "stale socket removed"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    UnixDatagram::bind(path)
}

impl Wire for SocketWire {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        if self.silent.load(Ordering::Acquire) {
            return;
        }
        if let Some(p) = &self.pcap {
            p.frame(frame);
        }
        if is_group(dmac) {
            return self.broadcast(frame);
        }
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let peer = self.peer(&mut peers, dmac);
        self.transmit(peer, dmac, frame);
    }

    fn flush(&self) {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        for (&dmac, peer) in peers.iter_mut() {
            peer.flush(&self.dir, dmac, self.sndbuf, &self.faults);
        }
    }

    fn impair(&self, kind: Impairment, p: f64) -> Result<(), String> {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!(
                "{}: {p} is not a probability (0 to 1)",
                kind.name()
            ));
        }
        let mut f = self.faults.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(x) = f.p.get_mut(kind as usize) {
            *x = p;
        }
        Ok(())
    }

    fn silence(&self, on: bool) {
        self.silent.store(on, Ordering::Release);
    }

    fn forget_peers(&self) {
        self.peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.peers_evicted.store(0, Ordering::Relaxed);
    }

    fn impairments(&self) -> String {
        // Lock order: the peers, then the faults (as `send`); one at a time here.
        let [lost, duplicated, reordered, corrupted] =
            self.faults.lock().unwrap_or_else(PoisonError::into_inner).n;
        let peers = self
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let evicted = self.peers_evicted.load(Ordering::Relaxed);
        format!(
            " wire_lost={lost} wire_duplicated={duplicated} wire_reordered={reordered} \
             wire_corrupted={corrupted} wire_peers={peers} wire_peers_evicted={evicted}"
        )
    }
}

/// The wire as the NIC holds it: the socket layer, shared with the netdev's thread.
struct Shared(Arc<SocketWire>);

impl Wire for Shared {
    fn send(&self, dmac: [u8; 6], frame: &[u8]) {
        self.0.send(dmac, frame);
    }

    fn flush(&self) {
        self.0.flush();
    }

    fn impair(&self, kind: Impairment, p: f64) -> Result<(), String> {
        self.0.impair(kind, p)
    }

    fn impairments(&self) -> String {
        self.0.impairments()
    }

    fn silence(&self, on: bool) {
        self.0.silence(on);
    }

    fn forget_peers(&self) {
        self.0.forget_peers();
    }
}

/// Where the frames from the segment that are the host's go: the netdev's peer (QEMU's
/// socket), once it is there.
struct Netdev {
    sock: UnixDatagram,
    peer: PathBuf,
}

impl Netdev {
    fn send(&self, frame: &[u8]) {
        if let Err(e) = self.sock.send_to(frame, &self.peer) {
            debug!(%e, "frame for the netdev lost");
        }
    }
}

/// What a port has besides its socket on the wire.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras<'a> {
    /// This NIC's socket for its netdev, and the netdev's own socket: the host's frames
    /// are exchanged with it ([`attach_netdev`]).
    pub netdev: Option<(&'a Path, &'a Path)>,
    /// A capture of every frame the port sends and receives ([`Pcap`]).
    pub pcap: Option<&'a Path>,
}

/// Binds the socket of MAC `mac` in `dir` (replacing a stale one), connects `dev`'s NIC
/// to the wire and starts the threads that take frames in; they end when the device is
/// dropped (the worker) or the process ends (the reader).
///
/// # Errors
///
/// A socket or the capture file could not be made, or the threads not started.
pub fn attach(
    dev: &Arc<Device>,
    dir: &Path,
    mac: [u8; 6],
    extras: Extras<'_>,
) -> std::io::Result<()> {
    let (mut wire, sock) = SocketWire::bind(dir, mac)?;
    let pcap = match extras.pcap {
        Some(path) => Some(Arc::new(Pcap::create(path)?)),
        None => None,
    };
    if let Some(p) = &pcap {
        wire.set_capture(Arc::clone(p));
    }
    let netdev = extras.netdev;
    let wire = Arc::new(wire);
    dev.lock()
        .nic
        .set_wire(Some(Box::new(Shared(Arc::clone(&wire)))));
    let host = match netdev {
        Some((own, peer)) => Some(attach_netdev(&wire, own, peer)?),
        None => None,
    };
    let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
    spawn_reader("ordma-wire-rx", sock, tx)?;
    let weak = Arc::downgrade(dev);
    std::thread::Builder::new()
        .name("ordma-wire".into())
        .spawn(move || work(&weak, &rx, host.as_ref(), pcap.as_deref()))?;
    Ok(())
}

/// A thread that drains `sock` into `tx` (dropping what does not fit) until it fails.
fn spawn_reader(
    name: &str,
    sock: UnixDatagram,
    tx: std::sync::mpsc::SyncSender<Vec<u8>>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let mut buf = vec![0u8; MAX_BATCH.max(MAX_FRAME) + 64];
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let datagram = buf.get(..n).unwrap_or_default().to_vec();
                        if tx.try_send(datagram).is_err() {
                            debug!("wire queue full: datagram dropped");
                        }
                    }
                    Err(e) => {
                        warn!(%e, "wire socket receive failed; the wire stops");
                        return;
                    }
                }
            }
        })?;
    Ok(())
}

/// Binds `own` (the netdev's frames arrive there: QEMU's `dgram` netdev sends to it) and
/// starts the thread that puts them on the segment; the frames for the netdev go to
/// `peer` (QEMU's socket).
fn attach_netdev(wire: &Arc<SocketWire>, own: &Path, peer: &Path) -> std::io::Result<Netdev> {
    let sock = bind_fresh(own)?;
    let rx = sock.try_clone()?;
    let wire = Arc::clone(wire);
    std::thread::Builder::new()
        .name("ordma-netdev".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match rx.recv(&mut buf) {
                    Ok(n) => {
                        let frame = buf.get(..n).unwrap_or_default();
                        let mut dmac = [0u8; 6];
                        match frame.get(..6) {
                            Some(d) if n > 14 => dmac.copy_from_slice(d),
                            _ => continue,
                        }
                        wire.send_now(dmac, frame);
                    }
                    Err(e) => {
                        warn!(%e, "netdev socket receive failed; the host's frames stop");
                        return;
                    }
                }
            }
        })?;
    Ok(Netdev {
        sock,
        peer: peer.to_path_buf(),
    })
}

/// Hands every datagram's frames to the NIC, under the lock (up to [`DRAIN`] datagrams
/// that queued up per lock, each one's answers sent as it is done), until the device or
/// the reader is gone.
fn work(dev: &Weak<Device>, rx: &Receiver<Vec<u8>>, netdev: Option<&Netdev>, pcap: Option<&Pcap>) {
    let mut host: Vec<Vec<u8>> = Vec::new();
    let capture = |d: &[u8]| {
        if let Some(p) = pcap {
            for f in wire::frames(d).flatten() {
                p.frame(f);
            }
        }
    };
    while let Ok(first) = rx.recv() {
        capture(&first);
        let Some(dev) = dev.upgrade() else {
            return;
        };
        {
            let mut l = dev.lock();
            let h = l.nic.receive_datagram(&first, &*l.mem, l.irq);
            host.extend(h.into_iter().map(<[u8]>::to_vec));
            for d in rx.try_iter().take(DRAIN - 1) {
                capture(&d);
                l.nic.flush_wire();
                let h = l.nic.receive_datagram(&d, &*l.mem, l.irq);
                host.extend(h.into_iter().map(<[u8]>::to_vec));
            }
        }
        for f in host.drain(..) {
            match netdev {
                Some(n) => n.send(&f),
                None => debug!(
                    len = f.len(),
                    "a frame for the host, and no netdev: dropped"
                ),
            }
        }
    }
}
