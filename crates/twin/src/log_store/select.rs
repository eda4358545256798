//! Answering queries in the log-store twin: log queries (each stream's newest or oldest
//! `limit` lines, merged to `limit`, one result stream per label set and detected level, as
//! Loki 3 answers), metric queries (`count_over_time`, `rate`, `bytes_*` per detected level,
//! with vector aggregation), label names and values, and series.

use std::collections::{BTreeMap, BTreeSet};

use super::logql::{AggOp, LogSelector, MetricQuery, RangeFn};
use super::state::{Labels, LogStore, MetricSeries, Stored, Stream};
use super::stats::Tally;
use opsbook_wire::loki::StreamOut;
use opsbook_wire::loki::labels_text;

/// A result stream's `(time ns, line)` values.
type Values = Vec<(i64, String)>;

impl LogStore {
    /// A log query over `[start, end]`: the newest (or oldest, `forward`) `limit` lines.
    pub(super) fn select_logs(
        &self,
        sel: &LogSelector,
        start: i64,
        end: i64,
        limit: usize,
        forward: bool,
    ) -> (Vec<StreamOut>, Tally) {
        let mut tally = Tally::default();
        let Ok(data) = self.data.read() else { return (Vec::new(), tally) };
        // Each stream contributes at most `limit` lines, then the merge keeps `limit` overall.
        let mut picked: Vec<(i64, &Stream, &Stored)> = Vec::new();
        for stream in data.streams.values().filter(|s| sel.selects(&s.labels)) {
            let lo = stream.entries.partition_point(|e| e.ts < start);
            let hi = stream.entries.partition_point(|e| e.ts <= end);
            let window = stream.entries.range(lo..hi);
            let mut taken = 0;
            let entries: Box<dyn Iterator<Item = &Stored>> =
                if forward { Box::new(window) } else { Box::new(window.rev()) };
            for e in entries {
                tally.lines += 1;
                tally.bytes += e.line.len();
                if sel.keeps(&e.line) {
                    picked.push((e.ts, stream, e));
                    taken += 1;
                    if taken >= limit {
                        break;
                    }
                }
            }
        }
        if forward {
            picked.sort_by_key(|(ts, _, _)| *ts);
        } else {
            picked.sort_by_key(|(ts, _, _)| std::cmp::Reverse(*ts));
        }
        picked.truncate(limit);
        tally.returned = picked.len();
        // One result stream per label set and detected level, as Loki 3 answers.
        let mut grouped: BTreeMap<(String, &'static str), (&Labels, Values)> = BTreeMap::new();
        for (ts, stream, e) in picked {
            let key = (labels_text(&stream.labels), e.level);
            grouped.entry(key).or_insert_with(|| (&stream.labels, Vec::new())).1.push((ts, e.line.to_string()));
        }
        let result = grouped
            .into_iter()
            .map(|((_, level), (labels, values))| StreamOut { labels: with_level(labels, Some(level)), values })
            .collect();
        (result, tally)
    }

    /// A metric query evaluated at each of `times` (seconds-resolution ns timestamps).
    pub(super) fn eval_metric(&self, q: &MetricQuery, times: &[i64]) -> (Vec<MetricSeries>, Tally) {
        let mut tally = Tally::default();
        let mut series: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
        let Ok(data) = self.data.read() else { return (Vec::new(), tally) };
        let range = q.range.as_nanos() as i64;
        let seconds = q.range.as_secs_f64();
        for stream in data.streams.values().filter(|s| q.selector.selects(&s.labels)) {
            for &t in times {
                let lo = stream.entries.partition_point(|e| e.ts <= t - range);
                let hi = stream.entries.partition_point(|e| e.ts <= t);
                let mut per_level: BTreeMap<&'static str, f64> = BTreeMap::new();
                for e in stream.entries.range(lo..hi) {
                    tally.lines += 1;
                    tally.bytes += e.line.len();
                    if !q.selector.keeps(&e.line) {
                        continue;
                    }
                    let add = match q.func {
                        RangeFn::CountOverTime | RangeFn::Rate => 1.0,
                        RangeFn::BytesOverTime | RangeFn::BytesRate => e.line.len() as f64,
                    };
                    *per_level.entry(e.level).or_default() += add;
                }
                for (level, mut v) in per_level {
                    if matches!(q.func, RangeFn::Rate | RangeFn::BytesRate) {
                        v /= seconds;
                    }
                    let mut labels = stream.labels.clone();
                    labels.push(("detected_level".into(), level.into()));
                    labels.sort();
                    series.entry(labels).or_default().push((t, v));
                }
            }
        }
        drop(data);
        let Some(agg) = &q.aggregation else {
            let mut out: Vec<_> = series.into_iter().collect();
            for (_, points) in &mut out {
                points.sort_by_key(|p| p.0);
            }
            tally.returned = out.len();
            return (out, tally);
        };
        // Vector aggregation: group the series by the kept labels, combine per timestamp.
        let mut groups: BTreeMap<Labels, BTreeMap<i64, Vec<f64>>> = BTreeMap::new();
        for (labels, points) in series {
            let kept: Labels = labels
                .into_iter()
                .filter(|(k, _)| if agg.by { agg.labels.contains(k) } else { !agg.labels.contains(k) })
                .collect();
            let group = groups.entry(kept).or_default();
            for (t, v) in points {
                group.entry(t).or_default().push(v);
            }
        }
        let out: Vec<_> = groups
            .into_iter()
            .map(|(labels, points)| {
                let points = points
                    .into_iter()
                    .map(|(t, vs)| {
                        let v = match agg.op {
                            AggOp::Sum => vs.iter().sum(),
                            AggOp::Min => vs.iter().copied().fold(f64::INFINITY, f64::min),
                            AggOp::Max => vs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                            AggOp::Avg => vs.iter().sum::<f64>() / vs.len() as f64,
                            AggOp::Count => vs.len() as f64,
                        };
                        (t, v)
                    })
                    .collect();
                (labels, points)
            })
            .collect::<Vec<_>>();
        tally.returned = out.len();
        (out, tally)
    }

    pub(super) fn label_names(&self, start: i64, end: i64) -> Vec<String> {
        let mut names = BTreeSet::new();
        if let Ok(data) = self.data.read() {
            for s in data.streams.values().filter(|s| overlaps(s, start, end)) {
                names.extend(s.labels.iter().map(|(k, _)| k.clone()));
            }
        }
        names.into_iter().collect()
    }

    pub(super) fn label_values(&self, name: &str, start: i64, end: i64, selector: Option<&LogSelector>) -> Vec<String> {
        let mut values = BTreeSet::new();
        if let Ok(data) = self.data.read() {
            for s in data.streams.values().filter(|s| overlaps(s, start, end)) {
                if selector.is_some_and(|sel| !sel.selects(&s.labels)) {
                    continue;
                }
                if let Some((_, v)) = s.labels.iter().find(|(k, _)| k == name) {
                    values.insert(v.clone());
                }
            }
        }
        values.into_iter().collect()
    }

    pub(super) fn series(&self, selectors: &[LogSelector], start: i64, end: i64) -> Vec<Labels> {
        let Ok(data) = self.data.read() else { return Vec::new() };
        let mut found: Vec<&Labels> = data
            .streams
            .values()
            .filter(|s| overlaps(s, start, end))
            .filter(|s| selectors.is_empty() || selectors.iter().any(|sel| sel.selects(&s.labels)))
            .map(|s| &s.labels)
            .collect();
        found.sort();
        found.into_iter().map(|l| with_level(l, None)).collect()
    }
}

fn overlaps(s: &Stream, start: i64, end: i64) -> bool {
    s.entries.front().is_some_and(|f| f.ts <= end) && s.entries.back().is_some_and(|b| b.ts >= start)
}

/// A stream's labels with Loki 3's `detected_level` among them, sorted by name.
fn with_level(labels: &Labels, level: Option<&str>) -> Labels {
    let mut all = labels.clone();
    if let Some(level) = level {
        all.push(("detected_level".into(), level.into()));
    }
    all.sort();
    all
}

#[cfg(test)]
mod tests {

    use super::super::logql::{self, Query};

    use super::super::test_support::{entry, labels, store};
    use crate::clock::now_ns;
    use opsbook_wire::loki::PushStream;

    #[test]
    fn log_queries_honour_limit_direction_and_filters() {
        let s = store();
        let now = now_ns();
        let entries: Vec<_> =
            (0..10).map(|i| entry(now - (10 - i) * 1_000_000, &format!("line {i} level=info"))).collect();
        s.ingest(vec![PushStream { labels: labels(&[("hostname", "h1")]), entries }]).unwrap();
        let Query::Log(sel) = logql::parse(r#"{hostname="h1"} != "line 9""#).unwrap() else { panic!() };
        let (result, tally) = s.select_logs(&sel, now - 3_600_000_000_000, now, 3, false);
        let lines: Vec<&str> = result[0].values.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(lines, ["line 8 level=info", "line 7 level=info", "line 6 level=info"]);
        assert_eq!(
            result[0].labels,
            labels(&[("detected_level", "info"), ("hostname", "h1"), ("service_name", "unknown_service")])
        );
        assert_eq!(tally.returned, 3);
        let (result, _) = s.select_logs(&sel, now - 3_600_000_000_000, now, 2, true);
        assert_eq!(result[0].values[0].1, "line 0 level=info");
    }

    #[test]
    fn metric_queries_count_per_level_and_aggregate() {
        let s = store();
        let now = now_ns();
        s.ingest(vec![PushStream {
            labels: labels(&[("hostname", "h1"), ("unit", "a")]),
            entries: vec![entry(now - 1000, "level=info a"), entry(now - 500, "level=error b")],
        }])
        .unwrap();
        let Query::Metric(m) = logql::parse(r#"count_over_time({hostname="h1"}[5m])"#).unwrap() else { panic!() };
        let (series, _) = s.eval_metric(&m, &[now]);
        assert_eq!(series.len(), 2, "one series per detected level");
        let Query::Metric(m) = logql::parse(r#"sum by (hostname) (count_over_time({hostname="h1"}[5m]))"#).unwrap()
        else {
            panic!()
        };
        let (series, _) = s.eval_metric(&m, &[now]);
        assert_eq!(series, vec![(labels(&[("hostname", "h1")]), vec![(now, 2.0)])]);
    }
}
