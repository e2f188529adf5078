// SPDX-License-Identifier: Apache-2.0
//! The boot services on loopback, driven by clients we did not write: curl for HTTP and TFTP
//! (and atftp when installed), with the iPXE binaries of Debian's `ipxe` package as the TFTP
//! files. Without curl or those binaries a test is skipped, or fails when
//! `KEELSON_REQUIRE_ROOT=1`. The machine table on a real etcd is in `machine_table_in_etcd`.
#![allow(clippy::disallowed_methods)] // Tests: plain threads and sleeps are fine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::tests_outside_test_module
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use operator::pxe::images::Images;
use operator::pxe::mac::Mac;
use operator::pxe::machines::{MachineSpec, MachineTable, MemTable, StoreTable};
use operator::pxe::{start, Options, Running};

use common::Dir;

const KNOWN: &str = "52:54:00:12:34:56";
const UNDIONLY: &str = "/usr/lib/ipxe/undionly.kpxe";

fn tempdir(test: &str) -> Dir {
    common::temp("pxe", test)
}

fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd).arg(arg).output().is_ok_and(|o| o.status.success())
}

struct Service {
    _dir: Dir,
    running: Option<Running>,
    stop: Arc<AtomicBool>,
    data: PathBuf,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(r) = self.running.take() {
            r.join();
        }
    }
}

impl Service {
    fn http(&self) -> String {
        format!("http://{}", self.running.as_ref().unwrap().http.unwrap())
    }

    fn tftp(&self) -> String {
        format!("tftp://{}", self.running.as_ref().unwrap().tftp.unwrap())
    }
}

/// HTTP and TFTP on free loopback ports; version `v1` with a 100 000-byte initramfs; one
/// known machine with a config.
fn service(test: &str) -> Service {
    let dir = tempdir(test);
    let data = dir.0.join("data");
    std::fs::write(dir.0.join("k"), b"a kernel").unwrap();
    let initramfs: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.0.join("i"), &initramfs).unwrap();
    let images = Arc::new(Images::new(&data));
    images.add("v1", &dir.0.join("k"), &dir.0.join("i")).unwrap();
    let mut t = MemTable::default();
    t.0.insert(
        Mac::parse(KNOWN).unwrap(),
        MachineSpec {
            version: "v1".into(),
            cmdline: "console=ttyS0".into(),
            config: Some("version: v1alpha1\n".into()),
        },
    );
    let o = Options {
        http: Some("127.0.0.1:0".parse().unwrap()),
        url: None,
        tftp: Some("127.0.0.1:0".parse().unwrap()),
        tftp_root: Some(PathBuf::from("/usr/lib/ipxe")),
        proxy_dhcp: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let running = start(&o, images, Arc::new(t), stop.clone()).unwrap();
    Service { _dir: dir, running: Some(running), stop, data }
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl").args(["-sS", "--max-time", "20"]).args(args).output().unwrap()
}

/// `curl -w '%{http_code}'`: status and body.
fn get(args: &[&str]) -> (String, Vec<u8>) {
    let mut a = vec!["-o", "-", "-w", "\n%{http_code}"];
    a.extend_from_slice(args);
    let out = curl(&a).stdout;
    let split = out.iter().rposition(|c| *c == b'\n').unwrap();
    (String::from_utf8_lossy(&out[split + 1..]).into_owned(), out[..split].to_vec())
}

fn ready(test: &str) -> bool {
    if !have("curl", "--version") {
        testkit::skip_or_fail(&format!("{test}: no curl"));
        return false;
    }
    if !Path::new(UNDIONLY).exists() {
        testkit::skip_or_fail(&format!("{test}: no {UNDIONLY} (Debian: ipxe)"));
        return false;
    }
    true
}

#[test]
fn http_scripts_images_and_configs() {
    if !ready("http_scripts_images_and_configs") {
        return;
    }
    let s = service("http");
    let base = s.http();
    let (code, body) = get(&[&format!("{base}/ipxe?mac={KNOWN}")]);
    let script = String::from_utf8(body).unwrap();
    assert_eq!(code, "200");
    assert_eq!(
        script,
        format!(
            "#!ipxe\necho keelson-operator: {KNOWN} boots v1\n\
             kernel {base}/images/v1/vmlinuz initrd=initramfs \
             BOOTIF=01-52-54-00-12-34-56 keelson.image=v1 console=ttyS0 \
             talos.config={base}/config/{KNOWN}\n\
             initrd --name initramfs {base}/images/v1/initramfs\nboot\n"
        )
    );
    // The other spelling, and iPXE's uristring escape.
    assert_eq!(get(&[&format!("{base}/boot/52-54-00-12-34-56.ipxe")]).1, script.as_bytes());
    assert_eq!(
        get(&[&format!("{base}/ipxe?mac=52%3A54%3A00%3A12%3A34%3A56")]).1,
        script.as_bytes()
    );
    // An unknown MAC: a script that says so and exits.
    let (code, body) = get(&[&format!("{base}/ipxe?mac=52:54:00:00:00:01")]);
    assert_eq!(code, "200");
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with("#!ipxe\necho ") && text.ends_with("\nexit\n"), "{text}");
    assert!(text.contains("52:54:00:00:00:01") && !text.contains("kernel"), "{text}");
    // The config the script names.
    let (code, body) = get(&[&format!("{base}/config/{KNOWN}")]);
    assert_eq!((code.as_str(), body.as_slice()), ("200", &b"version: v1alpha1\n"[..]));
    assert_eq!(get(&[&format!("{base}/config/52:54:00:00:00:01")]).0, "404");

    // Images: whole, a range, the tail, HEAD, an unsatisfiable range.
    let want = std::fs::read(s.data.join("images/v1/initramfs")).unwrap();
    let (code, body) = get(&[&format!("{base}/images/v1/initramfs")]);
    assert_eq!((code.as_str(), body.len()), ("200", 100_000));
    assert_eq!(body, want);
    let (code, body) = get(&["-r", "1000-1999", &format!("{base}/images/v1/initramfs")]);
    assert_eq!(code, "206");
    assert_eq!(body, want[1000..2000]);
    let (code, body) = get(&["-H", "Range: bytes=-10", &format!("{base}/images/v1/initramfs")]);
    assert_eq!((code.as_str(), body.as_slice()), ("206", &want[99_990..]));
    let head = curl(&["-I", &format!("{base}/images/v1/vmlinuz")]);
    let head = String::from_utf8_lossy(&head.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-length: 8\r\n") && head.contains("accept-ranges: bytes"),
        "{head}"
    );
    let (code, _) = get(&["-r", "100000-", &format!("{base}/images/v1/initramfs")]);
    assert_eq!(code, "416");
    assert_eq!(get(&[&format!("{base}/images/v2/vmlinuz")]).0, "404");

    // Hostile targets, sent as written.
    for (path, code) in [
        ("/images/../../../../etc/passwd", "404"),
        ("/images/v1/../manifest.json", "404"),
        ("/images/../v1/vmlinuz", "404"),
        ("/images/%2e%2e/v1/vmlinuz", "404"),
        ("/ipxe?mac=../../etc/passwd", "400"),
        ("/config/..%2f..%2fetc%2fpasswd", "400"),
    ] {
        assert_eq!(get(&["--path-as-is", &format!("{base}{path}")]).0, code, "{path}");
    }
    assert_eq!(get(&["-X", "POST", &format!("{base}/ipxe?mac={KNOWN}")]).0, "405");

    // A file changed after it was added is not served.
    std::fs::write(s.data.join("images/v1/vmlinuz"), b"A KERNEL").unwrap();
    assert_eq!(get(&[&format!("{base}/images/v1/vmlinuz")]).0, "500");
    assert_eq!(get(&[&format!("{base}/images/v1/initramfs")]).0, "200");
}

#[test]
fn http_connections_are_bounded_in_time() {
    if !ready("http_connections_are_bounded_in_time") {
        return;
    }
    use std::io::{Read, Write};
    let s = service("slow");
    let addr = s.running.as_ref().unwrap().http.unwrap();
    // A head over 8 KiB is refused, not buffered.
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    let _ = c.write_all(format!("GET /ipxe HTTP/1.1\r\nX: {}\r\n", "a".repeat(9000)).as_bytes());
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    // A client that sends half a head is cut off (after the 10 s head timeout).
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /ipxe?mac=52:54:00:12:34:56 HTTP/1.1\r\n").unwrap();
    let t = std::time::Instant::now();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    assert!(t.elapsed() < std::time::Duration::from_secs(15), "{:?}", t.elapsed());
}

#[test]
fn tftp_with_curl() {
    if !ready("tftp_with_curl") {
        return;
    }
    let s = service("tftp");
    let want = std::fs::read(UNDIONLY).unwrap();
    let url = format!("{}/undionly.kpxe", s.tftp());
    // Plain RFC 1350 (512-byte blocks), then blksize negotiated (RFC 2348).
    let out = curl(&[&url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout.len(), want.len());
    assert!(out.stdout == want);
    for blksize in ["1468", "8", "65464"] {
        let out = curl(&["--tftp-blksize", blksize, &url]);
        assert!(
            out.status.success(),
            "blksize {blksize}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == want, "blksize {blksize}: {} bytes", out.stdout.len());
    }
    // A symbolic link of the package (ipxe.efi -> /boot/ipxe.efi) is followed.
    if Path::new("/usr/lib/ipxe/ipxe.efi").exists() {
        let out = curl(&[&format!("{}/ipxe.efi", s.tftp())]);
        assert!(out.stdout == std::fs::read("/usr/lib/ipxe/ipxe.efi").unwrap());
    }
    // Traversal and missing files: an error, nothing served.
    for path in ["/../../etc/passwd", "/qemu/../../../etc/passwd", "/nope.efi", "/qemu"] {
        let out = curl(&["--path-as-is", &format!("{}{path}", s.tftp())]);
        assert!(!out.status.success(), "{path}");
        assert!(out.stdout.is_empty(), "{path}");
    }
}

#[test]
fn tftp_with_atftp() {
    if !have("atftp", "--help") {
        testkit::skip_or_fail("tftp_with_atftp: no atftp (Debian: atftp)");
        return;
    }
    if !ready("tftp_with_atftp") {
        return;
    }
    let s = service("atftp");
    let addr = s.running.as_ref().unwrap().tftp.unwrap();
    let out_file = s.data.join("got");
    let fetch = |remote: &str, opts: &[&str]| {
        let _ = std::fs::remove_file(&out_file);
        let mut c = Command::new("atftp");
        c.args(opts).args(["-g", "-r", remote, "-l"]).arg(&out_file);
        c.args(["127.0.0.1", &addr.port().to_string()]);
        c.output().unwrap()
    };
    let want = std::fs::read(UNDIONLY).unwrap();
    let o = fetch("undionly.kpxe", &["--option", "blksize 1024", "--option", "tsize"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&out_file).unwrap() == want);
    let o = fetch("../../etc/passwd", &[]);
    let got = std::fs::read(&out_file).unwrap_or_default();
    assert!(got.is_empty(), "traversal served {} bytes ({o:?})", got.len());
}

#[test]
fn machine_table_in_etcd() {
    let found = Command::new("etcd").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        testkit::skip_or_fail("machine_table_in_etcd: no etcd binary (Debian: etcd-server)");
        return;
    }
    let dir = tempdir("table");
    // Through the command line, on a private etcd in the data dir.
    let bin = env!("CARGO_BIN_EXE_keelson-operator");
    std::fs::write(dir.0.join("config.yaml"), "machine: {}\n").unwrap();
    let run = |args: &[&str]| {
        Command::new(bin).args(args).arg("--data-dir").arg(&dir.0).output().unwrap()
    };
    let o = run(&[
        "machine",
        "add",
        "52-54-00-AA-BB-CC",
        "--version",
        "v1.7.0",
        "--cmdline",
        "console=ttyS0",
        "--config",
        dir.0.join("config.yaml").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "52:54:00:aa:bb:cc\n");
    let o = run(&["machine", "add", "52:54:00:aa:bb:cc", "--version", "v1.8.0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["machine", "add", "52:54:00:aa:bb:cd", "--version", "v1", "--cmdline", "a=${x}"]);
    assert!(!o.status.success());
    let o = run(&["machine", "list"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "52:54:00:aa:bb:cc\tv1.8.0\tno config\t\n");

    // Read back by the table the service uses.
    let opts = etcd::local::Options::new(&dir.0.join("etcd"), &dir.0.join("etcd.log"));
    let etcd = etcd::local::LocalEtcd::start(&opts).unwrap();
    let layout = operator::key::Layout::new("/keelson-operator", b"/keelson-operator");
    let t = StoreTable::new(operator::store::Store::new(etcd.client(), layout));
    let m = t.machine(&Mac::parse("52:54:00:aa:bb:cc").unwrap()).unwrap().unwrap();
    assert_eq!((m.version.as_str(), m.has_config), ("v1.8.0", false));
    assert!(t.machine(&Mac::parse("52:54:00:aa:bb:cd").unwrap()).unwrap().is_none());
}

#[test]
fn tftp_blksize_and_tsize_on_the_wire() {
    if !ready("tftp_blksize_and_tsize_on_the_wire") {
        return;
    }
    let s = service("wire");
    let server = s.running.as_ref().unwrap().tftp.unwrap();
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    c.send_to(b"\x00\x01undionly.kpxe\x00octet\x00blksize\x001468\x00tsize\x000\x00", server)
        .unwrap();
    let mut buf = [0u8; 2000];
    let (n, from) = c.recv_from(&mut buf).unwrap();
    assert_ne!(from, server, "each transfer answers from its own port");
    let size = std::fs::metadata(UNDIONLY).unwrap().len();
    assert_eq!(&buf[..n], format!("\x00\x06blksize\x001468\x00tsize\x00{size}\x00").as_bytes());
    c.send_to(b"\x00\x04\x00\x00", from).unwrap();
    let (n, _) = c.recv_from(&mut buf).unwrap();
    assert_eq!((n, &buf[..4]), (4 + 1468, &b"\x00\x03\x00\x01"[..]));
    // A duplicate ACK of block 0 gets no second block 1 (no Sorcerer's Apprentice).
    c.send_to(b"\x00\x04\x00\x00", from).unwrap();
    c.send_to(b"\x00\x04\x00\x01", from).unwrap();
    let (n, _) = c.recv_from(&mut buf).unwrap();
    assert_eq!((n, &buf[..4]), (4 + 1468, &b"\x00\x03\x00\x02"[..]));
    // An ERROR from the client ends the transfer; a write request is refused.
    c.send_to(b"\x00\x05\x00\x00stop\x00", from).unwrap();
    c.send_to(b"\x00\x02x\x00octet\x00", server).unwrap();
    let (n, _) = c.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..4], b"\x00\x05\x00\x02", "{:?}", &buf[..n]);
}

#[test]
fn serve_with_boot_http_reads_the_table_from_etcd() {
    use std::io::BufRead;
    let found = Command::new("etcd").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        testkit::skip_or_fail("serve_with_boot_http: no etcd binary (Debian: etcd-server)");
        return;
    }
    if !ready("serve_with_boot_http") {
        return;
    }
    let dir = tempdir("serve");
    let bin = env!("CARGO_BIN_EXE_keelson-operator");
    std::fs::write(dir.0.join("k"), b"kernel").unwrap();
    std::fs::write(dir.0.join("i"), b"initramfs").unwrap();
    std::fs::write(dir.0.join("c.yaml"), b"machine: {}\n").unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).arg("--data-dir").arg(&dir.0).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let (k, i) = (dir.0.join("k"), dir.0.join("i"));
    run(&[
        "image",
        "add",
        "v2",
        "--kernel",
        k.to_str().unwrap(),
        "--initramfs",
        i.to_str().unwrap(),
    ]);
    assert!(run(&["image", "list"]).starts_with("v2\tvmlinuz 6 "));
    let c = dir.0.join("c.yaml");
    run(&["machine", "add", KNOWN, "--version", "v2", "--config", c.to_str().unwrap()]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(bin)
        .args(["serve", "--boot-http", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&dir.0)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("boot http on")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => log.push(l),
            Err(_) => panic!("serve did not start its boot service: {log:?}"),
        }
    }
    let base = format!("http://127.0.0.1:{port}");
    let (code, body) = get(&[&format!("{base}/boot/{KNOWN}.ipxe")]);
    let script = String::from_utf8(body).unwrap();
    assert_eq!(code, "200");
    assert!(
        script.contains(&format!(
            "kernel {base}/images/v2/vmlinuz initrd=initramfs BOOTIF=01-52-54-00-12-34-56 \
             keelson.image=v2 talos.config={base}/config/{KNOWN}\n"
        )),
        "{script}"
    );
    assert_eq!(get(&[&format!("{base}/config/{KNOWN}")]).1, b"machine: {}\n");
    assert_eq!(get(&[&format!("{base}/images/v2/initramfs")]).1, b"initramfs");
    let (_, body) = get(&[&format!("{base}/ipxe?mac=52:54:00:00:00:09")]);
    assert!(String::from_utf8(body).unwrap().ends_with("\nexit\n"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the service stopped with serve"
    );
}

#[test]
fn serve_boots_a_talos_machine_by_its_pxe_client_spec() {
    use std::io::BufRead;
    let found = Command::new("etcd").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        testkit::skip_or_fail("serve_boots_a_talos_machine: no etcd binary (Debian: etcd-server)");
        return;
    }
    if !ready("serve_boots_a_talos_machine") {
        return;
    }
    let dir = tempdir("tm");
    let bin = env!("CARGO_BIN_EXE_keelson-operator");
    let (k, i) = (dir.0.join("k"), dir.0.join("i"));
    std::fs::write(&k, b"kernel").unwrap();
    std::fs::write(&i, b"initramfs").unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(bin).args(args).arg("--data-dir").arg(&dir.0).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[
        "image",
        "add",
        "v1.13.0",
        "--kernel",
        k.to_str().unwrap(),
        "--initramfs",
        i.to_str().unwrap(),
    ]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(bin)
        .args(["serve", "--boot-http", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(&dir.0)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("boot http on")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => log.push(l),
            Err(_) => panic!("serve did not start its boot service: {log:?}"),
        }
    }
    let base = format!("http://127.0.0.1:{port}");
    let mac = "52:54:00:00:00:20";
    // Unknown until the TalosMachine is applied (through the running serve's etcd).
    let (_, body) = get(&[&format!("{base}/ipxe?mac={mac}")]);
    assert!(String::from_utf8(body).unwrap().ends_with("\nexit\n"));
    let doc = dir.0.join("tm.yaml");
    std::fs::write(
        &doc,
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: pxe1\nspec:\n  \
         endpoint: 127.0.0.1\n  version: v1.13.0\n  pxeClientSpec:\n    macAddress: 52:54:00:00:00:20\n    \
         cpuArchitecture: amd64\n    kernelCmdlineArgs: [console=ttyS0, talos.platform=metal]\n",
    )
    .unwrap();
    run(&["apply", "-f", doc.to_str().unwrap()]);
    let (code, body) = get(&[&format!("{base}/ipxe?mac={mac}")]);
    let script = String::from_utf8(body).unwrap();
    assert_eq!(code, "200");
    assert!(
        script.contains(&format!(
            "kernel {base}/images/v1.13.0/vmlinuz initrd=initramfs BOOTIF=01-52-54-00-00-00-20 \
             keelson.image=v1.13.0 console=ttyS0 talos.platform=metal\n"
        )),
        "{script}"
    );
    assert!(!script.contains("talos.config"), "no config from the boot service: {script}");
    assert_eq!(get(&[&format!("{base}/config/{mac}")]).0, "404");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}
