// SPDX-License-Identifier: Apache-2.0
//! [`NlError`]: every failure of the netlink layer, and the one place where errno values are
//! mapped to the [`NlErrorKind`] categories that controllers act on.

use std::fmt;
use std::io;

use nix::errno::Errno;

/// What a caller should do about a failed netlink operation.
///
/// Controllers match on this, never on raw errno values: each errno is given its meaning once,
/// here, rather than in every caller.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum NlErrorKind {
    /// Retry with backoff: the kernel was busy or out of buffer space (EBUSY, EAGAIN, ENOBUFS,
    /// EINTR, ENOMEM), or a dump was interrupted by concurrent changes too often.
    Transient,
    /// The request is wrong for this kernel state (EINVAL, ERANGE, ENETUNREACH, EPERM, ...):
    /// retrying the same request will fail the same way.
    Invalid,
    /// The kernel lacks the feature: unknown link kind, family or operation (EOPNOTSUPP,
    /// EAFNOSUPPORT, EPROTONOSUPPORT).
    Unsupported,
    /// The object (link, address, route, rule) does not exist (ENODEV, ENOENT, ESRCH,
    /// EADDRNOTAVAIL).
    NotFound,
    /// The object already exists (EEXIST).
    Exists,
    /// The kernel's reply could not be decoded or broke the protocol: a bug here or in the
    /// packet crates, not something a retry fixes.
    Bug,
}

impl NlErrorKind {
    /// The category of an errno value. Unknown values count as [`NlErrorKind::Invalid`]: a
    /// degraded condition is visible, while an unknown error retried forever is not.
    pub fn of_errno(errno: Errno) -> Self {
        use Errno::*;
        match errno {
            EBUSY | EAGAIN | ENOBUFS | EINTR | ENOMEM => NlErrorKind::Transient,
            // ENOTSUP and EOPNOTSUPP are the same number (95) on Linux.
            EOPNOTSUPP | EAFNOSUPPORT | EPROTONOSUPPORT => NlErrorKind::Unsupported,
            // EADDRNOTAVAIL is what address delete answers for an absent address
            // ("ipv4: Address not found", "ipv6: address not found").
            ENODEV | ENOENT | ESRCH | ENXIO | EADDRNOTAVAIL => NlErrorKind::NotFound,
            EEXIST => NlErrorKind::Exists,
            _ => NlErrorKind::Invalid,
        }
    }
}

impl fmt::Display for NlErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NlErrorKind::Transient => "transient",
            NlErrorKind::Invalid => "invalid",
            NlErrorKind::Unsupported => "unsupported",
            NlErrorKind::NotFound => "not found",
            NlErrorKind::Exists => "exists",
            NlErrorKind::Bug => "bug",
        })
    }
}

/// A failed netlink operation.
///
/// `op` names the operation (`"address_add"`, `"dump_routes"`, ...) and `target` the object it
/// was about, in the form the logs should show (`"10.0.0.1/24 dev 3"`), empty for dumps.
#[derive(Debug, thiserror::Error)]
pub enum NlError {
    /// The kernel answered with a negative errno (`NLMSG_ERROR`, or an error in `NLMSG_DONE`).
    #[error("{op} {target}: {errno}{}", ExtAck(message))]
    Kernel {
        /// The operation.
        op: &'static str,
        /// The object.
        target: String,
        /// The kernel's errno.
        errno: Errno,
        /// The kernel's extended ack text (`NLMSGERR_ATTR_MSG`), when it gave one.
        message: Option<String>,
    },
    /// A socket call failed (create, bind, setsockopt, send, recv).
    #[error("{op} {target}: socket: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The object.
        target: String,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// A reply did not decode, or broke the netlink protocol.
    #[error("{op} {target}: malformed reply: {detail}")]
    Decode {
        /// The operation.
        op: &'static str,
        /// The object.
        target: String,
        /// What was wrong.
        detail: String,
    },
    /// A dump kept being interrupted by concurrent changes (`NLM_F_DUMP_INTR`).
    #[error("{op}: dump interrupted by concurrent changes {attempts} times")]
    DumpInterrupted {
        /// The operation.
        op: &'static str,
        /// How many times the dump was tried.
        attempts: u32,
    },
}

/// Formats the optional extended ack as `" (kernel: ...)"`.
struct ExtAck<'a>(&'a Option<String>);

impl fmt::Display for ExtAck<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(m) => write!(f, " (kernel: {m})"),
            None => Ok(()),
        }
    }
}

impl NlError {
    /// The category that drives retry and reporting policy.
    pub fn kind(&self) -> NlErrorKind {
        match self {
            NlError::Kernel { errno, .. } => NlErrorKind::of_errno(*errno),
            NlError::Io { source, .. } => match source.raw_os_error() {
                Some(n) => NlErrorKind::of_errno(Errno::from_raw(n)),
                None => NlErrorKind::Transient,
            },
            NlError::Decode { .. } => NlErrorKind::Bug,
            NlError::DumpInterrupted { .. } => NlErrorKind::Transient,
        }
    }

    /// The errno, for a kernel or socket error.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            NlError::Kernel { errno, .. } => Some(*errno),
            NlError::Io { source, .. } => source.raw_os_error().map(Errno::from_raw),
            _ => None,
        }
    }

    /// The kernel's extended ack message, if it sent one.
    pub fn kernel_message(&self) -> Option<&str> {
        match self {
            NlError::Kernel { message, .. } => message.as_deref(),
            _ => None,
        }
    }

    /// Shorthand for `self.kind() == NlErrorKind::NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.kind() == NlErrorKind::NotFound
    }

    /// Shorthand for `self.kind() == NlErrorKind::Exists`.
    pub fn is_exists(&self) -> bool {
        self.kind() == NlErrorKind::Exists
    }

    pub(crate) fn io(op: &'static str, target: impl Into<String>, source: io::Error) -> Self {
        NlError::Io { op, target: target.into(), source }
    }

    pub(crate) fn decode(
        op: &'static str,
        target: impl Into<String>,
        detail: impl fmt::Display,
    ) -> Self {
        NlError::Decode { op, target: target.into(), detail: detail.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_kinds() {
        use Errno::*;
        for (e, k) in [
            (EBUSY, NlErrorKind::Transient),
            (EAGAIN, NlErrorKind::Transient),
            (ENOBUFS, NlErrorKind::Transient),
            (EINTR, NlErrorKind::Transient),
            (EINVAL, NlErrorKind::Invalid),
            (ERANGE, NlErrorKind::Invalid),
            (ENETUNREACH, NlErrorKind::Invalid),
            (EOPNOTSUPP, NlErrorKind::Unsupported),
            (EAFNOSUPPORT, NlErrorKind::Unsupported),
            (ENODEV, NlErrorKind::NotFound),
            (ENOENT, NlErrorKind::NotFound),
            (ESRCH, NlErrorKind::NotFound),
            (EEXIST, NlErrorKind::Exists),
        ] {
            assert_eq!(NlErrorKind::of_errno(e), k, "{e}");
        }
    }

    #[test]
    fn display_includes_kernel_message() {
        let e = NlError::Kernel {
            op: "route_add",
            target: "default via 10.9.9.9".into(),
            errno: Errno::ENETUNREACH,
            message: Some("Nexthop has invalid gateway".into()),
        };
        let s = e.to_string();
        assert!(s.contains("route_add default via 10.9.9.9"), "{s}");
        assert!(s.contains("(kernel: Nexthop has invalid gateway)"), "{s}");
        assert_eq!(e.kind(), NlErrorKind::Invalid);
        let io = NlError::io("dump_links", "", io::Error::from_raw_os_error(105));
        assert_eq!(io.kind(), NlErrorKind::Transient);
    }
}
