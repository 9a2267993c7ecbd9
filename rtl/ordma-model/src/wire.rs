//! The wire between model processes: one Unix datagram socket per NIC.
//!
//! Every NIC of a run gets the same directory (`--wire DIR`); NIC with LID `L` binds
//! `DIR/lid-L.sock`, and frames for LID `L` are datagrams sent to that path. The directory
//! is the L2 segment: every NIC in it reaches every other by LID, and more NICs are more
//! sockets in it.
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
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tracing::{debug, warn};

use crate::device::Device;
use crate::engine::wire::{Batch, Wire, MAX_BATCH, MAX_FRAME};

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

/// The path of LID `lid`'s socket in `dir`.
pub fn socket_path(dir: &Path, lid: u16) -> PathBuf {
    dir.join(format!("lid-{lid}.sock"))
}

/// One peer: its connected socket (once it could connect), the frames held for it and
/// the largest batch its socket takes.
struct Peer {
    sock: Option<UnixDatagram>,
    batch: Batch,
    limit: usize,
}

impl Peer {
    /// Whether `frame` goes in the held batch (else the batch is sent first).
    fn fits(&self, frame: &[u8]) -> bool {
        self.batch.fits(frame) && self.batch.bytes().max(4) + 2 + frame.len() <= self.limit
    }

    /// Sends the held frames as one datagram (as batches of [`SMALL_BATCH`] if the kernel
    /// refuses the batch's size) and empties the batch; a failure loses them.
    fn flush(&mut self, dir: &Path, dlid: u16, sndbuf: usize) {
        if self.batch.is_empty() {
            return;
        }
        if self.sock.is_none() {
            self.sock = connect(dir, dlid, sndbuf);
        }
        if let Some(s) = &self.sock {
            match s.send(self.batch.datagram()) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    debug!(
                        dlid,
                        bytes = self.batch.bytes(),
                        "batch too big: smaller ones"
                    );
                    self.limit = SMALL_BATCH;
                    let mut small = Batch::default();
                    for f in self.batch.frames().flatten() {
                        if small.bytes().max(4) + 2 + f.len() > SMALL_BATCH {
                            send_or_lose(s, &small, dlid);
                            small.clear();
                        }
                        small.push(f);
                    }
                    send_or_lose(s, &small, dlid);
                }
                Err(e) => {
                    debug!(dlid, %e, frames = self.batch.len(), "datagram not sent: lost");
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
fn send_or_lose(s: &UnixDatagram, batch: &Batch, dlid: u16) {
    if !batch.is_empty() {
        if let Err(e) = s.send(batch.datagram()) {
            debug!(dlid, %e, frames = batch.len(), "datagram not sent: lost");
        }
    }
}

/// A socket connected to LID `dlid`'s path, with the send timeout and a send buffer of
/// `sndbuf` bytes asked for; `None` (logged) if the peer is not there.
fn connect(dir: &Path, dlid: u16, sndbuf: usize) -> Option<UnixDatagram> {
    let path = socket_path(dir, dlid);
    let s = UnixDatagram::unbound()
        .and_then(|s| {
            s.set_write_timeout(Some(SEND_TIMEOUT))?;
            s.connect(&path)?;
            Ok(s)
        })
        .map_err(|e| debug!(dlid, %e, "no peer at {}: frames lost", path.display()))
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
        debug!(dlid, "SO_SNDBUF not raised: big batches go frame by frame");
    }
    Some(s)
}

/// The sending side: frames for LID `L` go to `DIR/lid-L.sock`, gathered per peer until
/// [`Wire::flush`].
pub struct SocketWire {
    dir: PathBuf,
    peers: Mutex<HashMap<u16, Peer>>,
    sndbuf: usize,
}

impl SocketWire {
    /// Binds LID `lid`'s socket in `dir` (replacing a stale one): the sending side, and
    /// the socket frames for `lid` arrive on.
    ///
    /// # Errors
    ///
    /// The socket could not be bound or set up.
    pub fn bind(dir: &Path, lid: u16) -> std::io::Result<(Self, UnixDatagram)> {
        let path = socket_path(dir, lid);
        match std::fs::remove_file(&path) {
            Ok(()) => debug!(path = %path.display(), "stale wire socket removed"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let sock = UnixDatagram::bind(&path)?;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                peers: Mutex::default(),
                sndbuf: SNDBUF,
            },
            sock,
        ))
    }

    /// Asks for `bytes` of send buffer on the sockets to peers connected from now on (the
    /// tests: a buffer too small for a whole batch).
    pub fn set_send_buffer(&mut self, bytes: usize) {
        self.sndbuf = bytes;
    }
}

impl Wire for SocketWire {
    fn send(&self, dlid: u16, frame: &[u8]) {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let peer = peers.entry(dlid).or_insert_with(|| Peer {
            sock: None,
            batch: Batch::default(),
            limit: MAX_BATCH,
        });
        if !peer.fits(frame) {
            peer.flush(&self.dir, dlid, self.sndbuf);
        }
        if !peer.batch.push(frame) {
            debug!(dlid, len = frame.len(), "frame too long for the wire: lost");
        }
    }

    fn flush(&self) {
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        for (&dlid, peer) in peers.iter_mut() {
            peer.flush(&self.dir, dlid, self.sndbuf);
        }
    }
}

/// Binds LID `lid`'s socket in `dir` (replacing a stale one), connects `dev`'s NIC to
/// the wire and starts the threads that take frames in; they end when the device is
/// dropped (the worker) or the process ends (the reader).
///
/// # Errors
///
/// The socket could not be bound or the threads not started.
pub fn attach(dev: &Arc<Device>, dir: &Path, lid: u16) -> std::io::Result<()> {
    let (wire, sock) = SocketWire::bind(dir, lid)?;
    dev.lock().nic.set_wire(Some(Box::new(wire)));
    let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
    std::thread::Builder::new()
        .name("ordma-wire-rx".into())
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
    let weak = Arc::downgrade(dev);
    std::thread::Builder::new()
        .name("ordma-wire".into())
        .spawn(move || work(&weak, &rx))?;
    Ok(())
}

/// Hands every datagram's frames to the NIC, under the lock (up to [`DRAIN`] datagrams
/// that queued up per lock, each one's answers sent as it is done), until the device or
/// the reader is gone.
fn work(dev: &Weak<Device>, rx: &Receiver<Vec<u8>>) {
    while let Ok(first) = rx.recv() {
        let Some(dev) = dev.upgrade() else {
            return;
        };
        let mut l = dev.lock();
        l.nic.receive_datagram(&first, &*l.mem, l.irq);
        for d in rx.try_iter().take(DRAIN - 1) {
            l.nic.flush_wire();
            l.nic.receive_datagram(&d, &*l.mem, l.irq);
        }
    }
}
