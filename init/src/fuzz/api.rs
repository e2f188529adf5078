// SPDX-License-Identifier: Apache-2.0
//! Request lines of the management API (`api::protocol::parse`), as they arrive over TLS: JSON
//! through serde, then keelson's own checks of type names, namespaces, modes and timeouts.
//!
//! Oracle: no panic, and a refusal says why in one line (no raw control character reaches
//! the error text sent back).

use testkit::fuzzkit::{run, Mutator, Target, Verdict};

use crate::api::protocol::parse;

#[test]
fn fuzz_target_apirequest() {
    let seeds = [
        &br#"{"op":"get","type":"addressstatuses","namespace":"network","id":"eth0/10.0.0.5/24"}"#[..],
        br#"{"op":"list","type":"Routes.net.keelson.dev"}"#,
        br#"{"op":"watch","type":"link","id":"eth0"}"#,
        br#"{"op":"logs","follow":true}"#,
        br#"{"op":"apply-config","config":"version: v1alpha1\n","dryRun":true,"mode":"try","timeoutSeconds":60}"#,
        br#"{"op":"reboot","mode":"staged"}"#,
        br#"{"op":"machine-status"}"#,
        br#"{"op":"confirm-config"}"#,
    ]
    .iter()
    .map(|s| s.to_vec())
    .collect();
    let target = Target {
        name: "apirequest",
        crate_dir: super::CRATE_DIR,
        seeds,
        mutator: Mutator {
            dict: &[
                b"\"",
                b"\\u0000",
                b"\\u001b",
                b"\\u202e",
                b"null",
                b"18446744073709551615",
                b"-1",
                b"1e999",
                b"{",
                b"}",
                b"[",
                b"]",
                b":",
                b",",
            ],
            lengths: None,
            max_len: 4096,
        },
        default_iters: 20_000,
    };
    run(target, |b| match parse(b) {
        Ok(_) => Ok(Verdict::Accepted),
        Err(e) => {
            let text = e.to_string();
            if text.chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)) {
                return Err(format!("error text {text:?}"));
            }
            Ok(Verdict::Refused)
        }
    });
}

/// Found by `fuzz_target_apirequest` (corpus file `op-with-escape.hex`): serde's "unknown
/// variant" error quotes the `op` as decoded, so `"ge\u001bt"` put a raw ESC into the error
/// line sent back (and printed by the client).
#[test]
fn a_refused_request_echoes_no_control_character() {
    let e = parse(br#"{"op":"ge\u001bt\u202e","type":"x"}"#).err().map(|e| e.to_string());
    let e = e.unwrap_or_default();
    assert!(e.starts_with("bad request: unknown variant"), "{e}");
    assert!(!e.contains('\u{1b}') && !e.contains('\u{202e}'), "{e:?}");
    assert!(e.contains("ge\\u{1b}t"), "{e}");
}
