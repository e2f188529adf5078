// SPDX-License-Identifier: Apache-2.0
//! The kernel clock: the wall time the NTP engine reads, and `adjtimex(2)` to step it, slew
//! it through the kernel PLL and mark it synchronised (Documentation/admin-guide of the
//! kernel's NTP interface; `man 2 adjtimex`).

use std::io;
use std::time::SystemTime;

use crate::ntp::NtpTime;

/// The local wall clock as an NTP timestamp.
pub fn wall_now() -> NtpTime {
    NtpTime::from_unix(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default())
}

fn adjtimex(tx: &mut libc::timex) -> io::Result<libc::c_int> {
    // SAFETY: `tx` is a valid, exclusively borrowed timex for the duration of the call.
    let rc = unsafe { libc::adjtimex(tx) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn zeroed() -> libc::timex {
    // SAFETY: timex is a plain C struct of integers, for which all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Add `offset_ns` to the clock in one atomic kernel operation (`ADJ_SETOFFSET`).
pub fn step(offset_ns: i64) -> io::Result<()> {
    let mut tx = zeroed();
    tx.modes = libc::ADJ_SETOFFSET | libc::ADJ_NANO;
    tx.time.tv_sec = offset_ns.div_euclid(1_000_000_000) as _;
    // With ADJ_NANO the kernel reads tv_usec as nanoseconds (always 0..1e9).
    tx.time.tv_usec = offset_ns.rem_euclid(1_000_000_000) as _;
    adjtimex(&mut tx).map(|_| ())
}

/// Hand `offset_ns` to the kernel PLL, set the error bounds and clear `STA_UNSYNC`, so the
/// kernel counts the clock synchronised (and, with `CONFIG_RTC_SYSTOHC`, writes it to the RTC
/// every 11 minutes).
pub fn slew(
    offset_ns: i64,
    max_error_us: i64,
    est_error_us: i64,
    time_constant: i64,
) -> io::Result<()> {
    let mut current = zeroed();
    adjtimex(&mut current)?;
    let mut tx = zeroed();
    tx.modes = libc::ADJ_OFFSET
        | libc::ADJ_NANO
        | libc::ADJ_STATUS
        | libc::ADJ_MAXERROR
        | libc::ADJ_ESTERROR
        | libc::ADJ_TIMECONST;
    tx.offset = offset_ns as libc::c_long;
    // The PLL on, nanosecond units, synchronised; the other bits (PPS, FLL...) kept as they are.
    tx.status = (current.status | libc::STA_PLL) & !libc::STA_UNSYNC;
    // The kernel caps maxerror at 16 s (NTP_PHASE_LIMIT) and ages it by 500 ppm itself.
    tx.maxerror = max_error_us.clamp(0, 16_000_000) as libc::c_long;
    tx.esterror = est_error_us.clamp(0, 16_000_000) as libc::c_long;
    tx.constant = time_constant.clamp(0, 10) as libc::c_long;
    adjtimex(&mut tx).map(|_| ())
}

/// Whether the kernel counts the clock synchronised (`adjtimex` does not answer
/// `TIME_ERROR`): something set it, keelson or another NTP client before it.
pub fn kernel_synced() -> bool {
    let mut tx = zeroed();
    adjtimex(&mut tx).is_ok_and(|state| state != libc::TIME_ERROR)
}
