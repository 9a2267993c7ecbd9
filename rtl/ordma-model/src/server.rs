//! The vfio-user side: the `vfio_user` crate's [`ServerBackend`] over the engine.
//!
//! QEMU 11.1.3 sends VERSION, DMA_MAP/UNMAP, GET_INFO, GET_REGION_INFO, GET_IRQ_INFO,
//! SET_IRQS, REGION_READ/WRITE and RESET (on its machine reset). A function reset, RESET
//! or configuration space's D3hot -> D0 ([`crate::pci`]), resets configuration space and
//! the NIC ([`crate::engine::Nic::function_reset`]). No region is offered as mappable, so QEMU sends
//! guest writes as posted messages; the backend never fails a write (the crate would answer
//! a failed posted write, which QEMU does not expect): bad writes go to the engine, which
//! answers them the hardware way.

use std::fs::File;
use std::mem::size_of;
use std::sync::Arc;

use tracing::{debug, info};
use vfio_bindings::bindings::vfio::{
    vfio_region_info, VFIO_DMA_UNMAP_FLAG_ALL, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_NORESIZE,
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE,
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_MSIX_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};
use vfio_user::{DmaMapFlags, DmaUnmapFlags, IrqInfo, ServerBackend, ServerRegion};

use crate::device::Device;
use crate::engine::Interrupts;
use crate::pci::{ConfigSpace, CONFIG_SIZE, MSIX_BAR, MSIX_BAR_SIZE};
use ordma_hw as hw;

/// One NIC behind one vfio-user socket. The configuration space is the loop's alone; the
/// NIC, guest memory and interrupts are the shared [`Device`].
pub struct Backend {
    dev: Arc<Device>,
    config: ConfigSpace,
}

impl Backend {
    /// A backend for `dev`.
    pub fn new(dev: Arc<Device>) -> Self {
        Self {
            dev,
            config: ConfigSpace::new(),
        }
    }

    /// The regions to announce: config space, BAR0 (registers), BAR2 (doorbells), BAR4
    /// (MSI-X table and PBA, which QEMU emulates). None is mappable.
    pub fn regions() -> Vec<ServerRegion> {
        (0..VFIO_PCI_NUM_REGIONS)
            .map(|index| {
                let size = match index {
                    VFIO_PCI_BAR0_REGION_INDEX => hw::BAR0_SIZE as u64,
                    VFIO_PCI_BAR2_REGION_INDEX => hw::BAR2_SIZE as u64,
                    i if i == MSIX_BAR => MSIX_BAR_SIZE,
                    VFIO_PCI_CONFIG_REGION_INDEX => CONFIG_SIZE as u64,
                    _ => 0,
                };
                let flags = if size > 0 {
                    VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE
                } else {
                    0
                };
                ServerRegion {
                    region_info: vfio_region_info {
                        argsz: size_of::<vfio_region_info>() as u32,
                        flags,
                        index,
                        cap_offset: 0,
                        size,
                        offset: 0,
                    },
                    sparse_areas: Vec::new(),
                    mmap_fd: None,
                }
            })
            .collect()
    }

    /// The interrupts to announce: MSI-X only.
    pub fn irqs() -> Vec<IrqInfo> {
        (0..VFIO_PCI_NUM_IRQS)
            .map(|index| {
                let (count, flags) = if index == VFIO_PCI_MSIX_IRQ_INDEX {
                    (
                        u32::from(hw::NUM_VECTORS),
                        VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE,
                    )
                } else {
                    (0, 0)
                };
                IrqInfo {
                    index,
                    flags,
                    count,
                }
            })
            .collect()
    }
}

fn le_value(data: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    let n = data.len().min(4);
    b[..n].copy_from_slice(&data[..n]);
    u32::from_le_bytes(b)
}

impl ServerBackend for Backend {
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> std::io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => self.config.read(offset, data),
            VFIO_PCI_BAR0_REGION_INDEX => {
                let v = self
                    .dev
                    .lock()
                    .nic
                    .bar0_read(offset, data.len())
                    .to_le_bytes();
                for (d, s) in data
                    .iter_mut()
                    .zip(v.iter().chain(std::iter::repeat(&0xff)))
                {
                    *d = *s;
                }
            }
            // Doorbells and the PBA read as zero.
            _ => data.fill(0),
        }
        Ok(())
    }

    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> std::io::Result<()> {
        match region {
            VFIO_PCI_CONFIG_REGION_INDEX => {
                let reset = self.config.write(offset, data);
                let bme = self.config.bus_master();
                let mut l = self.dev.lock();
                if reset {
                    info!("function reset: PM D3hot -> D0");
                    l.nic.function_reset();
                }
                if l.nic.bus_master() != bme {
                    l.nic.set_bus_master(bme, &*l.mem, l.irq);
                }
            }
            VFIO_PCI_BAR0_REGION_INDEX => {
                let value = le_value(data);
                debug!(
                    offset = format_args!("{offset:#x}"),
                    value = format_args!("{value:#x}"),
                    "BAR0 write"
                );
                let mut l = self.dev.lock();
                l.nic.bar0_write(offset, data.len(), value, &*l.mem, l.irq);
            }
            VFIO_PCI_BAR2_REGION_INDEX => {
                let value = le_value(data);
                debug!(
                    page = offset / 4096,
                    offset = offset % 4096,
                    len = data.len(),
                    value = format_args!("{value:#x}"),
                    "doorbell write"
                );
                let mut l = self.dev.lock();
                l.nic
                    .doorbell_write(offset, data.len(), value, &*l.mem, l.irq);
            }
            _ => debug!(region, offset, "write to an unused region ignored"),
        }
        Ok(())
    }

    fn dma_map(
        &mut self,
        flags: DmaMapFlags,
        offset: u64,
        address: u64,
        size: u64,
        fd: Option<File>,
    ) -> std::io::Result<()> {
        let Some(fd) = fd else {
            // Without an fd the memory is not shared with us: DMA there fails as unmapped.
            debug!(
                address = format_args!("{address:#x}"),
                size, "DMA_MAP without an fd: not DMA-able"
            );
            return Ok(());
        };
        debug!(?flags, "DMA_MAP");
        self.dev.mem.map(address, size, fd, offset)
    }

    fn dma_unmap(&mut self, flags: DmaUnmapFlags, address: u64, size: u64) -> std::io::Result<()> {
        // QEMU's "unmap all" is VFIO_DMA_UNMAP_FLAG_ALL; the crate's flag names do not match
        // the protocol's bit values, so test the protocol's.
        let all = flags.bits() & VFIO_DMA_UNMAP_FLAG_ALL != 0;
        self.dev.mem.unmap(address, size, all);
        Ok(())
    }

    /// `DEVICE_RESET` (QEMU's machine reset): a function reset, configuration space and
    /// the NIC ([`crate::engine::Nic::function_reset`]).
    fn reset(&mut self) -> std::io::Result<()> {
        info!("function reset: DEVICE_RESET from QEMU");
        self.config = ConfigSpace::new();
        self.dev.lock().nic.function_reset();
        Ok(())
    }

    fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        fds: Vec<File>,
    ) -> std::io::Result<()> {
        if index != VFIO_PCI_MSIX_IRQ_INDEX || flags & VFIO_IRQ_SET_ACTION_TRIGGER == 0 {
            debug!(index, flags, "SET_IRQS ignored");
            return Ok(());
        }
        let n = usize::from(hw::NUM_VECTORS);
        let start = start as usize;
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 && count == 0 {
            info!("MSI-X disabled");
            self.dev.msix.clear();
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_NONE != 0 {
            // A trigger from QEMU itself.
            for v in start..start.saturating_add(count as usize).min(n) {
                self.dev.msix.raise(u16::try_from(v).unwrap_or(u16::MAX));
            }
            return Ok(());
        }
        if flags & VFIO_IRQ_SET_DATA_EVENTFD != 0 {
            // One message per fd (max_msg_fds 1); a run of unassigned vectors has no fds.
            let mut fds = fds.into_iter();
            for v in start..start.saturating_add(count as usize).min(n) {
                let fd = fds.next();
                let set = fd.is_some();
                if self.dev.msix.set(v, n, fd) {
                    info!(vector = v, set, "MSI-X eventfd");
                }
            }
        }
        Ok(())
    }
}
