// SPDX-License-Identifier: Apache-2.0
//! A sans-IO HTTP/2 connection (RFC 9113) for either end: bytes in with [`Connection::recv`],
//! events out with [`Connection::poll_event`], bytes to send with [`Connection::take_output`].
//! Plaintext connections use prior knowledge (the client preface first, no Upgrade).
//!
//! Bounds: frames above our SETTINGS_MAX_FRAME_SIZE, header blocks (compressed or decoded)
//! above `max_header_list`, and more open peer streams than `max_concurrent_streams` are
//! refused. Flow control: we give the peer a large window and replenish it as DATA arrives;
//! what the application keeps buffered is its own business (gRPC bounds each message).
//! Outgoing DATA is queued per stream and sent as the peer's windows allow.
//!
//! Client role: [`Connection::open_stream`] with the request head, [`Connection::send_data`],
//! then the response arrives as `Headers`, `Data`, and trailers (`Headers` with `end_stream`).
//! Server role: a request arrives as `Headers` on a new odd stream (then `Data`); answer with
//! [`Connection::send_headers`], [`Connection::send_data`] and trailers via `send_headers(..,
//! true)`, which wait behind queued data. [`Connection::queued`] shows a slow reader's
//! backlog (a server decides when to give up on it with [`Connection::reset`]);
//! [`Connection::go_away`] starts a graceful shutdown.

pub mod hpack;
mod huffman;

use std::collections::VecDeque;

use crate::vecmap::VecMap;

pub use hpack::Field;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

const DEFAULT_WINDOW: i64 = 65_535;
const MAX_WINDOW: i64 = (1 << 31) - 1;
const DEFAULT_FRAME: usize = 16_384;

/// HTTP/2 error codes (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// Limits and windows this end announces.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
    pub stream_window: u32,
    /// The connection's receive window (raised from 65,535 by a WINDOW_UPDATE at start).
    pub conn_window: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, and the bound on a compressed header block.
    pub max_header_list: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams the peer may open (server role).
    pub max_concurrent_streams: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            stream_window: 4 << 20,
            conn_window: 16 << 20,
            max_header_list: 64 << 10,
            max_concurrent_streams: 100,
        }
    }
}

/// A connection error: the connection is over, a GOAWAY with `code` is queued for the peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 error {code:#x}: {reason}")]
pub struct H2Error {
    pub code: u32,
    pub reason: &'static str,
}

fn err(code: u32, reason: &'static str) -> H2Error {
    H2Error { code, reason }
}

/// What the peer did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A header block: a request or response head, or trailers.
    Headers {
        stream: u32,
        fields: Vec<Field>,
        end_stream: bool,
    },
    Data {
        stream: u32,
        data: Vec<u8>,
        end_stream: bool,
    },
    /// The stream was reset, by the peer or because the peer went away before handling it.
    Reset {
        stream: u32,
        code: u32,
    },
    /// The peer will handle no stream above `last_stream`.
    GoAway {
        last_stream: u32,
        code: u32,
    },
    PingAck([u8; 8]),
}

#[derive(Debug)]
struct Stream {
    send_window: i64,
    recv_window: i64,
    pending: VecDeque<u8>,
    /// END_STREAM is to follow the pending data (or the trailers).
    pending_end: bool,
    pending_trailers: Option<Vec<u8>>,
    local_closed: bool,
    remote_closed: bool,
}

/// One HTTP/2 connection's state.
#[derive(Debug)]
pub struct Connection {
    role: Role,
    cfg: Config,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    events: VecDeque<Event>,
    /// Server role: the client preface has not been seen yet.
    awaiting_preface: bool,
    /// The peer's first frame (its SETTINGS) has not arrived yet.
    awaiting_settings: bool,
    decoder: hpack::Decoder,
    peer_max_frame: usize,
    peer_initial_window: i64,
    peer_max_concurrent: u32,
    conn_send_window: i64,
    conn_recv_window: i64,
    streams: VecMap<u32, Stream>,
    next_stream: u32,
    last_peer_stream: u32,
    /// A header block waiting for CONTINUATION: stream, fragment so far, END_STREAM.
    continuation: Option<(u32, Vec<u8>, bool)>,
    closed: bool,
    /// A GOAWAY went out or came in: no new streams, the open ones finish.
    going_away: bool,
}

impl Connection {
    /// A new connection; its preface (client) and SETTINGS are already queued for sending.
    pub fn new(role: Role, cfg: Config) -> Self {
        let mut c = Self {
            role,
            cfg,
            inbuf: Vec::new(),
            out: Vec::new(),
            events: VecDeque::new(),
            awaiting_preface: role == Role::Server,
            awaiting_settings: true,
            decoder: hpack::Decoder::new(4096),
            peer_max_frame: DEFAULT_FRAME,
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_concurrent: u32::MAX,
            conn_send_window: DEFAULT_WINDOW,
            conn_recv_window: i64::from(cfg.conn_window).max(DEFAULT_WINDOW),
            streams: VecMap::new(),
            next_stream: if role == Role::Client { 1 } else { 2 },
            last_peer_stream: 0,
            continuation: None,
            closed: false,
            going_away: false,
        };
        if role == Role::Client {
            c.out.extend_from_slice(PREFACE);
        }
        let mut s = Vec::new();
        let mut setting = |id: u16, v: u32| {
            s.extend_from_slice(&id.to_be_bytes());
            s.extend_from_slice(&v.to_be_bytes());
        };
        if role == Role::Client {
            setting(0x2, 0); // ENABLE_PUSH off
        } else {
            setting(0x3, cfg.max_concurrent_streams);
        }
        setting(0x4, cfg.stream_window.min(MAX_WINDOW as u32));
        setting(0x6, u32::try_from(cfg.max_header_list).unwrap_or(u32::MAX));
        c.frame(SETTINGS, 0, 0, &s);
        let extra = c.conn_recv_window - DEFAULT_WINDOW;
        if extra > 0 {
            c.frame(WINDOW_UPDATE, 0, 0, &(extra as u32).to_be_bytes());
        }
        c
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// True once a connection error happened or GOAWAY was sent: nothing more to do but
    /// flush the output and close.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Bytes to write to the transport.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Streams currently open (in either direction).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = payload.len() as u32;
        self.out.extend_from_slice(&len.to_be_bytes()[1..]);
        self.out.push(kind);
        self.out.push(flags);
        self.out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        self.out.extend_from_slice(payload);
    }

    fn header_frames(&mut self, stream: u32, block: &[u8], end_stream: bool) {
        let mut chunks = block.chunks(self.peer_max_frame).peekable();
        let mut first = true;
        if block.is_empty() {
            self.frame(HEADERS, END_HEADERS | if end_stream { END_STREAM } else { 0 }, stream, &[]);
            return;
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            let mut flags = if last { END_HEADERS } else { 0 };
            let kind = if first {
                if end_stream {
                    flags |= END_STREAM;
                }
                HEADERS
            } else {
                CONTINUATION
            };
            self.frame(kind, flags, stream, chunk);
            first = false;
        }
    }

    /// Fail the connection: queue GOAWAY and stop.
    fn fail(&mut self, e: H2Error) -> H2Error {
        if !self.closed {
            let mut p = self.last_peer_stream.to_be_bytes().to_vec();
            p.extend_from_slice(&e.code.to_be_bytes());
            self.frame(GOAWAY, 0, 0, &p);
            self.closed = true;
        }
        e
    }

    /// Say goodbye: GOAWAY names the last peer stream we handle; later ones are ignored, the
    /// open streams finish normally (a graceful shutdown waits for `open_streams() == 0`).
    pub fn go_away(&mut self, code: u32) {
        self.go_away_saying(code, b"");
    }

    /// [`Self::go_away`] with debug data: why, for the people reading the peer's logs (RFC
    /// 9113 §6.8; at most 256 bytes of it are sent).
    pub fn go_away_saying(&mut self, code: u32, why: &[u8]) {
        if !self.closed && !self.going_away {
            let mut p = self.last_peer_stream.to_be_bytes().to_vec();
            p.extend_from_slice(&code.to_be_bytes());
            p.extend_from_slice(why.get(..256).unwrap_or(why));
            self.frame(GOAWAY, 0, 0, &p);
            self.going_away = true;
        }
    }

    /// A GOAWAY was sent or received: no new streams on this connection.
    pub fn is_going_away(&self) -> bool {
        self.going_away
    }

    /// Streams in the map opened by the peer (or by us): open or half-closed, as the
    /// concurrency limits count them.
    fn count_streams(&self, peer: bool) -> usize {
        let peer_odd = self.role == Role::Server;
        self.streams.keys().filter(|id| (*id % 2 == 1) == (peer_odd == peer)).count()
    }

    /// Send a PING; its ACK arrives as [`Event::PingAck`].
    pub fn ping(&mut self, payload: [u8; 8]) {
        self.frame(PING, 0, 0, &payload);
    }

    fn new_stream(&self) -> Stream {
        Stream {
            send_window: self.peer_initial_window,
            recv_window: i64::from(self.cfg.stream_window),
            pending: VecDeque::new(),
            pending_end: false,
            pending_trailers: None,
            local_closed: false,
            remote_closed: false,
        }
    }

    /// Client role: open a stream with a request head.
    pub fn open_stream<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        fields: &[(N, V)],
        end_stream: bool,
    ) -> Result<u32, H2Error> {
        if self.role != Role::Client || self.closed || self.going_away {
            return Err(err(
                code::REFUSED_STREAM,
                "cannot open a stream (not a client, or going away)",
            ));
        }
        let open = self.count_streams(false);
        if self.next_stream > MAX_WINDOW as u32 || open >= self.peer_max_concurrent as usize {
            return Err(err(code::REFUSED_STREAM, "no stream available"));
        }
        let id = self.next_stream;
        self.next_stream += 2;
        let mut s = self.new_stream();
        s.local_closed = end_stream;
        self.streams.insert(id, s);
        self.header_frames(id, &hpack::encode(fields), end_stream);
        Ok(id)
    }

    /// Send a header block on an open stream: a response head, or trailers (`end_stream`),
    /// which wait for the stream's queued data.
    pub fn send_headers<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        stream: u32,
        fields: &[(N, V)],
        end_stream: bool,
    ) -> Result<(), H2Error> {
        let block = hpack::encode(fields);
        let s = self.sendable(stream)?;
        if !s.pending.is_empty() && end_stream {
            s.pending_trailers = Some(block);
            s.pending_end = true;
            return Ok(());
        }
        s.local_closed = end_stream;
        self.header_frames(stream, &block, end_stream);
        self.reap(stream);
        Ok(())
    }

    /// Queue DATA on an open stream; it goes out as the peer's windows allow.
    pub fn send_data(&mut self, stream: u32, data: &[u8], end_stream: bool) -> Result<(), H2Error> {
        let s = self.sendable(stream)?;
        s.pending.extend(data);
        s.pending_end = end_stream;
        self.flush();
        Ok(())
    }

    /// A stream this side may still send on.
    fn sendable(&mut self, stream: u32) -> Result<&mut Stream, H2Error> {
        let s = self
            .streams
            .get_mut(&stream)
            .ok_or_else(|| err(code::STREAM_CLOSED, "no such stream"))?;
        if s.local_closed || s.pending_end {
            return Err(err(code::STREAM_CLOSED, "stream closed for sending"));
        }
        Ok(s)
    }

    /// Bytes queued on a stream and not yet sent (the peer's window is closed).
    pub fn queued(&self, stream: u32) -> usize {
        self.streams.get(&stream).map_or(0, |s| s.pending.len())
    }

    /// Bytes queued on every stream and not yet sent: DATA behind closed windows and the
    /// trailers waiting for it. A server budgets a connection's memory by this.
    pub fn queued_total(&self) -> usize {
        self.streams
            .values()
            .map(|s| s.pending.len() + s.pending_trailers.as_ref().map_or(0, Vec::len))
            .sum()
    }

    /// Bytes of frames made and not yet taken by [`Connection::take_output`].
    pub fn output_len(&self) -> usize {
        self.out.len()
    }

    /// Abandon a stream (RST_STREAM).
    pub fn reset(&mut self, stream: u32, code: u32) {
        if self.streams.remove(&stream).is_some() {
            self.frame(RST_STREAM, 0, stream, &code.to_be_bytes());
        }
    }

    fn reap(&mut self, stream: u32) {
        if let Some(s) = self.streams.get(&stream) {
            if s.local_closed && s.remote_closed && s.pending.is_empty() {
                self.streams.remove(&stream);
            }
        }
    }

    /// Send queued data as far as the windows allow.
    fn flush(&mut self) {
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            loop {
                let max_frame = self.peer_max_frame;
                let conn_window = self.conn_send_window;
                let Some(s) = self.streams.get_mut(&id) else { break };
                if s.local_closed {
                    break;
                }
                let room = conn_window.min(s.send_window).max(0) as usize;
                let n = s.pending.len().min(room).min(max_frame);
                if n == 0 && !s.pending.is_empty() {
                    break;
                }
                if n == 0 && !s.pending_end {
                    break;
                }
                let chunk: Vec<u8> = s.pending.drain(..n).collect();
                s.send_window -= n as i64;
                let drained = s.pending.is_empty();
                let trailers = if drained { s.pending_trailers.take() } else { None };
                let end_here = drained && s.pending_end && trailers.is_none();
                if drained && s.pending_end {
                    s.local_closed = true;
                }
                self.conn_send_window -= n as i64;
                if n > 0 || end_here {
                    self.frame(DATA, if end_here { END_STREAM } else { 0 }, id, &chunk);
                }
                if let Some(t) = trailers {
                    self.header_frames(id, &t, true);
                }
                if drained {
                    self.reap(id);
                    break;
                }
            }
        }
    }

    /// Feed bytes read from the transport. On error the connection is over (a GOAWAY is
    /// queued: write the output, then close).
    pub fn recv(&mut self, data: &[u8]) -> Result<(), H2Error> {
        if self.closed {
            return Ok(());
        }
        self.inbuf.extend_from_slice(data);
        match self.process() {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn process(&mut self) -> Result<(), H2Error> {
        if self.awaiting_preface {
            let n = self.inbuf.len().min(PREFACE.len());
            if self.inbuf[..n] != PREFACE[..n] {
                return Err(err(code::PROTOCOL_ERROR, "bad connection preface"));
            }
            if n < PREFACE.len() {
                return Ok(());
            }
            self.inbuf.drain(..PREFACE.len());
            self.awaiting_preface = false;
        }
        let mut pos = 0;
        while self.inbuf.len() - pos >= 9 && !self.closed {
            let h = &self.inbuf[pos..pos + 9];
            let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
            let (kind, flags) = (h[3], h[4]);
            let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            // We never raise SETTINGS_MAX_FRAME_SIZE above the default.
            if len > DEFAULT_FRAME {
                return Err(err(code::FRAME_SIZE_ERROR, "frame larger than our maximum"));
            }
            if self.inbuf.len() - pos < 9 + len {
                break;
            }
            let payload = self.inbuf[pos + 9..pos + 9 + len].to_vec();
            pos += 9 + len;
            self.frame_in(kind, flags, stream, payload)?;
        }
        self.inbuf.drain(..pos);
        self.flush();
        Ok(())
    }

    fn frame_in(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: Vec<u8>,
    ) -> Result<(), H2Error> {
        if self.awaiting_settings {
            if kind != SETTINGS || flags & ACK != 0 {
                return Err(err(code::PROTOCOL_ERROR, "first frame is not SETTINGS"));
            }
            self.awaiting_settings = false;
        }
        if let Some((cs, _, _)) = &self.continuation {
            if kind != CONTINUATION || stream != *cs {
                return Err(err(code::PROTOCOL_ERROR, "header block interrupted"));
            }
        }
        match kind {
            DATA => self.data_in(flags, stream, payload),
            HEADERS => self.headers_in(flags, stream, payload),
            PRIORITY => {
                if stream == 0 || payload.len() != 5 {
                    return Err(err(code::PROTOCOL_ERROR, "bad PRIORITY"));
                }
                Ok(())
            }
            RST_STREAM => {
                if stream == 0 || payload.len() != 4 {
                    return Err(err(code::PROTOCOL_ERROR, "bad RST_STREAM"));
                }
                if self.is_idle(stream) {
                    return Err(err(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
                }
                let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if self.streams.remove(&stream).is_some() {
                    self.events.push_back(Event::Reset { stream, code });
                }
                Ok(())
            }
            SETTINGS => self.settings_in(flags, stream, &payload),
            PUSH_PROMISE => Err(err(code::PROTOCOL_ERROR, "PUSH_PROMISE is not accepted")),
            PING => {
                if stream != 0 || payload.len() != 8 {
                    return Err(err(code::FRAME_SIZE_ERROR, "bad PING"));
                }
                let mut p = [0u8; 8];
                p.copy_from_slice(&payload);
                if flags & ACK != 0 {
                    self.events.push_back(Event::PingAck(p));
                } else {
                    self.frame(PING, ACK, 0, &p);
                }
                Ok(())
            }
            GOAWAY => {
                if stream != 0 || payload.len() < 8 {
                    return Err(err(code::PROTOCOL_ERROR, "bad GOAWAY"));
                }
                let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    & 0x7fff_ffff;
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                // Our streams above `last` were never processed.
                let mine = |id: &u32| (*id % 2 == 1) == (self.role == Role::Client);
                let dropped: Vec<u32> =
                    self.streams.keys().copied().filter(|id| *id > last && mine(id)).collect();
                for id in dropped {
                    self.streams.remove(&id);
                    self.events.push_back(Event::Reset { stream: id, code: code::REFUSED_STREAM });
                }
                self.going_away = true;
                self.events.push_back(Event::GoAway { last_stream: last, code });
                Ok(())
            }
            WINDOW_UPDATE => self.window_update_in(stream, &payload),
            CONTINUATION => {
                let Some((cs, mut block, end)) = self.continuation.take() else {
                    return Err(err(code::PROTOCOL_ERROR, "CONTINUATION without HEADERS"));
                };
                if block.len() + payload.len() > self.cfg.max_header_list {
                    return Err(err(code::ENHANCE_YOUR_CALM, "header block too large"));
                }
                block.extend_from_slice(&payload);
                if flags & END_HEADERS != 0 {
                    self.header_block(cs, block, end)
                } else {
                    self.continuation = Some((cs, block, end));
                    Ok(())
                }
            }
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// A stream id neither side has used yet.
    fn is_idle(&self, stream: u32) -> bool {
        let peer_initiated = (stream % 2 == 1) == (self.role == Role::Server);
        if peer_initiated {
            stream > self.last_peer_stream
        } else {
            stream >= self.next_stream
        }
    }

    fn strip_padding(flags: u8, mut payload: Vec<u8>) -> Result<Vec<u8>, H2Error> {
        if flags & PADDED != 0 {
            let pad = usize::from(
                *payload.first().ok_or_else(|| err(code::PROTOCOL_ERROR, "missing pad length"))?,
            );
            if pad + 1 > payload.len() {
                return Err(err(code::PROTOCOL_ERROR, "padding exceeds the frame"));
            }
            payload.truncate(payload.len() - pad);
            payload.remove(0);
        }
        Ok(payload)
    }

    fn data_in(&mut self, flags: u8, stream: u32, payload: Vec<u8>) -> Result<(), H2Error> {
        if stream == 0 || self.is_idle(stream) {
            return Err(err(code::PROTOCOL_ERROR, "DATA on stream 0 or an idle stream"));
        }
        // Flow control counts the whole frame, padding included.
        let len = payload.len() as i64;
        self.conn_recv_window -= len;
        if self.conn_recv_window < 0 {
            return Err(err(code::FLOW_CONTROL_ERROR, "peer overran the connection window"));
        }
        let full = i64::from(self.cfg.conn_window).max(DEFAULT_WINDOW);
        if self.conn_recv_window < full / 2 {
            let inc = full - self.conn_recv_window;
            self.frame(WINDOW_UPDATE, 0, 0, &(inc as u32).to_be_bytes());
            self.conn_recv_window = full;
        }
        let data = Self::strip_padding(flags, payload)?;
        let end = flags & END_STREAM != 0;
        let stream_full = i64::from(self.cfg.stream_window);
        let Some(s) = self.streams.get_mut(&stream) else {
            // A stream we already closed or reset: frames in flight are dropped.
            return Ok(());
        };
        if s.remote_closed {
            self.reset(stream, code::STREAM_CLOSED);
            return Ok(());
        }
        s.recv_window -= len;
        if s.recv_window < 0 {
            self.reset(stream, code::FLOW_CONTROL_ERROR);
            self.events.push_back(Event::Reset { stream, code: code::FLOW_CONTROL_ERROR });
            return Ok(());
        }
        let mut update = None;
        if end {
            s.remote_closed = true;
        } else if s.recv_window < stream_full / 2 {
            update = Some(stream_full - s.recv_window);
            s.recv_window = stream_full;
        }
        if let Some(inc) = update {
            self.frame(WINDOW_UPDATE, 0, stream, &(inc as u32).to_be_bytes());
        }
        self.events.push_back(Event::Data { stream, data, end_stream: end });
        self.reap(stream);
        Ok(())
    }

    fn headers_in(&mut self, flags: u8, stream: u32, payload: Vec<u8>) -> Result<(), H2Error> {
        if stream == 0 {
            return Err(err(code::PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        let mut block = Self::strip_padding(flags, payload)?;
        if flags & PRIORITY_FLAG != 0 {
            if block.len() < 5 {
                return Err(err(code::PROTOCOL_ERROR, "short priority fields"));
            }
            block.drain(..5);
        }
        if block.len() > self.cfg.max_header_list {
            return Err(err(code::ENHANCE_YOUR_CALM, "header block too large"));
        }
        let end = flags & END_STREAM != 0;
        if flags & END_HEADERS != 0 {
            self.header_block(stream, block, end)
        } else {
            self.continuation = Some((stream, block, end));
            Ok(())
        }
    }

    fn header_block(&mut self, stream: u32, block: Vec<u8>, end: bool) -> Result<(), H2Error> {
        // Decode even for streams we no longer track: the HPACK table must stay in step.
        let fields = self
            .decoder
            .decode(&block, self.cfg.max_header_list)
            .map_err(|_| err(code::COMPRESSION_ERROR, "header block does not decode"))?;
        let peer_initiated = (stream % 2 == 1) == (self.role == Role::Server);
        if !self.streams.contains_key(&stream) {
            if !peer_initiated {
                if self.is_idle(stream) {
                    return Err(err(code::PROTOCOL_ERROR, "HEADERS on an idle stream"));
                }
                return Ok(());
            }
            if self.role == Role::Client {
                return Err(err(code::PROTOCOL_ERROR, "server opened a stream"));
            }
            if stream <= self.last_peer_stream {
                // A stream we reset or finished: ignore.
                return Ok(());
            }
            self.last_peer_stream = stream;
            if self.closed || self.going_away {
                return Ok(());
            }
            let open = self.count_streams(true);
            if open >= self.cfg.max_concurrent_streams as usize {
                self.frame(RST_STREAM, 0, stream, &code::REFUSED_STREAM.to_be_bytes());
                return Ok(());
            }
            let s = self.new_stream();
            self.streams.insert(stream, s);
        }
        if let Some(s) = self.streams.get_mut(&stream) {
            if s.remote_closed {
                self.reset(stream, code::STREAM_CLOSED);
                return Ok(());
            }
            s.remote_closed = end;
        }
        self.events.push_back(Event::Headers { stream, fields, end_stream: end });
        self.reap(stream);
        Ok(())
    }

    fn settings_in(&mut self, flags: u8, stream: u32, payload: &[u8]) -> Result<(), H2Error> {
        if stream != 0 {
            return Err(err(code::PROTOCOL_ERROR, "SETTINGS on a stream"));
        }
        if flags & ACK != 0 {
            if !payload.is_empty() {
                return Err(err(code::FRAME_SIZE_ERROR, "SETTINGS ACK with a payload"));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(err(code::FRAME_SIZE_ERROR, "SETTINGS length"));
        }
        for s in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            match id {
                // HEADER_TABLE_SIZE: our encoder never indexes, nothing to adapt.
                0x1 => {}
                0x2 if v > 1 => return Err(err(code::PROTOCOL_ERROR, "ENABLE_PUSH")),
                0x3 => self.peer_max_concurrent = v,
                0x4 => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(err(code::FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE"));
                    }
                    let delta = i64::from(v) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(v);
                    for st in self.streams.values_mut() {
                        st.send_window += delta;
                        if st.send_window > MAX_WINDOW {
                            return Err(err(code::FLOW_CONTROL_ERROR, "window overflow"));
                        }
                    }
                }
                0x5 => {
                    if !(DEFAULT_FRAME as u32..=(1 << 24) - 1).contains(&v) {
                        return Err(err(code::PROTOCOL_ERROR, "MAX_FRAME_SIZE"));
                    }
                    self.peer_max_frame = v as usize;
                }
                // MAX_HEADER_LIST_SIZE is advisory; our header blocks are small.
                _ => {}
            }
        }
        self.frame(SETTINGS, ACK, 0, &[]);
        Ok(())
    }

    fn window_update_in(&mut self, stream: u32, payload: &[u8]) -> Result<(), H2Error> {
        if payload.len() != 4 {
            return Err(err(code::FRAME_SIZE_ERROR, "bad WINDOW_UPDATE"));
        }
        let inc = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
        );
        if stream == 0 {
            if inc == 0 {
                return Err(err(code::PROTOCOL_ERROR, "zero WINDOW_UPDATE"));
            }
            self.conn_send_window += inc;
            if self.conn_send_window > MAX_WINDOW {
                return Err(err(code::FLOW_CONTROL_ERROR, "connection window overflow"));
            }
            return Ok(());
        }
        if self.is_idle(stream) {
            return Err(err(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let Some(s) = self.streams.get_mut(&stream) else { return Ok(()) };
        if inc == 0 {
            self.reset(stream, code::PROTOCOL_ERROR);
            self.events.push_back(Event::Reset { stream, code: code::PROTOCOL_ERROR });
            return Ok(());
        }
        s.send_window += inc;
        if s.send_window > MAX_WINDOW {
            self.reset(stream, code::FLOW_CONTROL_ERROR);
            self.events.push_back(Event::Reset { stream, code: code::FLOW_CONTROL_ERROR });
        }
        Ok(())
    }
}

/// The value of the first field named `name`.
pub fn field<'a>(fields: &'a [Field], name: &str) -> Option<&'a [u8]> {
    fields.iter().find(|(n, _)| n == name.as_bytes()).map(|(_, v)| v.as_slice())
}

#[cfg(test)]
mod tests;
