//! `prom::` — Prometheus text exposition: scrape an endpoint, then read values from it.
//! A scrape is a value of its own (`Scrape`) so two scrapes can be compared, as the log
//! store's "counter non-zero and increasing" check does.

use std::sync::Arc;

use rhai::{Array, Dynamic, Map, Module};

use super::{Host, HostResult, fail};
use crate::http_client::Request;
use crate::register;
use crate::wire::exposition::{self, Exposition};

/// One scrape: what the endpoint exposed, or why nothing could be read.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub url: String,
    pub result: Result<Arc<Exposition>, String>,
}

pub fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "scrape",
        ["url: &str", "Scrape"],
        "/// GETs a metrics endpoint and parses its exposition text; never throws. Read it with\n\
         /// `prom::value`; `prom::ok(s)` and `prom::error(s)` tell whether the scrape worked.",
        move |url: &str| scrape(&h, url)
    );
    register!(
        &mut m,
        "value",
        ["scrape: Scrape", "name: &str", "f64"],
        "/// The sum of every sample named `name` (0.0 when absent). Throws when the scrape failed.",
        |s: &mut Scrape, name: &str| value(s, name, &Map::new())
    );
    register!(
        &mut m,
        "value",
        ["scrape: Scrape", "name: &str", "labels: Map", "f64"],
        "/// The sum of the samples named `name` whose labels include all of `labels`.",
        |s: &mut Scrape, name: &str, labels: Map| value(s, name, &labels)
    );
    register!(
        &mut m,
        "ok",
        ["scrape: Scrape", "bool"],
        "/// Whether the scrape got a parsable exposition.",
        |s: &mut Scrape| s.result.is_ok()
    );
    register!(
        &mut m,
        "error",
        ["scrape: Scrape", "String"],
        "/// Why the scrape failed (empty when it worked).",
        |s: &mut Scrape| s.result.as_ref().err().cloned().unwrap_or_default()
    );
    register!(
        &mut m,
        "samples",
        ["scrape: Scrape", "name: &str", "Array"],
        "/// Every sample named `name`: `[#{labels, value}]`.",
        |s: &mut Scrape, name: &str| -> HostResult<Array> {
            let e = s.result.as_ref().map_err(|e| fail(format!("scrape of {} failed: {e}", s.url)))?;
            Ok(e.samples
                .iter()
                .filter(|x| x.name == name)
                .map(|x| {
                    let labels: Map = x.labels.iter().map(|(k, v)| (k.into(), v.clone().into())).collect();
                    let mut m = Map::new();
                    m.insert("labels".into(), labels.into());
                    m.insert("value".into(), x.value.into());
                    Dynamic::from_map(m)
                })
                .collect())
        }
    );
    m
}

fn scrape(host: &Host, url: &str) -> HostResult<Scrape> {
    let result = match host.send(Request::new(reqwest::Method::GET, url))? {
        Err(reason) => Err(reason),
        Ok(r) if r.status != 200 => Err(r.summary()),
        Ok(r) => {
            exposition::parse(&r.body).map(Arc::new).map_err(|e| format!("not exposition text ({e}): {}", r.summary()))
        }
    };
    Ok(Scrape { url: url.to_string(), result })
}

fn value(s: &Scrape, name: &str, labels: &Map) -> HostResult<f64> {
    let e = s.result.as_ref().map_err(|e| fail(format!("scrape of {} failed: {e}", s.url)))?;
    let want: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), super::core::text(v))).collect();
    Ok(e.sum(name, &want).unwrap_or(0.0))
}
