// SPDX-License-Identifier: Apache-2.0
//! The blocking gRPC client against a real gRPC server: Python grpcio on a Unix socket,
//! answering with Talos's own message classes (tests/data/grpcio_node.py).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cli::rpc::{Channel, RpcError};

struct Node {
    child: Child,
    socket: PathBuf,
}

impl Node {
    fn start(name: &str) -> Self {
        let socket =
            std::env::temp_dir().join(format!("keelson-cli-{name}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/grpcio_node.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&socket)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the grpcio node did not start");
        Self { child, socket }
    }

    fn channel(&self) -> Channel {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Channel::over(Box::new(s), "localhost".into(), false)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[test]
fn version_over_grpc_prints_talosctl_s_layout() {
    let node = Node::start("version");
    let mut c = node.channel();
    let mut out = Vec::new();
    cli::machine::version(&mut c, "local", false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("Server:\n\tNODE:        local\n\tTag:         v9.9.9\n"), "{text}");
    assert!(text.contains("\tSHA:         abc\n\tBuilt:       \n"), "{text}");
    assert!(text.contains("\tOS/Arch:     linux/amd64\n\tEnabled:     RBAC\n"), "{text}");
    // The same connection takes a second call.
    let mut again = Vec::new();
    cli::machine::version(&mut c, "local", false, &mut again).unwrap();
    assert_eq!(String::from_utf8(again).unwrap(), text);
}

#[test]
fn a_stream_arrives_message_by_message() {
    let node = Node::start("stream");
    let mut c = node.channel();
    let mut chunks = Vec::new();
    c.call_raw(&cli::machine::path("Dmesg"), &[], 1 << 20, &mut |m| {
        chunks.push(m);
        Ok(())
    })
    .unwrap();
    assert_eq!(chunks.len(), 3);
    let mut out = Vec::new();
    cli::machine::dmesg(&mut node.channel(), false, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "first line\nsecond line\n\\u{1b}[2Jthird\n",
        "lines are joined across chunks and escaped"
    );
}

#[test]
fn a_message_over_the_bound_fails_the_call_not_the_client() {
    let node = Node::start("huge");
    let mut c = node.channel();
    let r = c.call_raw(&cli::machine::path("Huge"), &[], 16 << 20, &mut |_| Ok(()));
    match r {
        Err(RpcError::Status(s)) => {
            assert_eq!(s.code, grpc::code::RESOURCE_EXHAUSTED, "{s}");
            assert!(s.message.contains("exceeds"), "{s}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_method_is_unimplemented() {
    let node = Node::start("unknown");
    let mut c = node.channel();
    let r: Result<talos_api::machine::VersionResponse, _> =
        c.unary(&cli::machine::path("NoSuchMethod"), &());
    let e = r.unwrap_err();
    assert!(e.is_unimplemented(), "{e}");
    // An empty answer decodes as the empty message (proto3 defaults).
    let empty: talos_api::machine::VersionResponse =
        node.channel().unary(&cli::machine::path("Empty"), &()).unwrap();
    assert!(empty.messages.is_empty());
}
