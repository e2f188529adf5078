// SPDX-License-Identifier: Apache-2.0
//! The config fetched by URL (`keelson run --config-url`, the code path of PID 1's
//! `talos.config=URL`) against `scripts/config-server` (Python's http.server) in a namespace
//! of its own, across a veth: retries while the server is down or answers 503, variables,
//! chunked bodies, redirects, https with a test CA, and every refusal (404, a body that is not
//! a config, a body too large, an untrusted certificate, a redirect from https to http).
#![allow(clippy::disallowed_methods)] // Tests and examples drive keelson from outside: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{require_root, wait_for, Background, Netns, Node, TempDir};

const T: Duration = Duration::from_secs(30);
const CMDLINE: &str = "ip=10.77.0.2::10.77.0.1:255.255.255.0::eth0:off talos.hostname=boot-node";
const CONFIG: &str = "version: v1alpha1\nmachine:\n  network:\n    hostname: fetched-node\n";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(name)
}

/// The node's namespace with eth0, the server's with 10.77.0.1 across the veth, the config
/// file the server serves, and a test CA with a certificate for 10.77.0.1.
struct Bench {
    node: Netns,
    srv: Netns,
    dir: TempDir,
}

impl Bench {
    fn new() -> Self {
        let (node, srv) = (Netns::new(), Netns::new());
        node.veth("eth0", &srv, "up0");
        node.ip(&["link", "set", "lo", "up"]);
        srv.ip(&["link", "set", "lo", "up"]);
        srv.ip(&["addr", "add", "10.77.0.1/24", "dev", "up0"]);
        srv.ip(&["link", "set", "up0", "up"]);
        let dir = TempDir::new();
        std::fs::write(dir.path().join("served.yaml"), CONFIG).unwrap();
        let ok = Command::new(script("test-ca"))
            .arg(dir.path().join("ca"))
            .arg("10.77.0.1")
            .status()
            .unwrap();
        assert!(ok.success(), "scripts/test-ca failed");
        Self { node, srv, dir }
    }

    /// `scripts/config-server` on `port` in the server namespace; `tls` serves https.
    fn server(&self, port: u16, tls: bool, extra: &[&str]) -> Background {
        let log = self.dir.path().join(format!("server-{port}.requests"));
        let (cert, key) = (self.ca("server.pem"), self.ca("server.key"));
        let script = script("config-server").display().to_string();
        let config = self.dir.path().join("served.yaml").display().to_string();
        let (port, logs) = (port.to_string(), log.display().to_string());
        let mut args =
            vec!["python3", &script, "--port", &port, "--config", &config, "--log", &logs];
        if tls {
            args.extend(["--cert", &cert, "--key", &key]);
        }
        args.extend_from_slice(extra);
        let out = self.dir.path().join(format!("server-{port}.out"));
        let b = Background::start(&self.srv, &args, out);
        wait_for("config-server", T, || b.text().contains("listening"), || b.text());
        b
    }

    fn requests(&self, port: u16) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("server-{port}.requests")))
            .unwrap_or_default()
    }

    fn ca(&self, name: &str) -> String {
        self.dir.path().join("ca").join(name).display().to_string()
    }

    /// `keelson run --config-url URL` keeping the config in `kept`.
    fn node(&self, url: &str, kept: &Path, extra: &[&str]) -> Node {
        let mut args = vec!["--config-url", url];
        args.extend_from_slice(extra);
        Node::start_api_args(&self.node, CMDLINE, Some(kept), &args)
    }

    /// Run a node against `url` until its log has `line`; the log, the node stopped.
    fn until(&self, url: &str, line: &str, extra: &[&str]) -> String {
        let kept = self.dir.path().join(format!("kept-{}.yaml", common::tag()));
        let node = self.node(url, &kept, extra);
        wait_for(line, T, || node.log_text().contains(line), || node.log_text());
        let log = node.stop();
        assert!(!kept.exists(), "a refused config was kept:\n{log}");
        log
    }
}

#[test]
fn fetch_waits_for_the_server_retries_and_keeps_the_config() {
    if !require_root("fetch_waits_for_the_server_retries_and_keeps_the_config") {
        return;
    }
    let b = Bench::new();
    let kept = b.dir.path().join("config.yaml");
    let url = "http://10.77.0.1:8080/ok/${hostname}/c.yaml?token=s3cret&h=${HOSTNAME}";
    let node = b.node(url, &kept, &[]);
    // Nobody listens yet: connection refused, retried.
    wait_for(
        "a refused attempt",
        T,
        || node.log_text().contains("attempt 1 failed: connect 10.77.0.1:8080"),
        || node.log_text(),
    );
    // Then a server that answers 503 twice before it serves.
    let _srv = b.server(8080, false, &["--fail-first", "2"]);
    wait_for(
        "the fetched config applied",
        T,
        || {
            std::fs::read_to_string(node.root.path().join("etc/hostname"))
                .is_ok_and(|h| h.contains("fetched-node"))
        },
        || node.log_text(),
    );
    let log = node.log_text();
    assert!(log.contains("waiting for the network before fetching the config"), "{log}");
    assert!(
        log.contains(
            "fetching config from http://10.77.0.1:8080/ok/boot-node/c.yaml?… (attempt 1)"
        ),
        "{log}"
    );
    assert!(log.contains("HTTP 503 Service Unavailable; retrying in"), "{log}");
    assert!(
        log.contains(
            "fetched config from http://10.77.0.1:8080/ok/boot-node/c.yaml?…: 65 bytes, sha256 "
        ),
        "{log}"
    );
    assert!(log.contains("the fetched config is kept in"), "{log}");
    // The query is never logged; the server saw it, with the variables substituted.
    assert!(!log.contains("s3cret"), "{log}");
    let seen = b.requests(8080);
    assert_eq!(
        seen.matches("GET /ok/boot-node/c.yaml?token=s3cret&h=boot-node ").count(),
        3,
        "{seen}"
    );
    assert!(seen.ends_with("h=boot-node 200\n"), "{seen}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), CONFIG);
    node.stop();

    // A restart finds the kept config and fetches nothing (the URL would now be refused).
    let node = b.node("http://10.77.0.1:8080/missing/x", &kept, &[]);
    wait_for(
        "the kept config",
        T,
        || node.log_text().contains("using the config fetched before"),
        || node.log_text(),
    );
    wait_for("settled", T, || node.log_text().contains("settled in"), || node.log_text());
    let log = node.stop();
    assert!(!log.contains("fetching config"), "{log}");
    assert!(!b.requests(8080).contains("/missing"));
}

#[test]
fn fetch_chunked_redirected_and_over_https() {
    if !require_root("fetch_chunked_redirected_and_over_https") {
        return;
    }
    let b = Bench::new();
    let _http = b.server(8080, false, &[]);
    let _https = b.server(8443, true, &[]);

    let kept = b.dir.path().join("chunked.yaml");
    let node = b.node("http://10.77.0.1:8080/chunked/c.yaml", &kept, &[]);
    wait_for(
        "chunked",
        T,
        || node.log_text().contains("the fetched config is kept"),
        || node.log_text(),
    );
    node.stop();
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), CONFIG);

    let kept = b.dir.path().join("https.yaml");
    let ca = b.ca("ca.pem");
    let node = b.node("https://10.77.0.1:8443/redirect/c.yaml?k=v", &kept, &["--config-ca", &ca]);
    wait_for(
        "https",
        T,
        || node.log_text().contains("the fetched config is kept"),
        || node.log_text(),
    );
    let log = node.stop();
    assert!(log.contains("redirected to https://10.77.0.1:8443/ok/c.yaml?…"), "{log}");
    assert!(log.contains("(redirected to https://10.77.0.1:8443/ok/c.yaml?…): 65 bytes"), "{log}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), CONFIG);
    assert!(b.requests(8443).contains("GET /ok/c.yaml?k=v 200"), "{}", b.requests(8443));
}

#[test]
fn refusals_are_one_line_and_leave_the_node_in_maintenance() {
    if !require_root("refusals_are_one_line_and_leave_the_node_in_maintenance") {
        return;
    }
    let b = Bench::new();
    let _http = b.server(8080, false, &[]);
    let _https = b.server(8443, true, &["--http-port", "8080"]);
    let (ca, other) = (b.ca("ca.pem"), b.ca("other-ca.pem"));
    let maintenance = "maintenance mode: the node waits for `keelson apply-config --insecure`";
    for (url, roots, line) in [
        ("http://10.77.0.1:8080/missing/c.yaml", &ca, "HTTP 404 Not Found; not retried"),
        ("http://10.77.0.1:8080/huge/c.yaml", &ca, "body larger than 4194304 bytes; not retried"),
        ("https://10.77.0.1:8443/ok/c.yaml", &other, "TLS: invalid peer certificate: UnknownIssuer; not retried"),
        ("https://10.77.0.1:8443/redirect-http/c.yaml", &ca, "redirect from https to http refused (http://10.77.0.1:8080/ok/c.yaml); not retried"),
        ("http://10.77.0.1:8080/garbage/c.yaml", &ca, "is not a valid machine config (236 bytes, starting \"<html><body>\\x1b[2J\\x1b]0;owne…\")"),
    ] {
        let log = b.until(url, line, &["--config-ca", roots]);
        let failures: Vec<&str> = log.lines().filter(|l| l.contains(maintenance)).collect();
        assert_eq!(failures.len(), 1, "{url}: one line\n{log}");
        assert!(failures[0].contains(line), "{url}\n{log}");
        assert!(!log.contains("retrying in"), "{url}: retried\n{log}");
        // No raw control character from the body reached the log.
        assert!(!log.contains('\u{1b}'), "{url}\n{log}");
        assert!(!log.contains("the fetched config is kept"), "{url}: a config was kept\n{log}");
    }
    // Each refusal was asked once (the redirect twice: once on each server).
    let seen = b.requests(8080);
    for path in ["/missing/", "/huge/", "/garbage/"] {
        assert_eq!(seen.matches(path).count(), 1, "{path}: {seen}");
    }
    assert!(!seen.contains("/ok/"), "the downgrade was followed: {seen}");
}
