// SPDX-License-Identifier: Apache-2.0
//! What every `keelson-operator` command that reads or writes resources shares: its error,
//! the output formats, and the aligned tables and ages `get` prints (kubectl's shapes). Kept
//! apart from `ctl` so that the kinds with listings of their own (tenant networks) use them
//! without importing the command module that dispatches to them.

use std::fmt::Write as _;

use crate::kinds::InputError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("{0}")]
    Input(#[from] InputError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{kind} {name} not found in namespace {ns}")]
    NotFound { kind: &'static str, name: String, ns: String },
    #[error("{0}")]
    Encode(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Table,
    Yaml,
    Json,
}

/// An age as kubectl shows one: `42s`, `7m`, `3h`, `12d`.
pub fn age(since: u64, now: u64) -> String {
    let s = now.saturating_sub(since);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (w, c)) in widths.iter().zip(r).enumerate() {
            if i + 1 == N {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
