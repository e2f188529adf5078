// SPDX-License-Identifier: Apache-2.0
use super::*;

fn pair(client: Config, server: Config) -> (Connection, Connection) {
    (Connection::new(Role::Client, client), Connection::new(Role::Server, server))
}

/// Shuttle bytes both ways until neither side has output.
fn pump(a: &mut Connection, b: &mut Connection) {
    for _ in 0..1000 {
        let (x, y) = (a.take_output(), b.take_output());
        if x.is_empty() && y.is_empty() {
            return;
        }
        b.recv(&x).unwrap();
        a.recv(&y).unwrap();
    }
    panic!("no quiescence");
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn f(n: &str, v: &str) -> Field {
    (n.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn request_response_with_trailers() {
    let (mut c, mut s) = pair(Config::default(), Config::default());
    let id = c.open_stream(&[(":method", "POST"), (":path", "/x")], false).unwrap();
    assert_eq!(id, 1);
    c.send_data(id, b"hello", true).unwrap();
    pump(&mut c, &mut s);
    assert_eq!(
        events(&mut s),
        vec![
            Event::Headers {
                stream: 1,
                fields: vec![f(":method", "POST"), f(":path", "/x")],
                end_stream: false
            },
            Event::Data { stream: 1, data: b"hello".to_vec(), end_stream: true },
        ]
    );
    s.send_headers(1, &[(":status", "200")], false).unwrap();
    s.send_data(1, b"world", false).unwrap();
    s.send_headers(1, &[("grpc-status", "0")], true).unwrap();
    pump(&mut c, &mut s);
    assert_eq!(
        events(&mut c),
        vec![
            Event::Headers { stream: 1, fields: vec![f(":status", "200")], end_stream: false },
            Event::Data { stream: 1, data: b"world".to_vec(), end_stream: false },
            Event::Headers { stream: 1, fields: vec![f("grpc-status", "0")], end_stream: true },
        ]
    );
    assert_eq!(c.open_streams(), 0);
    assert_eq!(s.open_streams(), 0);
    assert_eq!(c.open_stream(&[(":path", "/y")], true).unwrap(), 3);
}

#[test]
fn flow_control_both_directions() {
    // Small windows on both sides: 300 KB needs many WINDOW_UPDATEs.
    let small = Config { stream_window: 65_535, conn_window: 65_535, ..Config::default() };
    let (mut c, mut s) = pair(small, small);
    let id = c.open_stream(&[(":path", "/big")], false).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    c.send_data(id, &big, true).unwrap();
    // Before the server's window updates only the default window's worth leaves.
    assert!(c.queued(id) >= 300_000 - 65_535);
    pump(&mut c, &mut s);
    let mut got = Vec::new();
    let mut ended = false;
    for e in events(&mut s) {
        if let Event::Data { data, end_stream, .. } = e {
            got.extend(data);
            ended |= end_stream;
        }
    }
    assert!(ended);
    assert_eq!(got, big);
    s.send_headers(id, &[(":status", "200")], false).unwrap();
    s.send_data(id, &big, false).unwrap();
    s.send_headers(id, &[("grpc-status", "0")], true).unwrap();
    pump(&mut c, &mut s);
    let ev = events(&mut c);
    let body: Vec<u8> = ev
        .iter()
        .filter_map(|e| if let Event::Data { data, .. } = e { Some(data.clone()) } else { None })
        .flatten()
        .collect();
    assert_eq!(body, big);
    assert!(matches!(ev.last(), Some(Event::Headers { end_stream: true, .. })));
}

#[test]
fn continuation_ping_reset_goaway() {
    let (mut c, mut s) = pair(Config::default(), Config::default());
    let long = "v".repeat(40_000);
    let id = c.open_stream(&[(":path", "/"), ("x-long", long.as_str())], true).unwrap();
    pump(&mut c, &mut s);
    match &events(&mut s)[..] {
        [Event::Headers { fields, end_stream: true, .. }] => assert_eq!(fields[1].1.len(), 40_000),
        e => panic!("{e:?}"),
    }
    c.ping(*b"12345678");
    pump(&mut c, &mut s);
    assert_eq!(events(&mut c), vec![Event::PingAck(*b"12345678")]);
    s.reset(id, code::CANCEL);
    pump(&mut c, &mut s);
    assert_eq!(events(&mut c), vec![Event::Reset { stream: id, code: code::CANCEL }]);
    let id2 = c.open_stream(&[(":path", "/")], true).unwrap();
    // The server says goodbye before seeing stream 3.
    s.go_away(code::NO_ERROR);
    c.recv(&s.take_output()).unwrap();
    assert_eq!(
        events(&mut c),
        vec![
            Event::Reset { stream: id2, code: code::REFUSED_STREAM },
            Event::GoAway { last_stream: 1, code: 0 }
        ]
    );
}

#[test]
fn graceful_go_away_lets_open_streams_finish() {
    let (mut c, mut s) = pair(Config::default(), Config::default());
    let id = c.open_stream(&[(":path", "/watch")], true).unwrap();
    pump(&mut c, &mut s);
    events(&mut s);
    s.send_headers(id, &[(":status", "200")], false).unwrap();
    s.go_away(code::NO_ERROR);
    assert!(s.is_going_away() && !s.is_closed());
    pump(&mut c, &mut s);
    assert_eq!(events(&mut c)[1], Event::GoAway { last_stream: 1, code: 0 });
    // No new stream; the open one still completes, in both directions of flow control.
    assert!(c.open_stream(&[(":path", "/")], true).is_err());
    s.send_data(id, &vec![7; 200_000], false).unwrap();
    s.send_headers(id, &[("grpc-status", "0")], true).unwrap();
    pump(&mut c, &mut s);
    let ev = events(&mut c);
    assert!(matches!(ev.last(), Some(Event::Headers { end_stream: true, .. })));
    assert_eq!(s.open_streams(), 0);
}

#[test]
fn concurrency_limit_counts_half_closed_streams() {
    // A server stream whose request is complete (half-closed remote, a Watch) still counts.
    let (mut c, mut s) =
        pair(Config::default(), Config { max_concurrent_streams: 1, ..Config::default() });
    let first = c.open_stream(&[(":path", "/watch")], true).unwrap();
    pump(&mut c, &mut s);
    // The client now knows the limit and refuses by itself; a raw second request is refused
    // by the server.
    assert_eq!(c.open_stream(&[(":path", "/")], true).unwrap_err().code, code::REFUSED_STREAM);
    s.recv(&raw_frame(HEADERS, END_HEADERS | END_STREAM, 3, &[0x82])).unwrap();
    let out = s.take_output();
    assert_eq!((out[3], u32::from_be_bytes([out[5], out[6], out[7], out[8]])), (RST_STREAM, 3));
    assert_eq!(events(&mut s).len(), 1);
    let _ = first;
}

#[test]
fn concurrency_limit_refuses_streams() {
    let (mut c, mut s) =
        pair(Config::default(), Config { max_concurrent_streams: 1, ..Config::default() });
    pump(&mut c, &mut s);
    c.open_stream(&[(":path", "/")], false).unwrap();
    // The client respects the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    assert_eq!(c.open_stream(&[(":path", "/")], false).unwrap_err().code, code::REFUSED_STREAM);
}

fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    v.push(kind);
    v.push(flags);
    v.extend_from_slice(&stream.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn server_after_preface() -> Connection {
    let mut s = Connection::new(Role::Server, Config::default());
    let mut input = PREFACE.to_vec();
    input.extend(raw_frame(SETTINGS, 0, 0, &[]));
    s.recv(&input).unwrap();
    s.take_output();
    s
}

#[test]
fn hostile_input_is_a_connection_error() {
    let mut s = Connection::new(Role::Server, Config::default());
    assert_eq!(s.recv(b"GET / HTTP/1.1\r\n").unwrap_err().code, code::PROTOCOL_ERROR);
    assert!(s.is_closed());
    // A GOAWAY went out.
    let out = s.take_output();
    assert_eq!(out[out.len() - 17 + 3], GOAWAY);

    let mut s = Connection::new(Role::Server, Config::default());
    let mut input = PREFACE.to_vec();
    input.extend(raw_frame(PING, 0, 0, &[0; 8]));
    assert_eq!(s.recv(&input).unwrap_err().reason, "first frame is not SETTINGS");

    let cases: Vec<(Vec<u8>, u32)> = vec![
        (raw_frame(DATA, 0, 1, b"x"), code::PROTOCOL_ERROR),
        (raw_frame(DATA, 0, 0, &vec![0; 16_385]), code::FRAME_SIZE_ERROR),
        (
            raw_frame(HEADERS, 0, 1, &[0x82])
                .into_iter()
                .chain(raw_frame(PING, 0, 0, &[0; 8]))
                .collect(),
            code::PROTOCOL_ERROR,
        ),
        (raw_frame(HEADERS, END_HEADERS, 1, &[0x80]), code::COMPRESSION_ERROR),
        (raw_frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]), code::PROTOCOL_ERROR),
        (raw_frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]), code::FLOW_CONTROL_ERROR),
        (raw_frame(WINDOW_UPDATE, 0, 0, &[0x7f, 0xff, 0xff, 0xff]), code::FLOW_CONTROL_ERROR),
        (raw_frame(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]), code::PROTOCOL_ERROR),
        (raw_frame(PING, 0, 0, &[0; 7]), code::FRAME_SIZE_ERROR),
        (raw_frame(CONTINUATION, END_HEADERS, 1, &[0x82]), code::PROTOCOL_ERROR),
        (raw_frame(HEADERS, END_HEADERS | PADDED, 1, &[5, 0x82]), code::PROTOCOL_ERROR),
        (raw_frame(PUSH_PROMISE, 0, 1, &[0; 4]), code::PROTOCOL_ERROR),
        (raw_frame(HEADERS, END_HEADERS, 2, &[0x82]), code::PROTOCOL_ERROR),
    ];
    for (i, (input, code)) in cases.into_iter().enumerate() {
        let mut s = server_after_preface();
        assert_eq!(s.recv(&input).map_err(|e| e.code), Err(code), "case {i}");
    }

    // Header blocks beyond the list bound, in one frame or through CONTINUATIONs.
    let mut s = server_after_preface();
    let mut big = raw_frame(HEADERS, 0, 1, &vec![0x82; 16_000]);
    for _ in 0..5 {
        big.extend(raw_frame(CONTINUATION, 0, 1, &vec![0x82; 16_000]));
    }
    assert_eq!(s.recv(&big).unwrap_err().code, code::ENHANCE_YOUR_CALM);
}

#[test]
fn byte_at_a_time_and_unknown_frames() {
    let (mut c, mut s) = pair(Config::default(), Config::default());
    c.open_stream(&[(":path", "/")], true).unwrap();
    let mut out = c.take_output();
    out.extend(raw_frame(0xfa, 0, 0, b"ignored"));
    for b in out {
        s.recv(&[b]).unwrap();
    }
    assert_eq!(
        events(&mut s),
        vec![Event::Headers { stream: 1, fields: vec![f(":path", "/")], end_stream: true }]
    );
}

#[test]
fn queued_total_counts_every_stream_behind_a_closed_window() {
    let client = Config { stream_window: 0, ..Config::default() };
    let (mut c, mut s) = pair(client, Config::default());
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = c.open_stream(&[(":method", "POST"), (":path", "/x")], true).unwrap();
        ids.push(id);
    }
    pump(&mut c, &mut s);
    events(&mut s);
    for &id in &ids {
        s.send_headers(id, &[(":status", "200")], false).unwrap();
        s.send_data(id, &[7; 1000], false).unwrap();
        // Trailers wait behind the data; the call is done as far as the server cares.
        s.send_headers(id, &[("grpc-status", "0")], true).unwrap();
    }
    assert_eq!(s.queued(ids[0]), 1000);
    let total = s.queued_total();
    assert!(total > 3000, "data and the trailers waiting behind it: {total}");
    assert!(s.output_len() > 0, "the heads are not flow-controlled");
    s.reset(ids[0], code::CANCEL);
    assert!(s.queued_total() <= total - 1000, "a reset stream's queue is dropped");
}
