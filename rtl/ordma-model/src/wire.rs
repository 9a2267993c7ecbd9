//! The wire between model processes: one Unix datagram socket per NIC.
//!
//! Every NIC of a run gets the same directory (`--wire DIR`); NIC with LID `L` binds
//! `DIR/lid-L.sock`, and a frame for LID `L` is one datagram sent to that path. The
//! directory is the L2 segment: every NIC in it reaches every other by LID, and more NICs
//! are more sockets in it. Frames are at most [`MAX_FRAME`] bytes, one datagram each.
//!
//! Two threads take frames in: a reader drains the socket into a bounded queue without
//! the NIC lock (so a peer sending a burst never waits for our lock), a worker hands each
//! frame to [`crate::engine::Nic::receive_frame`] under the device lock. Sending happens
//! under the lock, with a short timeout: a frame that cannot go is lost, as on a wire, and
//! the requester's retries recover.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::{debug, warn};

use crate::device::Device;
use crate::engine::wire::{Wire, MAX_FRAME};

/// Frames held between the reader and the worker; more are dropped.
const QUEUE: usize = 4096;
/// How long a send may wait for room in the peer's socket.
const SEND_TIMEOUT: Duration = Duration::from_millis(20);

/// The path of LID `lid`'s socket in `dir`.
pub fn socket_path(dir: &Path, lid: u16) -> PathBuf {
    dir.join(format!("lid-{lid}.sock"))
}

/// The sending side: frames for LID `L` go to `DIR/lid-L.sock`.
pub struct SocketWire {
    sock: UnixDatagram,
    dir: PathBuf,
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
        let tx = sock.try_clone()?;
        tx.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok((
            Self {
                sock: tx,
                dir: dir.to_path_buf(),
            },
            sock,
        ))
    }
}

impl Wire for SocketWire {
    fn send(&self, dlid: u16, frame: &[u8]) {
        let to = socket_path(&self.dir, dlid);
        if let Err(e) = self.sock.send_to(frame, &to) {
            debug!(dlid, %e, "frame not sent: lost");
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
            let mut buf = vec![0u8; MAX_FRAME + 64];
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) => {
                        let frame = buf.get(..n).unwrap_or_default().to_vec();
                        if tx.try_send(frame).is_err() {
                            debug!("wire queue full: frame dropped");
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

/// Hands every frame to the NIC, under the lock, until the device or the reader is gone.
fn work(dev: &Weak<Device>, rx: &Receiver<Vec<u8>>) {
    while let Ok(frame) = rx.recv() {
        let Some(dev) = dev.upgrade() else {
            return;
        };
        let mut l = dev.lock();
        l.nic.receive_frame(&frame, &*l.mem, l.irq);
    }
}
