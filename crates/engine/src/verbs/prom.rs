//! `prom::` — Prometheus text exposition. A scrape is a probe like the others (`.ok`,
//! `.status`, `.detail`, `.elapsed_ms`) that also holds what the endpoint exposed, read with
//! `.value(name)`, `.has(name)` and `.samples(name)`. It is a value of its own so two scrapes
//! can be compared, as the log store's "counter non-zero and increasing" check does.

use std::sync::Arc;

use rhai::{Array, Dynamic, Engine, FuncRegistration, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::values::{Probe, record, text};
use crate::register;
use opsbook_wire::exposition::{self, Exposition};
use opsbook_world::Request;

/// One scrape: the probe's outcome, and what the endpoint exposed when it worked.
#[derive(Debug, Clone)]
pub(crate) struct Scrape {
    pub url: String,
    pub probe: Probe,
    pub exposition: Option<Arc<Exposition>>,
}

/// A sample as scripts see it.
#[derive(Serialize)]
struct SampleRecord<'a> {
    labels: std::collections::BTreeMap<&'a str, &'a str>,
    value: f64,
}

/// Reads one property of a scrape.
type Getter = fn(&mut Scrape) -> Dynamic;

/// Registers the `Scrape` type (the `prom::` namespace is `module`).
pub(crate) fn register_types(engine: &mut Engine) {
    engine.register_type_with_name::<Scrape>("Scrape");
}

/// Registers a function callable as a method (`s.value(…)`) and as `prom::value(s, …)`.
macro_rules! register_method {
    ($module:expr, $name:expr, [$($param:expr),* $(,)?], $doc:expr, $func:expr $(,)?) => {
        FuncRegistration::new($name)
            .in_global_namespace()
            .with_params_info([$($param),*])
            // A scrape's methods only read what was scraped.
            .with_comments([$doc.to_string(), $crate::verbs::verb::Effect::Reads.doc_line()])
            .set_into_module($module, $func)
    };
}

/// The `prom::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "scrape",
        Reads,
        ["url: &str", "Scrape"],
        "/// GETs a metrics endpoint and parses its exposition text; never throws. The scrape is a\n\
         /// probe: `s.ok`, `s.status`, `s.detail`, `s.elapsed_ms`; read values with `s.value(name)`.",
        "prom::scrape(config.log_store.url + \"/metrics\").value(\"loki_ingester_chunks_created_total\")",
        |call: NativeCallContext, url: &str| scrape(&context(&call), url)
    );
    // Getters and methods live in the global namespace so `s.ok` and `s.value(…)` work.
    let getters: [(&str, &str, &str, Getter); 5] = [
        ("ok", "bool", "/// `s.ok`: whether the scrape got a parsable exposition.", |s| s.probe.ok.into()),
        ("status", "?", "/// `s.status`: the HTTP status, `()` when no answer came back.", |s| {
            s.probe.status.map_or(Dynamic::UNIT, |c| (c as i64).into())
        }),
        ("detail", "String", "/// `s.detail`: what the scrape found, or why it failed.", |s| {
            s.probe.detail.clone().into()
        }),
        ("elapsed_ms", "?", "/// `s.elapsed_ms`: how long the answer took, `()` without one.", |s| {
            s.probe.elapsed_ms.map_or(Dynamic::UNIT, |e| (e as i64).into())
        }),
        ("url", "String", "/// `s.url`: the endpoint scraped.", |s| s.url.clone().into()),
    ];
    for (name, returns, doc, get) in getters {
        FuncRegistration::new_getter(name)
            .with_params_info(["scrape: &mut Scrape", returns])
            .with_comments([doc.to_string(), crate::verbs::verb::Effect::Reads.doc_line()])
            .set_into_module(&mut m, move |s: &mut Scrape| get(s));
    }
    methods(&mut m);
    m
}

/// A scrape's methods: its values, samples and record.
fn methods(m: &mut Module) {
    register_method!(
        m,
        "value",
        ["scrape: &mut Scrape", "name: &str", "?"],
        "/// The sum of every sample named `name`, or `()` when the endpoint exposes none: a metric\n\
         /// that is absent is told apart from one that is 0. Throws when the scrape failed.",
        |s: &mut Scrape, name: &str| value(s, name, &Map::new()),
    );
    register_method!(
        m,
        "value",
        ["scrape: &mut Scrape", "name: &str", "labels: Map", "?"],
        "/// The sum of the samples named `name` whose labels include all of `labels`; `()` when none.",
        |s: &mut Scrape, name: &str, labels: Map| value(s, name, &labels),
    );
    register_method!(
        m,
        "has",
        ["scrape: &mut Scrape", "name: &str", "bool"],
        "/// Whether the endpoint exposes a sample named `name`. Throws when the scrape failed.",
        |s: &mut Scrape, name: &str| -> VerbResult<bool> { Ok(exposed(s)?.samples.iter().any(|x| x.name == name)) },
    );
    register_method!(
        m,
        "samples",
        ["scrape: &mut Scrape", "name: &str", "Array"],
        "/// Every sample named `name`: `[#{labels, value}]`. Throws when the scrape failed.",
        |s: &mut Scrape, name: &str| -> VerbResult<Array> {
            exposed(s)?
                .samples
                .iter()
                .filter(|x| x.name == name)
                .map(|x| {
                    let labels = x.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    record(&SampleRecord { labels, value: x.value }).map(Dynamic::from_map)
                })
                .collect()
        },
    );
    register_method!(
        m,
        "to_map",
        ["scrape: &mut Scrape", "Map"],
        "/// The scrape's probe record `#{ok, status, detail, elapsed_ms}`.",
        |s: &mut Scrape| s.probe.clone().into_map(),
    );
}

fn scrape(cx: &Context, url: &str) -> VerbResult<Scrape> {
    let (probe, exposition) = match cx.send(Request::new(reqwest::Method::GET, url))? {
        Err(reason) => (Probe::unanswered(reason), None),
        Ok(r) if r.status != 200 => (Probe::new(false, Some(r.status), r.summary(), Some(r.elapsed)), None),
        Ok(r) => match exposition::parse(&r.body) {
            Ok(e) => {
                let detail = format!("HTTP 200, {} samples", e.samples.len());
                (Probe::new(true, Some(200), detail, Some(r.elapsed)), Some(Arc::new(e)))
            }
            Err(e) => {
                let detail = format!("not exposition text ({e}): {}", r.summary());
                (Probe::new(false, Some(200), detail, Some(r.elapsed)), None)
            }
        },
    };
    Ok(Scrape { url: url.to_string(), probe, exposition })
}

fn exposed(s: &Scrape) -> VerbResult<&Exposition> {
    s.exposition.as_deref().ok_or_else(|| fail(format!("the scrape of {} failed: {}", s.url, s.probe.detail)))
}

fn value(s: &Scrape, name: &str, labels: &Map) -> VerbResult<Dynamic> {
    let want: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), text(v))).collect();
    Ok(exposed(s)?.sum(name, &want).map_or(Dynamic::UNIT, Dynamic::from))
}
