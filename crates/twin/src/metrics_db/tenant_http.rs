//! The metrics-db twin's tenancy routes, as InfluxDB v2.7.12 answers them:
//!
//! - `GET /api/v2/buckets` (`tenant/http_server_bucket.go` `handleGetBuckets`): filters
//!   `name` (shown as `bucket=` in the links), `org`, `orgID`, `id`; paged (`paging`); the
//!   token's read permission is applied **after** paging (`authorizer/bucket.go`), so a short
//!   page does not mean the list ended. One named bucket that does not exist: 404.
//! - `POST /api/v2/buckets`: `orgID`, `name`, `retentionRules`; 201 with the bucket.
//! - `GET /api/v2/orgs` (`tenant/http_server_org.go`): the same paging rules, but the links
//!   are only `{"self":"/api/v2/orgs"}`.
//! - `POST /api/v2/authorizations` (`authorization/http_server.go`): `orgID` and
//!   `permissions`; 201 with the new token. All resource types of one org make an all-access
//!   token.
//!
//! Errors here go through kithttp's `API.Err`: tab-indented JSON, logged as
//! `lvl=error msg="api error encountered"`.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query as QueryParams, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::answers::{Params, api_err, json_answer, param};
use super::database::{MetricsDb, invalid};
use super::paging;
use super::tenant::{self, Authorization, Permission, RESOURCE_TYPES};

fn not_found(message: String) -> (StatusCode, Value) {
    (StatusCode::NOT_FOUND, json!({"code": "not found", "message": message}))
}

fn unprocessable(message: &str) -> (StatusCode, Value) {
    (StatusCode::UNPROCESSABLE_ENTITY, json!({"code": "unprocessable entity", "message": message}))
}

/// InfluxDB's authorizer refusal: `write:orgs/ID/buckets is unauthorized`.
fn unauthorized(action: &str, org: &str, kind: &str) -> (StatusCode, Value) {
    let message = format!("{action}:orgs/{org}/{kind} is unauthorized");
    (StatusCode::UNAUTHORIZED, json!({"code": "unauthorized", "message": message}))
}

/// The org a list is filtered to: by `orgID`, else by `org` name; `Ok(None)` for all.
fn org_filter(db: &MetricsDb, params: &Params) -> Result<Option<String>, (StatusCode, Value)> {
    let tenant = db.tenant_read();
    if let Some(id) = param(params, "orgID").filter(|v| !v.is_empty()) {
        return tenant
            .org_by_id(id)
            .map(|o| Some(o.id.clone()))
            .ok_or_else(|| not_found("organization not found".into()));
    }
    match param(params, "org").filter(|v| !v.is_empty()) {
        Some(name) => tenant
            .org_by_name(name)
            .map(|o| Some(o.id.clone()))
            .ok_or_else(|| not_found(format!("organization name \"{name}\" not found"))),
        None => Ok(None),
    }
}

fn list_buckets(db: &MetricsDb, auth: &Authorization, params: &Params) -> Result<Value, (StatusCode, Value)> {
    let options = paging::decode(params).map_err(|m| invalid(&m))?;
    let org = org_filter(db, params)?;
    let (name, id) = (param(params, "name").filter(|v| !v.is_empty()), param(params, "id").filter(|v| !v.is_empty()));
    let all: Vec<tenant::BucketInfo> = db
        .tenant_read()
        .buckets
        .iter()
        .filter(|b| org.as_ref().is_none_or(|o| &b.org_id == o))
        .filter(|b| name.is_none_or(|n| b.name == n) && id.is_none_or(|i| b.id == i))
        .cloned()
        .collect();
    if let Some(n) = name
        && all.is_empty()
    {
        return Err(not_found(format!("bucket \"{n}\" not found")));
    }
    // Permission filtering runs after paging (authorizer/bucket.go), and the links count what
    // is left: a page shortened by it has no `next`, though more buckets exist.
    let visible: Vec<Value> = options
        .page(all, |b| b.id.as_str())
        .iter()
        .filter(|b| auth.allows("read", "buckets", &b.org_id, Some(&b.id)))
        .map(tenant::bucket_json)
        .collect();
    let filter: Vec<(&str, String)> = ["id", "org", "orgID"]
        .iter()
        .map(|k| (*k, param(params, k).unwrap_or("").to_string()))
        .chain([("bucket", name.unwrap_or("").to_string())])
        .collect();
    Ok(json!({"links": options.links("/api/v2/buckets", &filter, visible.len()), "buckets": visible}))
}

/// `GET /api/v2/buckets`.
pub(super) async fn get_buckets(
    State(db): State<Arc<MetricsDb>>,
    Extension(auth): Extension<Authorization>,
    QueryParams(params): QueryParams<Params>,
) -> Response {
    match list_buckets(&db, &auth, &params) {
        Ok(v) => json_answer(StatusCode::OK, &v),
        Err(e) => api_err(&db, None, e),
    }
}

/// The one retention rule of a new bucket, in seconds (0: forever).
fn retention_of(v: &Value) -> Result<u64, (StatusCode, Value)> {
    let rules = v.get("retentionRules").and_then(Value::as_array).cloned().unwrap_or_default();
    if rules.len() > 1 {
        return Err(unprocessable("expected no more than 1 retention rule"));
    }
    let Some(rule) = rules.first() else { return Ok(0) };
    let every = rule.get("everySeconds").and_then(Value::as_i64).unwrap_or(0);
    let shard = rule.get("shardGroupDurationSeconds").and_then(Value::as_i64).unwrap_or(0);
    if every < 0 || shard < 0 {
        return Err(unprocessable("expiration seconds cannot be negative"));
    }
    Ok(every as u64)
}

fn create_bucket(db: &MetricsDb, auth: &Authorization, body: &[u8]) -> Result<Value, (StatusCode, Value)> {
    let v: Value = serde_json::from_slice(body).map_err(|e| invalid(&format!("failed to decode request: {e}")))?;
    let org_id = v.get("orgID").and_then(Value::as_str).unwrap_or("").to_string();
    if org_id.is_empty() {
        return Err(invalid("organization id must be provided"));
    }
    if db.tenant_read().org_by_id(&org_id).is_none() {
        return Err(not_found("organization not found".into()));
    }
    if !auth.allows("write", "buckets", &org_id, None) {
        return Err(unauthorized("write", &org_id, "buckets"));
    }
    let name = v.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    if name.trim().is_empty() {
        return Err(invalid("bucket name is required"));
    }
    let retention = retention_of(&v)?;
    let mut bucket = db.create_bucket(&org_id, &name, retention)?;
    if let Some(d) = v.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()) {
        bucket["description"] = json!(d);
        let mut tenant = db.tenant_write();
        if let Some(b) = tenant.buckets.iter_mut().find(|b| b.name == name) {
            b.description = Some(d.to_string());
        }
    }
    Ok(bucket)
}

/// `POST /api/v2/buckets`.
pub(super) async fn post_bucket(
    State(db): State<Arc<MetricsDb>>,
    Extension(auth): Extension<Authorization>,
    body: Bytes,
) -> Response {
    match create_bucket(&db, &auth, &body) {
        Ok(v) => json_answer(StatusCode::CREATED, &v),
        Err(e) => api_err(&db, None, e),
    }
}

fn list_orgs(db: &MetricsDb, auth: &Authorization, params: &Params) -> Result<Value, (StatusCode, Value)> {
    let options = paging::decode(params).map_err(|m| invalid(&m))?;
    let org = org_filter(db, params)?;
    let all: Vec<tenant::Org> =
        db.tenant_read().orgs.iter().filter(|o| org.as_ref().is_none_or(|id| &o.id == id)).cloned().collect();
    let visible: Vec<Value> = options
        .page(all, |o| o.id.as_str())
        .iter()
        .filter(|o| auth.allows("read", "orgs", &o.id, Some(&o.id)))
        .map(tenant::org_json)
        .collect();
    // InfluxDB v2.7.12 (tenant/http_server_org.go): no next or prev links on orgs.
    Ok(json!({"links": {"self": "/api/v2/orgs"}, "orgs": visible}))
}

/// `GET /api/v2/orgs`.
pub(super) async fn get_orgs(
    State(db): State<Arc<MetricsDb>>,
    Extension(auth): Extension<Authorization>,
    QueryParams(params): QueryParams<Params>,
) -> Response {
    match list_orgs(&db, &auth, &params) {
        Ok(v) => json_answer(StatusCode::OK, &v),
        Err(e) => api_err(&db, None, e),
    }
}

/// One permission of a request body, checked as `influxdb.Permission.Valid` checks it.
fn permission_of(v: &Value) -> Result<Permission, (StatusCode, Value)> {
    let action = v.get("action").and_then(Value::as_str).unwrap_or("");
    if !matches!(action, "read" | "write") {
        return Err(invalid("unknown action for permission"));
    }
    let resource = v.get("resource").cloned().unwrap_or(Value::Null);
    let kind = resource.get("type").and_then(Value::as_str).unwrap_or("");
    if !RESOURCE_TYPES.contains(&kind) {
        return Err(invalid("unknown resource type for permission"));
    }
    let text = |k: &str| resource.get(k).and_then(Value::as_str).map(str::to_string);
    Ok(Permission { action: action.into(), kind: kind.into(), org_id: text("orgID"), id: text("id") })
}

fn create_authorization(db: &MetricsDb, auth: &Authorization, body: &[u8]) -> Result<Value, (StatusCode, Value)> {
    let v: Value = serde_json::from_slice(body).map_err(|_| invalid("invalid json structure"))?;
    let permissions = v.get("permissions").and_then(Value::as_array).cloned().unwrap_or_default();
    if permissions.is_empty() {
        return Err(invalid("authorization must include permissions"));
    }
    let permissions = permissions.iter().map(permission_of).collect::<Result<Vec<_>, _>>()?;
    let org_id = v.get("orgID").and_then(Value::as_str).unwrap_or("").to_string();
    if org_id.is_empty() {
        return Err(invalid("org id required"));
    }
    if db.tenant_read().org_by_id(&org_id).is_none() {
        return Err(not_found("organization not found".into()));
    }
    if !auth.allows("write", "authorizations", &org_id, None) {
        return Err(unauthorized("write", &org_id, "authorizations"));
    }
    let user = v.get("userID").and_then(Value::as_str).unwrap_or(&auth.user_id).to_string();
    let description = v.get("description").and_then(Value::as_str).unwrap_or("").to_string();
    let mut tenant = db.tenant_write();
    let new = tenant.add_auth(&org_id, &user, &description, permissions, None);
    Ok(tenant.auth_json(&new))
}

/// `POST /api/v2/authorizations`.
pub(super) async fn post_authorization(
    State(db): State<Arc<MetricsDb>>,
    Extension(auth): Extension<Authorization>,
    body: Bytes,
) -> Response {
    match create_authorization(&db, &auth, &body) {
        Ok(v) => json_answer(StatusCode::CREATED, &v),
        Err(e) => api_err(&db, None, e),
    }
}
