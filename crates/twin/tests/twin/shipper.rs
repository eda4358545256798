//! The shipper twin: its pushes (protobuf and JSON) accepted by the log-store twin, and its
//! own endpoint and metrics. (Its `validate`, a command of the process, is tested with the
//! binary in the root tests/twin_processes.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use opsbook_twin::{Shutdown, log_store, logger, shipper};
use opsbook_world::BoxFuture;
use opsbook_world::journal::{Entry, Feed, Journal, Query};
use serde_json::Value;

use super::{client, runtime, start_log_store};

/// A journal fed by the test: what the sandbox's in-process journal will be.
struct FedJournal {
    feed: std::sync::Mutex<Option<Feed>>,
}

impl Journal for FedJournal {
    fn read<'a>(&'a self, _query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn follow<'a>(&'a self, _query: &'a Query) -> BoxFuture<'a, Result<Feed, String>> {
        Box::pin(async move { self.feed.lock().unwrap().take().ok_or_else(|| "already followed".to_string()) })
    }
    fn emit<'a>(&'a self, _identifier: &'a str, _message: &'a str, _priority: u8) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

#[test]
fn shipper_pushes_are_accepted_by_the_log_store_in_json_and_protobuf() {
    let rt = runtime();
    let (store_url, store, _stop) =
        start_log_store(&rt, log_store::Options { ready_delay: Duration::ZERO, ..Default::default() });
    let c = client();
    for format in ["protobuf", "json"] {
        let config = shipper::config::parse(
            "s.toml",
            &format!(
                "[journal]\nunits = [\"loki.service\", \"telegraf.service\"]\n[labels]\nservice_type = \"{format}-test\"\nhostname = \"h1\"\n\
                 [write]\nurl = \"{store_url}/loki/api/v1/push\"\nformat = \"{format}\"\nbatch_wait = \"100ms\"\n"
            ),
        )
        .unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let journal = Arc::new(FedJournal { feed: std::sync::Mutex::new(Some(rx)) });
        let (sink, logged) = logger::memory();
        let s = shipper::Shipper::new(config, None, journal, sink);
        let listener = rt.block_on(opsbook_twin::loopback()).unwrap();
        let shipper_url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Shutdown::new();
        let server = rt.spawn(opsbook_twin::serve(s.clone(), Some(listener), stop.signal()));
        let now_us = (opsbook_twin::now_ns() / 1000) as u64;
        for (i, unit) in ["loki.service", "sshd.service", "telegraf.service"].iter().enumerate() {
            let entry = Entry {
                realtime_us: now_us + i as u64,
                priority: 6,
                unit: unit.to_string(),
                identifier: "x".into(),
                pid: 1,
                message: format!("{format} line {i} level=info"),
            };
            rt.block_on(tx.send(Ok(entry))).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.sent_entries() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(s.sent_entries(), 2, "sshd.service is not followed; logs: {:?}", logged.lock().unwrap());
        let q = format!("{{service_type=\"{format}-test\"}}");
        let v: Value = c
            .get(format!("{store_url}/loki/api/v1/query_range"))
            .query(&[("query", q.as_str())])
            .send()
            .unwrap()
            .json()
            .unwrap();
        let streams = v["data"]["result"].as_array().unwrap();
        assert_eq!(streams.len(), 2, "{v}");
        let units: Vec<&str> = streams.iter().map(|s| s["stream"]["unit"].as_str().unwrap()).collect();
        assert!(units.contains(&"loki.service") && units.contains(&"telegraf.service"));
        assert!(streams.iter().all(|s| s["stream"]["hostname"] == "h1"));
        let metrics = c.get(format!("{shipper_url}/metrics")).send().unwrap().text().unwrap();
        let parsed = opsbook_wire::exposition::parse(&metrics).unwrap();
        assert_eq!(parsed.sum("loki_write_sent_entries_total", &[]), Some(2.0), "{metrics}");
        assert!(metrics.contains("loki_write_request_duration_seconds_count{"));
        assert_eq!(c.get(format!("{shipper_url}/-/ready")).send().unwrap().text().unwrap(), "Alloy is ready.\n");
        let r = c.post(format!("{shipper_url}/-/reload")).send().unwrap();
        assert_eq!(r.status(), 400, "no config file to reload");
        assert!(metrics_after(&c, &shipper_url).contains("alloy_config_last_load_successful 0"));
        stop.trigger();
        rt.block_on(server).unwrap().unwrap();
    }
    assert!(store.entry_count() >= 4);
}

fn metrics_after(c: &reqwest::blocking::Client, url: &str) -> String {
    c.get(format!("{url}/metrics")).send().unwrap().text().unwrap()
}
