// SPDX-License-Identifier: Apache-2.0
//! The last log lines of this process, for `keelson logs`, in every mode: both loggers (stderr
//! in `run` mode, kmsg as PID 1) push here. Each line gets a sequence number so followers can
//! ask for what is new since they last looked.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Lines kept.
pub const LINES: usize = 2048;

struct Ring {
    lines: VecDeque<String>,
    /// Sequence number of the next line pushed.
    next: u64,
}

static RING: Mutex<Ring> = Mutex::new(Ring { lines: VecDeque::new(), next: 0 });

/// Keep a line (the oldest goes when full).
pub fn push(line: String) {
    if let Ok(mut r) = RING.lock() {
        if r.lines.len() == LINES {
            r.lines.pop_front();
        }
        r.lines.push_back(line);
        r.next += 1;
    }
}

/// Lines with a sequence number of at least `from` that are still kept, and the sequence
/// number to ask from next time.
pub fn since(from: u64) -> (Vec<String>, u64) {
    match RING.lock() {
        Ok(r) => {
            let first = r.next - r.lines.len() as u64;
            let skip = usize::try_from(from.saturating_sub(first)).unwrap_or(usize::MAX);
            (r.lines.iter().skip(skip).cloned().collect(), r.next)
        }
        Err(_) => (Vec::new(), from),
    }
}
