// SPDX-License-Identifier: Apache-2.0
//! HTTP/1.1 for the gateway, without I/O (RFC 9112): [`post`] writes a request with a
//! `Content-Length` body (the gateway answers a streaming call only once the request body is
//! complete). Responses are read by keelson's one HTTP/1 response parser,
//! [`base::http1::ResponseDecoder`], which hands the de-chunked body out as it arrives, so a
//! watch's frames can be read before the response ends.

pub use base::http1::{HttpError, ResponseDecoder, MAX_HEADER};

/// A POST of `body` to `path` on a kept-alive connection.
pub fn post(host: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: keelson/{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A GET (the `/health` endpoint is not on the gateway's POST mux).
pub fn get(host: &str, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: keelson/{}\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_carries_its_length() {
        let r = post("127.0.0.1:2379", "/v3/kv/range", b"{}");
        let text = String::from_utf8(r).unwrap();
        assert!(text.starts_with("POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:2379\r\n"));
        assert!(text.ends_with("Content-Length: 2\r\n\r\n{}"));
    }
}
