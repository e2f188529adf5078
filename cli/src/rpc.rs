// SPDX-License-Identifier: Apache-2.0
//! A blocking gRPC client over the `grpc` crate's sans-IO HTTP/2 engine: one connection to one
//! node (the local socket, or TLS with ALPN `h2`), one call at a time, unary or
//! server-streaming, with Talos's messages (`talos-api`).
//!
//! The node is not trusted: every message is bounded ([`Limits`]), header blocks by the
//! engine's own limit, and a call that says nothing for [`connect`]'s read timeout fails.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use grpc::h2::{self, Connection, Event, Role};
use grpc::{Response, ResponseReader, Status};
use talos_api::Message;

use crate::connect::{self, Stream, Target};

/// How long a one-shot call may take (and how long a write may wait).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The largest message taken from a node unless a call says otherwise: far above what any
/// answer keelson's node gives, far below what would hurt the client.
pub const MAX_MESSAGE: usize = 16 << 20;

/// What this client calls itself in `user-agent`.
const USER_AGENT: &str = concat!("keelson/", env!("CARGO_PKG_VERSION"));

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Connecting, or the transport, failed.
    #[error("{0}")]
    Transport(String),
    /// The HTTP/2 connection broke (the node sent something the engine refused).
    #[error("HTTP/2: {0}")]
    H2(#[from] h2::H2Error),
    /// The node answered with a status other than OK.
    #[error("{}", status_text(.0))]
    Status(Status),
    /// A message did not decode as the answer's type.
    #[error("bad answer: {0}")]
    Decode(String),
    /// The caller's handler refused a message (a closed stdout, say).
    #[error("{0}")]
    Handler(String),
    /// The node does not speak HTTP/2 here: it closed without a frame, or answered in JSON
    /// lines (a node from before the gRPC API).
    #[error("the node has no gRPC API ({0})")]
    NotGrpc(&'static str),
}

impl RpcError {
    /// The node does not serve this method (yet).
    pub fn is_unimplemented(&self) -> bool {
        matches!(self, Self::Status(s) if s.code == grpc::code::UNIMPLEMENTED)
    }

    /// The node has no gRPC API at all (a keelson node from before it). (`Unimplemented` is
    /// an answer: in maintenance mode it is how a node refuses what it does not serve without
    /// a config.)
    pub fn not_served(&self) -> bool {
        matches!(self, Self::NotGrpc(_))
    }
}

/// One HTTP/2 connection to a node.
pub struct Channel {
    io: Box<dyn Stream>,
    h2: Connection,
    authority: String,
    tls: bool,
    /// Bytes read from the node so far.
    received: usize,
    /// Metadata sent with every call (trustd's `token`).
    metadata: Vec<(String, String)>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("authority", &self.authority).finish_non_exhaustive()
    }
}

/// The engine's limits as a client: windows big enough for a large answer in few round
/// trips, header blocks as small as gRPC needs.
/// A status as the user reads it: what happened in words, gRPC's name for it, and the
/// node's message (escaped for the terminal), e.g. `permission denied (PermissionDenied):
/// os:reader is not allowed to call /machine.MachineService/Reboot`.
pub fn status_text(s: &Status) -> String {
    // `Status`'s own text is `Name (code): message`, the message escaped.
    let shown = s.to_string();
    let (name, rest) = shown.split_once(" (").unwrap_or((shown.as_str(), ""));
    let mut words = String::new();
    for (i, c) in name.char_indices() {
        if c.is_ascii_uppercase() && i > 0 {
            words.push(' ');
        }
        words.push(c.to_ascii_lowercase());
    }
    let message = rest.split_once("): ").map_or("", |(_, m)| m);
    format!("{words} ({name}): {message}")
}

fn h2_config() -> h2::Config {
    h2::Config {
        stream_window: 1 << 20,
        conn_window: 4 << 20,
        max_header_list: 16 << 10,
        max_concurrent_streams: 0,
    }
}

impl Channel {
    /// Connect to `target`; `streaming` calls wait for the node without a read timeout.
    pub fn connect(target: &Target, streaming: bool) -> Result<Self, RpcError> {
        let io = connect::open(target, (!streaming).then_some(TIMEOUT), TIMEOUT)
            .map_err(RpcError::Transport)?;
        let (authority, tls) = match target {
            // `:authority` must be a host; a socket path is not one.
            Target::Local(_) => ("localhost".to_owned(), false),
            Target::Remote { host, port, .. } if host.contains(':') => {
                (format!("[{host}]:{port}"), true)
            }
            Target::Remote { host, port, .. } => (format!("{host}:{port}"), true),
        };
        Ok(Self::over(io, authority, tls))
    }

    /// A channel over an already connected stream.
    pub fn over(io: Box<dyn Stream>, authority: String, tls: bool) -> Self {
        Self {
            io,
            h2: Connection::new(Role::Client, h2_config()),
            authority,
            tls,
            received: 0,
            metadata: Vec::new(),
        }
    }

    /// Send `key: value` with every call (lowercase key, as gRPC metadata is).
    pub fn with_metadata(mut self, key: &str, value: &str) -> Self {
        self.metadata.push((key.to_owned(), value.to_owned()));
        self
    }

    /// A unary call: one request, one answer.
    pub fn unary<Req: Message, Resp: Message + Default>(
        &mut self,
        path: &str,
        req: &Req,
    ) -> Result<Resp, RpcError> {
        let mut answer = None;
        self.call(path, req, MAX_MESSAGE, &mut |m: Resp| {
            if answer.is_some() {
                return Err("more than one answer to a unary call".into());
            }
            answer = Some(m);
            Ok(())
        })?;
        answer.ok_or_else(|| RpcError::Transport(format!("{path}: no answer")))
    }

    /// A call with any number of answers, each handed to `each` as it arrives; `max` bounds
    /// each message.
    pub fn call<Req: Message, Resp: Message + Default>(
        &mut self,
        path: &str,
        req: &Req,
        max: usize,
        each: &mut dyn FnMut(Resp) -> Result<(), String>,
    ) -> Result<(), RpcError> {
        self.call_raw(path, &req.encode_to_vec(), max, &mut |bytes| {
            let m = Resp::decode(bytes.as_slice()).map_err(|e| RpcError::Decode(e.to_string()))?;
            each(m).map_err(RpcError::Handler)
        })
    }

    /// A call with encoded messages.
    pub fn call_raw(
        &mut self,
        path: &str,
        req: &[u8],
        max: usize,
        each: &mut dyn FnMut(Vec<u8>) -> Result<(), RpcError>,
    ) -> Result<(), RpcError> {
        let mut head = grpc::request_headers(self.tls, &self.authority, path, USER_AGENT, None);
        head.extend(self.metadata.iter().cloned());
        let id = self.h2.open_stream(&head, false)?;
        self.h2.send_data(id, &grpc::frame_message(req), true)?;
        let mut reader = ResponseReader::new(max);
        let mut buf = vec![0u8; 16 << 10];
        // Once the request is out, a node may close right after its answer (a reboot): a
        // write that fails then (an acknowledgement of its frames) leaves the answer to read.
        let mut sent = false;
        let mut broken = false;
        loop {
            if broken {
                drop(self.h2.take_output());
            } else {
                match self.flush() {
                    Ok(()) => sent = true,
                    Err(e)
                        if sent
                            && matches!(
                                e.kind(),
                                ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
                            ) =>
                    {
                        broken = true
                    }
                    Err(e) => return Err(RpcError::Transport(format!("send: {e}"))),
                }
            }
            while let Some(ev) = self.h2.poll_event() {
                let mut out = Vec::new();
                match ev {
                    Event::Headers { stream, fields, end_stream } if stream == id => {
                        reader.on_headers(&fields, end_stream, &mut out)
                    }
                    Event::Data { stream, data, end_stream } if stream == id => {
                        reader.on_data(&data, end_stream, &mut out)
                    }
                    Event::Reset { stream, code } if stream == id => {
                        reader.on_reset(code, &mut out)
                    }
                    Event::GoAway { last_stream, code } if last_stream < id => {
                        reader.on_reset(code.max(h2::code::REFUSED_STREAM), &mut out)
                    }
                    _ => {}
                }
                for r in out {
                    match r {
                        Response::Message(m) => each(m)?,
                        Response::Status(s) if s.is_ok() => return Ok(()),
                        Response::Status(s) => return Err(RpcError::Status(s)),
                    }
                }
            }
            if self.h2.is_closed() {
                if !broken {
                    let _ = self.flush();
                }
                return Err(RpcError::Transport("the node closed the HTTP/2 connection".into()));
            }
            let n = match self.io.read(&mut buf) {
                Ok(0) if self.received == 0 => return Err(RpcError::NotGrpc("closed at once")),
                Ok(0) => return Err(RpcError::Transport("the node closed the connection".into())),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // Closed with our request unread: the same node without gRPC, as a reset.
                Err(e) if e.kind() == ErrorKind::ConnectionReset && self.received == 0 => {
                    return Err(RpcError::NotGrpc("reset at once"))
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(RpcError::Transport(format!(
                        "the node said nothing for {} s",
                        TIMEOUT.as_secs()
                    )))
                }
                Err(e) if e.to_string().contains("alert") => {
                    return Err(RpcError::Transport(format!(
                        "the node refused this client at the TLS handshake ({e}): a client certificate from the node's CA is needed (--keelsonconfig), --insecure only reaches a node in maintenance mode"
                    )))
                }
                Err(e) => return Err(RpcError::Transport(format!("receive: {e}"))),
            };
            let data = buf.get(..n).unwrap_or_default();
            // A keelson node from before the gRPC API reads the preface as a bad JSON request
            // and answers with a JSON object, said plainly rather than as an HTTP/2 error: an
            // HTTP/2 server's first byte starts its SETTINGS frame's length, which is never
            // `{` (it would be over 8 MB).
            if self.received == 0 && data.first() == Some(&b'{') {
                return Err(RpcError::NotGrpc("it answered in JSON lines"));
            }
            self.received += n;
            if let Err(e) = self.h2.recv(data) {
                if !broken {
                    let _ = self.flush();
                }
                return Err(e.into());
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let out = self.h2.take_output();
        if out.is_empty() {
            return Ok(());
        }
        self.io.write_all(&out).and_then(|()| self.io.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_as_words_code_and_escaped_message() {
        let s = Status::new(7, "os:reader may not\x1b[2J");
        assert_eq!(
            status_text(&s),
            "permission denied (PermissionDenied): os:reader may not\\u{1b}[2J"
        );
        assert_eq!(
            status_text(&Status::new(12, "API is not implemented in maintenance mode")),
            "unimplemented (Unimplemented): API is not implemented in maintenance mode"
        );
        assert!(status_text(&Status::new(99, "x")).ends_with(": x"));
    }

    /// A node from before the gRPC API: its JSON-lines server answers the preface as a bad
    /// request, or closes; both read as "no gRPC here", and nothing else does.
    #[test]
    #[allow(clippy::disallowed_methods, clippy::unwrap_used)] // a peer thread in a test
    fn a_json_lines_node_reads_as_not_grpc() {
        use std::os::unix::net::UnixStream;
        let old_node = |answer: &'static [u8]| {
            let (ours, mut theirs) = UnixStream::pair().unwrap();
            let peer = std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                let _ = theirs.read(&mut buf);
                let _ = theirs.write_all(answer);
                // An answer stays open until the client is done; no answer closes at once.
                (!answer.is_empty()).then_some(theirs)
            });
            let mut c = Channel::over(Box::new(ours), "localhost".into(), false);
            let r = c.call_raw("/machine.MachineService/Version", &[], 1 << 10, &mut |_| Ok(()));
            drop(peer.join().unwrap());
            r.unwrap_err()
        };
        let e = old_node(b"{\"ok\":false,\"error\":\"bad request\"}\n");
        assert!(matches!(e, RpcError::NotGrpc(_)) && e.not_served(), "{e}");
        let e = old_node(b"");
        assert!(matches!(e, RpcError::NotGrpc(_)), "{e}");
        // Garbage that is not JSON is an HTTP/2 error, not a reason to try JSON lines.
        let e = old_node(b"\x00\x00\x04\x09garbage-garbage");
        assert!(!e.not_served(), "{e}");
    }
}
