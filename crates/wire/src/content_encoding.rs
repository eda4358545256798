//! HTTP `Content-Encoding` of request bodies, as the servers accept them: gzip (what
//! Telegraf sends with `content_encoding = "gzip"` and Loki clients may send), deflate, or
//! none. Shared by the twin's write and push endpoints; bounded, so a small compressed body
//! cannot grow without limit.

use std::io::Read;

/// Undoes a `Content-Encoding` (gzip, deflate, or none).
pub fn decompress(content_encoding: &str, body: &[u8], max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let limit = max as u64 + 1;
    match content_encoding.trim().to_ascii_lowercase().as_str() {
        "" | "identity" => return Ok(body.to_vec()),
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(body)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| format!("gzip: invalid header or data ({e})"))?,
        "deflate" => flate2::read::ZlibDecoder::new(body)
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| format!("deflate: {e}"))?,
        other => return Err(format!("Content-Encoding {other:?} not supported")),
    };
    if out.len() > max {
        return Err(format!("message larger than max ({} vs {max})", out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_bodies_are_inflated_and_bounded() {
        use std::io::Write;
        let body = b"{\"streams\":[]}".repeat(100);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&body).unwrap();
        let zipped = gz.finish().unwrap();
        assert_eq!(decompress("gzip", &zipped, 1 << 20).unwrap(), body);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(&body).unwrap();
        assert_eq!(decompress("deflate", &z.finish().unwrap(), 1 << 20).unwrap(), body);
        assert_eq!(decompress("", b"plain", 10).unwrap(), b"plain");
        assert_eq!(decompress("gzip", &zipped, 10).unwrap_err(), "message larger than max (11 vs 10)");
        assert_eq!(
            decompress("gzip", b"not gzip", 1 << 20).unwrap_err(),
            "gzip: invalid header or data (unexpected end of file)"
        );
        assert_eq!(decompress("br", b"x", 10).unwrap_err(), "Content-Encoding \"br\" not supported");
    }
}
