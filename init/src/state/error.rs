// SPDX-License-Identifier: Apache-2.0
//! The state module's error.

use super::gpt::GptError;
use super::slots::SlotError;

/// Why state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Gpt(#[from] GptError),
    #[error(transparent)]
    Slot(#[from] SlotError),
}
