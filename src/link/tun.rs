//! TUN devices: one per namespace, `IFF_TUN | IFF_NO_PI` (plain IP packets, no header), no
//! `IFF_VNET_HDR` and no `TUNSETOFFLOAD`, so with MTU 1500 no packet is ever larger than 1500
//! bytes (offloads would hand us 64 KB super-packets). Opened non-blocking.
//!
//! The kernel's own counters of a device (`tx_dropped` in particular: packets lost in the TUN
//! queue because the emulator did not read them in time) are read from `/proc/net/dev` of the
//! device's namespace through a file opened inside that namespace.

use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::{FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

use super::host::TUN_PATH;
use crate::support::procfs;

const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
/// `_IOW('T', 202, int)`
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

#[repr(C)]
struct IfReqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Creates TUN device `name` in the namespace of the calling thread and returns its fd
/// (non-blocking, close-on-exec). The device disappears when the fd is closed.
pub fn open_tun(name: &str) -> io::Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TUN device name {name:?} must have 1 to 15 bytes"),
        ));
    }
    let path = std::ffi::CString::new(TUN_PATH).expect("no NUL");
    // SAFETY: valid C string; we own the returned fd.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    for (dst, src) in req.name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads a struct ifreq; ours has the same layout and size (40 bytes).
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            TUNSETIFF as _,
            &mut req,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// The kernel's counters of one network device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
}

impl DeviceCounters {
    /// `self − earlier`, field by field (saturating).
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        DeviceCounters {
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
        }
    }
}

impl From<procfs::NetDevCounters> for DeviceCounters {
    fn from(c: procfs::NetDevCounters) -> DeviceCounters {
        DeviceCounters {
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            rx_dropped: c.rx_dropped,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            tx_dropped: c.tx_dropped,
        }
    }
}

/// Reads a device's counters from a `/proc/net/dev` file opened inside its namespace.
pub struct DeviceStatsReader {
    file: File,
    device: String,
}

impl DeviceStatsReader {
    /// Opens the counters of `device` of the calling thread's namespace. The open file keeps
    /// showing that namespace wherever it is read from.
    pub fn open_in_current_namespace(device: &str) -> io::Result<DeviceStatsReader> {
        Ok(DeviceStatsReader {
            file: procfs::open_thread_net_dev()?,
            device: device.to_string(),
        })
    }

    pub fn read(&mut self) -> io::Result<DeviceCounters> {
        self.file.rewind()?;
        let mut text = String::new();
        self.file.read_to_string(&mut text)?;
        procfs::parse_net_dev(&text, &self.device)
            .map(DeviceCounters::from)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("device {} not in /proc/net/dev", self.device),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_counters_come_from_proc_net_dev_and_subtract() {
        let c = DeviceCounters::from(procfs::NetDevCounters {
            rx_bytes: 1000,
            rx_packets: 10,
            rx_dropped: 2,
            tx_bytes: 3000,
            tx_packets: 30,
            tx_dropped: 7,
        });
        assert_eq!(
            c,
            DeviceCounters {
                rx_bytes: 1000,
                rx_packets: 10,
                rx_dropped: 2,
                tx_bytes: 3000,
                tx_packets: 30,
                tx_dropped: 7
            }
        );
        let d = c.since(&DeviceCounters {
            tx_dropped: 5,
            rx_bytes: 2000,
            ..Default::default()
        });
        assert_eq!((d.tx_dropped, d.rx_bytes, d.tx_bytes), (2, 0, 3000));
    }

    #[test]
    fn rejects_bad_names() {
        assert!(open_tun("").is_err());
        assert!(open_tun("a-name-that-is-too-long").is_err());
    }
}
