// SPDX-License-Identifier: Apache-2.0
//! The event loop: one level-triggered epoll over a signalfd, one timerfd and the sources
//! each mode adds (netlink watcher, inotify, later DHCP sockets and the API socket).
//!
//! One iteration: reconcile everything dirty (the runtime never blocks), arm the timer to the
//! earliest deadline the runtime asks for, then sleep in `epoll_wait` until a source is ready.
//! Idle means asleep: with nothing dirty and no timer due, there are no wakeups at all.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

/// Why the reactor could not be set up or waited on.
#[derive(Debug, thiserror::Error)]
pub enum ReactorError {
    /// A syscall failed.
    #[error("{what}: {errno}")]
    Sys {
        /// What was attempted.
        what: &'static str,
        /// The error.
        errno: Errno,
    },
    /// More event sources than there are tokens.
    #[error(transparent)]
    Tokens(#[from] evloop::Exhausted),
}

fn sys(what: &'static str) -> impl Fn(Errno) -> ReactorError {
    move |errno| ReactorError::Sys { what, errno }
}

/// Tokens of the fds the reactor itself owns. Every other source's tokens come from an
/// [`evloop::Tokens`], whose tags never make a token this small.
pub const SIGNAL_TOKEN: u64 = 0;
/// See [`SIGNAL_TOKEN`].
pub const TIMER_TOKEN: u64 = 1;

/// The signals the loop handles; they are blocked so they arrive only through the signalfd.
pub fn handled_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
        Signal::SIGPWR,
        Signal::SIGUSR1,
    ] {
        set.add(s);
    }
    set
}

/// epoll + signalfd + timerfd.
#[derive(Debug)]
pub struct Reactor {
    epoll: Epoll,
    signals: SignalFd,
    timer: TimerFd,
    armed: Option<Instant>,
    /// Returns from `epoll_wait` so far (for the idle benchmark).
    pub wakeups: u64,
}

impl Reactor {
    /// Block the handled signals (call before any thread starts) and create the fds.
    pub fn new() -> Result<Self, ReactorError> {
        let mask = handled_signals();
        mask.thread_block().map_err(sys("block signals"))?;
        let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(sys("signalfd"))?;
        // CLOCK_MONOTONIC matches `Instant`, which the runtime's deadlines are expressed in.
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(sys("timerfd"))?;
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(sys("epoll"))?;
        let r = Self { epoll, signals, timer, armed: None, wakeups: 0 };
        r.add(r.signals.as_fd(), SIGNAL_TOKEN)?;
        r.add(r.timer.as_fd(), TIMER_TOKEN)?;
        Ok(r)
    }

    /// Watch `fd` for readability, level-triggered, reported as `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> Result<(), ReactorError> {
        self.epoll
            .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, token))
            .map_err(sys("epoll_ctl add"))
    }

    /// Change what `fd` (added with [`Reactor::add`]) is watched for: readability, writability,
    /// both, or neither (hang-ups and errors are always reported). Closing an fd removes it.
    pub fn interest(
        &self,
        fd: BorrowedFd<'_>,
        token: u64,
        read: bool,
        write: bool,
    ) -> Result<(), ReactorError> {
        let mut flags = EpollFlags::empty();
        if read {
            flags |= EpollFlags::EPOLLIN;
        }
        if write {
            flags |= EpollFlags::EPOLLOUT;
        }
        let mut ev = EpollEvent::new(flags, token);
        self.epoll.modify(fd, &mut ev).map_err(sys("epoll_ctl mod"))
    }

    /// Arm the timer for `deadline` (or disarm it with `None`).
    pub fn arm(&mut self, deadline: Option<Instant>, now: Instant) -> Result<(), ReactorError> {
        if deadline == self.armed {
            return Ok(());
        }
        match deadline {
            Some(t) => {
                // A zero relative time would disarm the timer; a due deadline fires in 1 µs.
                let rel = t.saturating_duration_since(now).max(Duration::from_micros(1));
                self.timer
                    .set(
                        Expiration::OneShot(TimeSpec::from_duration(rel)),
                        TimerSetTimeFlags::empty(),
                    )
                    .map_err(sys("timerfd_settime"))?;
            }
            None => self.timer.unset().map_err(sys("timerfd_settime"))?,
        }
        self.armed = deadline;
        Ok(())
    }

    /// Sleep until a source is ready; returns the tokens that are. Signals and timer
    /// expirations are consumed here and reported as [`Ready`].
    pub fn wait(&mut self) -> Result<Ready, ReactorError> {
        let mut events = [EpollEvent::empty(); 32];
        let n = loop {
            match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => break n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(sys("epoll_wait")(e)),
            }
        };
        self.wakeups += 1;
        let mut ready = Ready::default();
        for ev in events.iter().take(n) {
            match ev.data() {
                SIGNAL_TOKEN => {
                    while let Ok(Some(info)) = self.signals.read_signal() {
                        if let Ok(sig) =
                            Signal::try_from(i32::try_from(info.ssi_signo).unwrap_or(0))
                        {
                            ready.signals.push(sig);
                        }
                    }
                }
                TIMER_TOKEN => {
                    // Reading clears the expiration; the runtime decides what is due.
                    let _ = self.timer.wait();
                    self.armed = None;
                    ready.timer = true;
                }
                token => ready.tokens.push(token),
            }
        }
        Ok(ready)
    }
}

/// What woke the loop.
#[derive(Debug, Default)]
pub struct Ready {
    /// Signals received.
    pub signals: Vec<Signal>,
    /// The timer fired.
    pub timer: bool,
    /// Other sources that are readable (their tokens, for the mode's [`evloop::Tokens`]).
    pub tokens: Vec<u64>,
}
