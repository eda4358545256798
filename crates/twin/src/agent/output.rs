//! The agent twin's `[[outputs.influxdb_v2]]`, as Telegraf v1.32.0 writes
//! (`plugins/outputs/influxdb_v2/http.go` `writeBatch`, `influxdb_v2.go` `Write`):
//!
//! - 2xx: written.
//! - 400, 422, 406 and any other 4xx but 401/403: `Failed to write metric to BUCKET (will be
//!   dropped: STATUS): DESC`, and the write counts as done (the batch leaves the buffer).
//! - 401, 403: the error `failed to write metric to BUCKET (STATUS): DESC`: the batch stays.
//! - 429, 502, 503, 504: `W! … Failed to write to BUCKET; will retry in D. (STATUS)` and the
//!   error `waiting D for server (BUCKET) before sending metric again`: the batch stays.
//! - other statuses (5xx): the error `STATUS: DESC`: the batch stays.
//!
//! `DESC` is the body's `code: message` (`genericRespError.Error()`). Each failed URL is
//! logged as `When writing to [URL/api/v2/write]: ERROR`; when every URL failed, `Write`
//! returns `failed to send metrics to any configured server(s)`.

use std::io::Write as _;

use reqwest::StatusCode;

use super::config::Output;
use super::log::TelegrafLog;
use crate::logger::Level;

/// The plugin's name in its log lines.
pub(super) const PLUGIN: &str = "outputs.influxdb_v2";

/// What one URL's write came to.
enum Sent {
    Done,
    Failed(String),
}

/// The error text of a refused write and whether the batch is dropped (`None`: kept).
fn refused(status: StatusCode, desc: &str, bucket: &str, retries: u32, log: &TelegrafLog) -> Sent {
    let status_text = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
    match status.as_u16() {
        401 | 403 => Sent::Failed(format!("failed to write metric to {bucket} ({status_text}): {desc}")),
        429 | 502 | 503 | 504 => {
            // Telegraf's back-off: retries²/40 seconds (the twin ignores Retry-After).
            let wait = std::time::Duration::from_secs_f64((f64::from(retries) * f64::from(retries) / 40.0).max(0.0));
            let wait = crate::go_time::duration(wait);
            log.log(
                Level::Warn,
                Some(PLUGIN),
                &format!("Failed to write to {bucket}; will retry in {wait}. ({status_text})"),
            );
            Sent::Failed(format!("waiting {wait} for server ({bucket}) before sending metric again"))
        }
        400..=499 => {
            let line = format!("Failed to write metric to {bucket} (will be dropped: {status_text}): {desc}");
            log.log(Level::Error, Some(PLUGIN), &line);
            Sent::Done
        }
        _ => Sent::Failed(format!("{status_text}: {desc}")),
    }
}

/// Writes `body` (line protocol) with one `[[outputs.influxdb_v2]]`: the URLs in turn until
/// one takes it. `Err` is `Write`'s error, the batch then stays buffered.
pub(super) async fn write(
    client: &reqwest::Client,
    output: &Output,
    body: &str,
    retries: u32,
    log: &TelegrafLog,
) -> Result<(), String> {
    for url in &output.urls {
        let target = format!("{}/api/v2/write", url.trim_end_matches('/'));
        match send(client, output, &target, body, retries, log).await {
            Sent::Done => return Ok(()),
            Sent::Failed(e) => log.log(Level::Error, Some(PLUGIN), &format!("When writing to [{target}]: {e}")),
        }
    }
    Err("failed to send metrics to any configured server(s)".into())
}

async fn send(
    client: &reqwest::Client,
    output: &Output,
    target: &str,
    body: &str,
    retries: u32,
    log: &TelegrafLog,
) -> Sent {
    let mut request = client
        .post(target)
        .query(&[("bucket", output.bucket.as_str()), ("org", output.organization.as_str())])
        .timeout(output.timeout)
        .header("content-type", "text/plain; charset=utf-8");
    if !output.token.is_empty() {
        let Ok(mut value) = reqwest::header::HeaderValue::from_str(&format!("Token {}", output.token.expose())) else {
            return Sent::Failed("the token has characters a header cannot carry".into());
        };
        value.set_sensitive(true);
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    request = if output.gzip {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = gz.write_all(body.as_bytes());
        request.header("content-encoding", "gzip").body(gz.finish().unwrap_or_default())
    } else {
        request.body(body.to_string())
    };
    match request.send().await {
        Ok(r) if r.status().is_success() => Sent::Done,
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
            let desc = json
                .as_ref()
                .map(|j| format!("{}: {}", j["code"].as_str().unwrap_or(""), j["message"].as_str().unwrap_or("")))
                .unwrap_or_else(|| opsbook_wire::excerpt(&text, 200));
            refused(status, &desc, &output.bucket, retries, log)
        }
        Err(e) => {
            let mut reason = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                reason = format!("{reason}: {s}");
                source = s.source();
            }
            let full = e.url().map_or_else(|| target.to_string(), |u| u.to_string());
            Sent::Failed(format!("Post {full:?}: {reason}"))
        }
    }
}
