// SPDX-License-Identifier: Apache-2.0
//! What the discovery server's integration tests share: the real binary on a loopback port.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `keelson-discovery-server` on a free loopback port, its log drained to stderr.
pub struct Server {
    pub child: Child,
    /// Where it listens (`127.0.0.1:PORT`).
    pub addr: String,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keelson-discovery-server"))
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start keelson-discovery-server");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let line =
                lines.next().expect("the server exited before it listened").expect("read stderr");
            eprintln!("server: {line}");
            if let Some(rest) = line.split("serving on ").nth(1) {
                break rest.split(' ').next().unwrap_or_default().to_owned();
            }
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                eprintln!("server: {line}");
            }
        });
        Server { child, addr }
    }

    /// A `Vm*` figure of /proc/PID/status, in bytes.
    pub fn vm(&self, what: &str) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc/PID/status");
        let line = status
            .lines()
            .find(|l| l.starts_with(&format!("{what}:")))
            .unwrap_or_else(|| panic!("no {what} in /proc/PID/status"));
        let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// SIGTERM, and the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
        let status = self.child.wait().expect("wait");
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
