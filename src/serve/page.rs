//! `/`: the status page for a person, rendered on the server as one self-contained document.
//!
//! Jobs that fail come first; in each job the failing checks come first, with their detail,
//! expected and actual values; then a strip of the last runs (each links to its report), the
//! durations over time as a small inline SVG chart, and when the next run is due. The page
//! reloads itself (a `refresh` meta tag, no script), fits a phone's width, and loads nothing
//! from anywhere: its style sheet is embedded (`page.css`).

use opsbook_base::html_escaped as html;
use std::fmt::Write;

use serde_json::Value;

use super::state::{JobView, State};
use crate::history::now_ms;
use crate::history::rfc3339;

const STYLE: &str = include_str!("page.css");

/// Runs shown in the strip and the chart.
const SHOWN: usize = 40;

/// The verdict of a job: its latest outcome, `cannot run`, or `waiting` before a first run.
fn verdict(v: &JobView) -> &str {
    if v.problem.is_some() {
        return "refused";
    }
    v.runs.back().map_or("waiting", |r| r.outcome.as_str())
}

fn rank(v: &JobView) -> u8 {
    match verdict(v) {
        "passed" => 3,
        "waiting" => 2,
        _ => 0,
    }
}

/// A run's duration: `3.2 ms` under 10 ms (where `0.00 s` would say nothing), else `1.25 s`.
fn took(seconds: f64) -> String {
    if seconds < 0.01 { format!("{:.1} ms", seconds.max(0.0) * 1000.0) } else { format!("{seconds:.2} s") }
}

/// "in 4 s", "12 s ago".
fn relative(ms: i64, now: i64) -> String {
    let secs = (ms - now) as f64 / 1000.0;
    let amount = |s: f64| {
        if s >= 90.0 { format!("{:.0} min", s / 60.0) } else { format!("{:.0} s", s.max(0.0)) }
    };
    if secs >= 0.0 { format!("in {}", amount(secs)) } else { format!("{} ago", amount(-secs)) }
}

fn time_of(ms: i64) -> String {
    // `2026-11-23T16:40:01.123Z` → `16:40:01`
    rfc3339(ms).get(11..19).unwrap_or_default().to_string()
}

fn check_item(out: &mut String, c: &Value) {
    let outcome = c["outcome"].as_str().unwrap_or("?");
    let name = c["name"].as_str().unwrap_or_default();
    let section = c["section"].as_str().map(|s| format!("<span class=\"section\">{}</span> ", html(s)));
    let _ = write!(
        out,
        "<li class=\"check {outcome}\"><span class=\"badge\">{}</span> {}<span class=\"name\">{}</span>",
        html(outcome),
        section.unwrap_or_default(),
        html(name)
    );
    if let Some(detail) = c["detail"].as_str().filter(|d| !d.is_empty()) {
        let _ = write!(out, "<div class=\"detail\">{}</div>", html(detail));
    }
    if let (Some(e), Some(a)) = (c["expected"].as_str(), c["actual"].as_str()) {
        let _ =
            write!(out, "<div class=\"detail\">expected <code>{}</code>, got <code>{}</code></div>", html(e), html(a));
    }
    out.push_str("</li>");
}

fn chart(out: &mut String, v: &JobView) {
    let runs: Vec<_> = v.runs.iter().rev().take(SHOWN).rev().collect();
    if runs.len() < 2 {
        return;
    }
    let longest = runs.iter().map(|r| r.duration_s).fold(0.0, f64::max);
    let max = longest.max(0.001);
    let (w, h) = (300.0, 60.0);
    let step = w / (runs.len() - 1) as f64;
    let point = |i: usize, d: f64| (i as f64 * step, h - 4.0 - (d / max) * (h - 8.0));
    let line: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (x, y) = point(i, r.duration_s);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = write!(
        out,
        "<figure class=\"chart\"><svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"run durations\"><polyline points=\"{}\"/>",
        line.join(" ")
    );
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| r.outcome != "passed") {
        let (x, y) = point(i, r.duration_s);
        let _ = write!(
            out,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\"><title>#{} {}</title></circle>",
            r.id,
            html(&r.outcome)
        );
    }
    let _ = write!(
        out,
        "</svg><figcaption>run duration, last {} runs (max {})</figcaption></figure>",
        runs.len(),
        took(longest)
    );
}

fn job_card(out: &mut String, v: &JobView, now: i64) {
    let verdict = verdict(v);
    // One card per job and host: a job watching other hosts has the host in its id.
    let id = if v.spec.hosts.is_some() { format!("{}-{}", v.spec.name, v.host) } else { v.spec.name.clone() };
    let _ = write!(
        out,
        "<section class=\"job {verdict}\" id=\"job-{}\"><h2><span class=\"verdict\">{verdict}</span> {}</h2>\
         <p class=\"meta\">runbook <code>{}</code> every {}",
        html(&id),
        html(&v.title()),
        html(&v.spec.runbook),
        humantime::format_duration(v.spec.every),
    );
    if let Some(latest) = v.runs.back() {
        let _ = write!(
            out,
            " · last run <a href=\"/api/runs/{id}\">#{id}</a> at {} UTC ({}), took {}",
            time_of(latest.started_ms),
            relative(latest.started_ms, now),
            took(latest.duration_s),
            id = latest.id
        );
    }
    if let Some(since) = v.running_since_ms {
        let _ = write!(out, " · running for {}", relative(since, now).trim_end_matches(" ago"));
    } else if let Some(due) = v.next_due_ms.filter(|_| v.problem.is_none()) {
        let _ = write!(out, " · <span class=\"next\">next run {}</span>", relative(due, now));
    }
    out.push_str("</p>");
    if let Some(problem) = &v.problem {
        let _ = write!(out, "<p class=\"problem\">{}</p>", html(problem));
    }
    if let Some(note) = v.runs.back().and_then(|r| r.note.as_ref()) {
        let _ = write!(out, "<p class=\"note\">{}</p>", html(note));
    }
    if let Some(report) = &v.latest {
        if let Some(message) = report["error"]["message"].as_str() {
            let _ = write!(out, "<p class=\"problem\">{}</p>", html(message));
        }
        let checks: Vec<&Value> = report["checks"].as_array().map(|a| a.iter().collect()).unwrap_or_default();
        let (failing, rest): (Vec<&Value>, Vec<&Value>) = checks.into_iter().partition(|c| c["outcome"] == "fail");
        out.push_str("<ol class=\"checks\">");
        for c in failing.iter().chain(rest.iter().filter(|c| c["outcome"] == "warn")) {
            check_item(out, c);
        }
        out.push_str("</ol>");
        let others: Vec<&&Value> = rest.iter().filter(|c| c["outcome"] != "warn").collect();
        if !others.is_empty() {
            let _ = write!(out, "<details><summary>{} more checks</summary><ol class=\"checks\">", others.len());
            for c in others {
                check_item(out, c);
            }
            out.push_str("</ol></details>");
        }
    }
    if !v.runs.is_empty() {
        out.push_str("<div class=\"strip\" aria-label=\"last runs, oldest first\">");
        for r in v.runs.iter().rev().take(SHOWN).rev() {
            let _ = write!(
                out,
                "<a class=\"{}\" href=\"/api/runs/{}\" title=\"#{} {} UTC {} {}\"></a>",
                html(&r.outcome),
                r.id,
                r.id,
                time_of(r.started_ms),
                html(&r.outcome),
                took(r.duration_s)
            );
        }
        out.push_str("</div>");
    }
    chart(out, v);
    out.push_str("</section>");
}

/// The whole page.
pub(super) fn render(state: &State) -> String {
    let now = now_ms();
    let mut jobs = state.jobs();
    jobs.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.title().cmp(&b.title())));
    let failing = jobs.iter().filter(|v| rank(v) == 0).count();
    let refresh = jobs.iter().map(|v| v.spec.every.as_secs()).min().unwrap_or(10).clamp(2, 30);
    let title = if failing == 0 { "all passing".to_string() } else { format!("{failing} failing") };
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"refresh\" content=\"{refresh}\"><title>{} · {title} · opsbook</title>\
         <style>{STYLE}</style></head><body><header><h1>opsbook <span>{}</span></h1><p class=\"summary {}\">{title}, {} \
         job{} · updated {} UTC",
        html(&state.hostname),
        html(&state.hostname),
        if failing == 0 { "passed" } else { "failed" },
        jobs.len(),
        if jobs.len() == 1 { "" } else { "s" },
        time_of(now),
    );
    out.push_str(" · <a href=\"/metrics\">metrics</a> · <a href=\"/api/runs\">runs</a></p>");
    if let Some(e) = state.history_error() {
        let _ = write!(out, "<p class=\"problem\">history not stored: {} (serving from memory)</p>", html(&e));
    }
    out.push_str("</header><main>");
    if jobs.is_empty() {
        out.push_str("<p>no jobs: give some as <code>RUNBOOK@INTERVAL</code> or in <code>[[serve.job]]</code></p>");
    }
    for v in &jobs {
        job_card(&mut out, v, now);
    }
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::took;

    #[test]
    fn durations_under_10_ms_are_shown_in_milliseconds() {
        let shown: Vec<String> = [0.0, 0.0004, 0.0032, 0.0099, 0.01, 1.254].into_iter().map(took).collect();
        assert_eq!(shown, ["0.0 ms", "0.4 ms", "3.2 ms", "9.9 ms", "0.01 s", "1.25 s"]);
    }
}
