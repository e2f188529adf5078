// SPDX-License-Identifier: Apache-2.0
//! Kernel uevents (`NETLINK_KOBJECT_UEVENT`, group 1): a device that appears after boot (a
//! hot-plugged NIC, a USB adapter, the virtio device a freshly loaded `virtio_pci` creates)
//! says `ACTION=add` with its `MODALIAS=`, and its driver is loaded for it.
//!
//! A kernel message is `ACTION@DEVPATH` then `KEY=VALUE` fields, each ending in a NUL
//! (Documentation/ABI/testing/sysfs-uevent; lib/kobject_uevent.c). Only the kernel (netlink
//! port 0) is listened to: udev's rebroadcasts and anyone else's datagrams are dropped.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    bind, recvfrom, setsockopt, socket, sockopt, AddressFamily, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};

use super::loader::{Loader, Request};

/// The largest message read; the kernel builds them in a 2 KiB environment buffer plus the
/// header, so a longer one is cut and then refused by the parser.
const MESSAGE_LIMIT: usize = 8192;
/// Messages handled per wakeup; the socket is level-triggered, the rest waits one turn.
const BATCH: usize = 256;
/// Receive buffer asked for, so a burst at boot (every device a driver creates) is kept.
const RCVBUF: usize = 4 << 20;

/// The fields of one uevent keelson uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Uevent {
    /// `ACTION=` (`add`, `remove`, `change`, `bind`, ...).
    pub action: String,
    /// `DEVPATH=`, under `/sys`.
    pub devpath: String,
    /// `SUBSYSTEM=`.
    pub subsystem: String,
    /// `MODALIAS=`, when the device has one.
    pub modalias: Option<String>,
}

/// Parse one kernel uevent. `None` for anything that is not one: no `@` header, a header that
/// disagrees with `ACTION=`/`DEVPATH=`, a field without `=`, or text that is not printable
/// ASCII (so nothing a log line shows needs escaping).
pub fn parse(msg: &[u8]) -> Option<Uevent> {
    let mut fields = msg.split(|&b| b == 0);
    let header = std::str::from_utf8(fields.next()?).ok()?;
    let (action, devpath) = header.split_once('@')?;
    let mut ev = Uevent::default();
    for f in fields.filter(|f| !f.is_empty()) {
        if !f.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            return None;
        }
        let text = std::str::from_utf8(f).ok()?;
        let (key, value) = text.split_once('=')?;
        match key {
            "ACTION" => ev.action = value.to_owned(),
            "DEVPATH" => ev.devpath = value.to_owned(),
            "SUBSYSTEM" => ev.subsystem = value.to_owned(),
            "MODALIAS" if !value.is_empty() => ev.modalias = Some(value.to_owned()),
            _ => {}
        }
    }
    (ev.action == action && ev.devpath == devpath).then_some(ev)
}

/// The uevent socket, non-blocking, read by a thread of its own ([`Uevents::spawn_reader`]).
#[derive(Debug)]
pub struct Uevents {
    fd: OwnedFd,
}

impl Uevents {
    /// Open and bind to the kernel's uevent group.
    pub fn open() -> nix::Result<Self> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Datagram,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkKObjectUEvent,
        )?;
        // Root may exceed rmem_max; failing that, the default buffer still works.
        if setsockopt(&fd, sockopt::RcvBufForce, &RCVBUF).is_err() {
            let _ = setsockopt(&fd, sockopt::RcvBuf, &RCVBUF);
        }
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 1))?;
        Ok(Self { fd })
    }

    /// Read what arrived (up to a batch) and ask the loader for each new device's driver.
    pub fn drain(&self, loader: &Loader) {
        let mut buf = vec![0u8; MESSAGE_LIMIT];
        for _ in 0..BATCH {
            match recvfrom::<NetlinkAddr>(self.fd.as_raw_fd(), &mut buf) {
                Ok((n, from)) => {
                    // Port 0 is the kernel; a message cut at the limit is not parsed.
                    if from.is_none_or(|a| a.pid() != 0) || n >= MESSAGE_LIMIT {
                        continue;
                    }
                    let Some(ev) = buf.get(..n).and_then(parse) else { continue };
                    if ev.action == "add" {
                        if let Some(alias) = ev.modalias {
                            log::debug!(target: "pid1", "uevent add {}: {alias}", ev.devpath);
                            loader.send(Request::Modalias(alias));
                        }
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(nix::errno::Errno::EINTR) => {}
                // ENOBUFS: events were lost; a walk over sysfs finds what they announced.
                Err(nix::errno::Errno::ENOBUFS) => {
                    log::warn!(target: "pid1", "uevents lost (receive buffer full); walking sysfs again");
                    loader.send(Request::Coldplug);
                }
                Err(e) => {
                    log::warn!(target: "pid1", "uevent socket: {e}");
                    return;
                }
            }
        }
    }

    /// Read the socket on a thread of its own from now on. A device that a driver creates (the
    /// virtio NIC behind `virtio_pci`) then has its driver asked for at once, not when the node
    /// loop, busy with its first reconciles at boot, next gets to the socket. The thread runs
    /// at the loader's priority and lives as long as PID 1.
    pub fn spawn_reader(self, loader: Loader) -> std::io::Result<()> {
        evloop::spawn_worker("uevents", move || {
            super::loader::run_ahead_of_the_loop();
            loop {
                let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => self.drain(&loader),
                    Err(e) => {
                        log::error!(target: "pid1", "uevent socket: {e}; devices that appear later get no driver");
                        return;
                    }
                }
            }
        })
        .map(|_| ())
    }
}

/// What the node loop holds of the drivers' side (PID 1 keeps it across restarts of the loop).
#[derive(Debug, Clone)]
pub struct Hotplug {
    /// Where drivers are loaded.
    pub loader: Loader,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_hotplugged_pci_nic() {
        let msg = b"add@/devices/pci0000:00/0000:00:05.0\0ACTION=add\0DEVPATH=/devices/pci0000:00/0000:00:05.0\0SUBSYSTEM=pci\0DRIVER=\0PCI_CLASS=20000\0PCI_ID=8086:100E\0MODALIAS=pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00\0SEQNUM=1234\0";
        let ev = parse(msg).unwrap();
        assert_eq!(ev.action, "add");
        assert_eq!(ev.devpath, "/devices/pci0000:00/0000:00:05.0");
        assert_eq!(ev.subsystem, "pci");
        assert_eq!(
            ev.modalias.as_deref(),
            Some("pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00")
        );
    }

    #[test]
    fn no_modalias_and_no_trailing_nul() {
        let ev = parse(b"remove@/devices/virtual/net/x\0ACTION=remove\0DEVPATH=/devices/virtual/net/x\0MODALIAS=").unwrap();
        assert_eq!(ev.action, "remove");
        assert_eq!(ev.modalias, None);
    }

    #[test]
    fn refused() {
        // udev's rebroadcast format, no header, header and fields disagreeing, no '=', control
        // characters, invalid UTF-8, empty.
        assert_eq!(parse(b"libudev\0\xfe\xed\xca\xfe"), None);
        assert_eq!(parse(b"ACTION=add\0DEVPATH=/x\0"), None);
        assert_eq!(parse(b"add@/a\0ACTION=add\0DEVPATH=/b\0"), None);
        assert_eq!(parse(b"add@/a\0ACTION=add\0DEVPATH=/a\0junk\0"), None);
        assert_eq!(parse(b"add@/a\0ACTION=add\0DEVPATH=/a\0MODALIAS=x\x1b[2J\0"), None);
        assert_eq!(parse(b"add@/a\0ACTION=add\0DEVPATH=/a\0MODALIAS=\xff\0"), None);
        assert_eq!(parse(b""), None);
    }
}
