//! Paging of the metrics-db twin's lists, as InfluxDB v2.7.12 pages them (`kit/platform`
//! `paging.go` and `paging_http.go`): `offset`, `limit` (default 20, at most 100; outside
//! 1..100 is a 400, not clamped), `after` (an ID), `sortBy`, `descending`, and the
//! `links` {`prev`?, `self`, `next`?} built from the filter and these options.

use serde_json::{Value, json};

/// InfluxDB's `DefaultPageSize` and `MaxPageSize`.
pub(super) const DEFAULT_PAGE: usize = 20;
pub(super) const MAX_PAGE: usize = 100;

/// `FindOptions` as `DecodeFindOptions` reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FindOptions {
    pub offset: usize,
    pub limit: usize,
    pub after: Option<String>,
    pub sort_by: Option<String>,
    pub descending: bool,
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
}

/// Reads the options of a list request; the error is InfluxDB's `invalid` message.
pub(super) fn decode(params: &[(String, String)]) -> Result<FindOptions, String> {
    let offset = match param(params, "offset") {
        None => 0,
        Some(o) => o.parse::<i64>().ok().filter(|o| *o >= 0).ok_or("offset is invalid")? as usize,
    };
    let limit = match param(params, "limit") {
        None => DEFAULT_PAGE,
        Some(l) => {
            let l: i64 = l.parse().map_err(|_| "limit is invalid".to_string())?;
            if !(1..=MAX_PAGE as i64).contains(&l) {
                return Err(format!("limit must be between 1 and {MAX_PAGE}"));
            }
            l as usize
        }
    };
    let after = param(params, "after").map(str::to_string);
    if let Some(a) = &after
        && !(a.len() == 16 && a.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err("invalid ID".into());
    }
    let descending = match param(params, "descending") {
        None => false,
        Some(d) => go_bool(d).ok_or("descending is invalid")?,
    };
    Ok(FindOptions { offset, limit, after, sort_by: param(params, "sortBy").map(str::to_string), descending })
}

/// Go's `strconv.ParseBool`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FindOptions {
    /// The page of `items` these options select: after the `after` ID (by `id_of`), then
    /// `offset`, at most `limit`.
    pub(super) fn page<T>(&self, items: Vec<T>, id_of: impl Fn(&T) -> &str) -> Vec<T> {
        let start = match &self.after {
            Some(after) => items.iter().position(|i| id_of(i) == after).map_or(items.len(), |p| p + 1),
            None => 0,
        };
        items.into_iter().skip(start + self.offset).take(self.limit).collect()
    }

    /// `PagingLinks` for a page of `count` items under `path`, with the filter's `filter`
    /// pairs (`NewPagingLinks`): keys sorted as Go's `url.Values.Encode` sorts them; `next`
    /// when the page is full (so a full last page still has one), `prev` when offset > 0.
    pub(super) fn links(&self, path: &str, filter: &[(&str, String)], count: usize) -> Value {
        let url = |offset: usize| {
            let mut pairs: Vec<(String, String)> =
                filter.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.to_string(), v.clone())).collect();
            pairs.push(("descending".into(), self.descending.to_string()));
            pairs.push(("offset".into(), offset.to_string()));
            pairs.push(("limit".into(), self.limit.to_string()));
            if let Some(a) = &self.after {
                pairs.push(("after".into(), a.clone()));
            }
            if let Some(s) = &self.sort_by {
                pairs.push(("sortBy".into(), s.clone()));
            }
            pairs.sort();
            let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
            format!("{path}?{}", query.join("&"))
        };
        let mut links = json!({"self": url(self.offset)});
        if self.offset > 0 {
            links["prev"] = json!(url(self.offset.saturating_sub(self.limit)));
        }
        if count >= self.limit {
            links["next"] = json!(url(self.offset + self.limit));
        }
        links
    }
}

/// Go's `url.QueryEscape`: letters, digits and `-_.~` stay, a space is `+`.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn options_and_their_errors() {
        let d = decode(&[]).unwrap();
        assert_eq!((d.offset, d.limit, d.descending), (0, 20, false));
        assert_eq!(decode(&p(&[("limit", "101")])).unwrap_err(), "limit must be between 1 and 100");
        assert_eq!(decode(&p(&[("limit", "0")])).unwrap_err(), "limit must be between 1 and 100");
        assert_eq!(decode(&p(&[("offset", "-1")])).unwrap_err(), "offset is invalid");
        assert_eq!(decode(&p(&[("descending", "yes")])).unwrap_err(), "descending is invalid");
    }

    #[test]
    fn links_are_sorted_with_next_when_full_and_prev_past_the_start() {
        let o = decode(&p(&[("limit", "2"), ("offset", "2")])).unwrap();
        let links = o.links("/api/v2/buckets", &[("org", "my org".into()), ("bucket", String::new())], 2);
        assert_eq!(
            links,
            json!({
                "prev": "/api/v2/buckets?descending=false&limit=2&offset=0&org=my+org",
                "self": "/api/v2/buckets?descending=false&limit=2&offset=2&org=my+org",
                "next": "/api/v2/buckets?descending=false&limit=2&offset=4&org=my+org"
            })
        );
        assert_eq!(o.page(vec!["a", "b", "c", "d", "e"], |s| s), vec!["c", "d"]);
        let after = decode(&p(&[("after", "000000000000000b")])).unwrap();
        assert_eq!(after.page(vec!["000000000000000a", "000000000000000b", "c"], |s| s), vec!["c"]);
    }
}
