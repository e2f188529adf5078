// SPDX-License-Identifier: Apache-2.0
//! Every subcommand answers `--help` and `-h` on stdout with exit status 0, without touching a
//! node or the kernel.
#![allow(clippy::unwrap_used, clippy::tests_outside_test_module)]

use std::process::Command;

const COMMANDS: &[&str] = &[
    "plan",
    "run",
    "get",
    "logs",
    "apply-config",
    "explain",
    "machine-status",
    "version",
    "disks",
    "dmesg",
    "service",
    "events",
    "reboot",
    "reset",
    "upgrade",
    "gen",
    "help",
];

#[test]
fn every_command_answers_help() {
    for cmd in COMMANDS {
        for flag in ["--help", "-h"] {
            // Help wins wherever it stands, even after arguments that would be wrong.
            let out = Command::new(env!("CARGO_BIN_EXE_keelson"))
                .args([cmd, "--no-such-option", flag])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{cmd} {flag}: {out:?}");
            assert!(
                stdout.starts_with(&format!("usage:\n  keelson {cmd}")),
                "{cmd} {flag}: {stdout}"
            );
        }
    }
}

#[test]
fn no_command_prints_the_whole_usage_and_fails() {
    let out = Command::new(env!("CARGO_BIN_EXE_keelson")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for cmd in COMMANDS {
        assert!(stderr.contains(&format!("  keelson {cmd}")), "{cmd} missing: {stderr}");
    }
}
