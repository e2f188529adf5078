// SPDX-License-Identifier: Apache-2.0
//! Pure merge functions: fold layered specs into one spec per natural ID (TB §3).
