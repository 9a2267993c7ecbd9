//! A capture of the port's frames (`ordma-model --pcap FILE`): every frame the port sends
//! and every frame it receives, each as it is on the wire, in the classic pcap format
//! (link type Ethernet) that tshark and tcpdump read. Each record goes out in one write as
//! it happens, so a capture is complete up to the moment the model stopped.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::warn;

/// The pcap file header: magic, version 2.4, no time zone, snap length 65535, Ethernet.
fn header() -> [u8; 24] {
    let mut h = [0u8; 24];
    h[..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&65535u32.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// A capture being written.
pub struct Pcap {
    file: Mutex<Option<File>>,
}

impl Pcap {
    /// Creates (or truncates) `path` and writes the file header.
    ///
    /// # Errors
    ///
    /// The file could not be created or written.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut f = File::create(path)?;
        f.write_all(&header())?;
        Ok(Self {
            file: Mutex::new(Some(f)),
        })
    }

    /// Records `frame` (at most 65535 bytes of it), stamped now. A write that fails stops
    /// the capture (logged once).
    pub fn frame(&self, frame: &[u8]) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let snap = frame.get(..65535).unwrap_or(frame);
        // CAST: at most 65535; seconds since 1970 fit 32 bits until 2106.
        let (len, caplen) = (frame.len() as u32, snap.len() as u32);
        let mut rec = Vec::with_capacity(16 + snap.len());
        rec.extend_from_slice(&(t.as_secs() as u32).to_le_bytes());
        rec.extend_from_slice(&t.subsec_micros().to_le_bytes());
        rec.extend_from_slice(&caplen.to_le_bytes());
        rec.extend_from_slice(&len.to_le_bytes());
        rec.extend_from_slice(snap);
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = file.as_mut() {
            if let Err(e) = f.write_all(&rec) {
                warn!(%e, "the capture stops");
                *file = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_is_a_pcap_of_its_frames() {
        let path = std::env::temp_dir().join(format!("ordma-pcap-{}.pcap", std::process::id()));
        let p = Pcap::create(&path).unwrap();
        p.frame(&[1; 60]);
        p.frame(&[2; 100]);
        let b = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(b.len(), 24 + 16 + 60 + 16 + 100);
        assert_eq!(b[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(b[20], 1, "Ethernet");
        assert_eq!(b[24 + 8..24 + 16], [60, 0, 0, 0, 60, 0, 0, 0]);
        assert_eq!(b[24 + 16..24 + 76], [1; 60]);
        assert_eq!(b[100 + 8..100 + 12], [100, 0, 0, 0]);
    }
}
