//! Onboarding of the metrics-db twin, as InfluxDB v2.7.12 does it
//! (`tenant/http_server_onboarding.go`, `tenant/service_onboarding.go`): a fresh server has
//! no org, bucket, user or token until `POST /api/v2/setup`, which makes all four and
//! answers 201 with them (`auth.token` is an operator token). Both routes need no token.
//!
//! - `GET /api/v2/setup` → `{"allowed": true}` until then, `false` after.
//! - `POST /api/v2/setup` again → 422 `conflict` `onboarding has already been completed`.
//! - A missing `username`, `org` or `bucket` → 422 `onboarding failed: missing required
//!   fields [...]` naming only the missing ones.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::answers::{api_err, json_answer};
use super::database::{MetricsDb, internal, invalid};
use super::tenant::{self, Permission};

impl MetricsDb {
    /// Sets the server up: user, org, bucket and the operator token (`token`, or a new one).
    /// The answer is setup's 201 body.
    pub(super) fn onboard(
        &self,
        username: &str,
        org: &str,
        bucket: &str,
        retention_s: u64,
        token: Option<String>,
    ) -> Result<Value, (StatusCode, Value)> {
        let (org, user, auth) = {
            let mut t = self.tenant_write();
            if !t.onboarding_allowed() {
                // InfluxDB v2.7.12 (tenant/error.go `ErrOnboardingNotAllowed`): conflict → 422.
                return Err((
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"code": "conflict", "message": "onboarding has already been completed"}),
                ));
            }
            let user = t.add_user(username);
            let org = t.add_org(org);
            let description = format!("{username}'s Token");
            let auth = t.add_auth(&org.id, &user.id, &description, Permission::everything(None), token);
            (org, user, auth)
        };
        let bucket = self.create_bucket(&org.id, bucket, retention_s)?;
        let mut auth_json = self.tenant_read().auth_json(&auth);
        // Setup answers the authorization itself, without the names the authorizations API adds.
        if let Some(map) = auth_json.as_object_mut() {
            map.remove("org");
            map.remove("user");
        }
        Ok(json!({
            "user": {"links": {"self": format!("/api/v2/users/{}", user.id)}, "id": user.id, "name": user.name, "status": "active"},
            "bucket": bucket,
            "org": tenant::org_json(&org),
            "auth": auth_json,
        }))
    }
}

/// `GET /api/v2/setup`: whether onboarding is still allowed.
pub(super) async fn is_onboarding(State(db): State<Arc<MetricsDb>>) -> Response {
    json_answer(StatusCode::OK, &json!({"allowed": db.onboarding_allowed()}))
}

/// The fields of `OnboardingRequest` the twin keeps (the password is checked, not kept).
#[derive(Debug)]
struct SetupRequest {
    username: String,
    org: String,
    bucket: String,
    retention_s: u64,
    token: Option<String>,
}

/// Reads and checks setup's body.
fn request(body: &[u8]) -> Result<SetupRequest, (StatusCode, Value)> {
    // A body that is not JSON is answered as Go's decoder error: no code, so `internal error`.
    let v: Value = serde_json::from_slice(body).map_err(|e| internal(&e.to_string()))?;
    let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    let (username, org, bucket) = (text("username"), text("org"), text("bucket"));
    let missing: Vec<&str> = [("username", &username), ("org", &org), ("bucket", &bucket)]
        .iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(k, _)| *k)
        .collect();
    if !missing.is_empty() {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"code": "unprocessable entity",
                "message": format!("onboarding failed: missing required fields [{}]", missing.join(","))}),
        ));
    }
    let password = v.get("password").and_then(Value::as_str).map(str::to_string).filter(|p| !p.is_empty());
    if let Some(p) = &password
        && !(8..=72).contains(&p.chars().count())
    {
        return Err(invalid("passwords must be between 8 and 72 characters long"));
    }
    // `retentionPeriodHrs` is a Go duration in nanoseconds, despite its name.
    let seconds = v.get("retentionPeriodSeconds").and_then(Value::as_u64).unwrap_or(0);
    let hrs_ns = v.get("retentionPeriodHrs").and_then(Value::as_u64).unwrap_or(0);
    let retention = if seconds > 0 { seconds } else { hrs_ns / 1_000_000_000 };
    let token = v.get("token").and_then(Value::as_str).map(str::to_string).filter(|t| !t.is_empty());
    Ok(SetupRequest { username, org, bucket, retention_s: retention, token })
}

/// `POST /api/v2/setup`: 201 with user, org, bucket and auth, or InfluxDB's error.
pub(super) async fn setup(State(db): State<Arc<MetricsDb>>, body: Bytes) -> Response {
    if !db.onboarding_allowed() {
        let e = (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"code": "conflict", "message": "onboarding has already been completed"}),
        );
        return api_err(&db, None, e);
    }
    let answer = request(&body).and_then(|r| {
        let made = db.onboard(&r.username, &r.org, &r.bucket, r.retention_s, r.token)?;
        if let Some(path) = &db.options.setup_file {
            let token = made.pointer("/auth/token").and_then(Value::as_str).unwrap_or_default();
            super::kept_setup::keep(path, &r.username, &r.org, &r.bucket, r.retention_s, token);
        }
        Ok(made)
    });
    match answer {
        Ok(v) => json_answer(StatusCode::CREATED, &v),
        Err(e) => api_err(&db, None, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_are_named_and_passwords_checked() {
        let e = request(br#"{"username":"u"}"#).unwrap_err();
        assert_eq!(e.1["message"], "onboarding failed: missing required fields [org,bucket]");
        let e = request(br#"{"username":"u","org":"o","bucket":"b","password":"short"}"#).unwrap_err();
        assert_eq!((e.0, e.1["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid")));
        let ok = request(br#"{"username":"u","org":"o","bucket":"b","retentionPeriodHrs":7200000000000}"#).unwrap();
        assert_eq!(ok.retention_s, 7200);
        assert_eq!(request(b"{").unwrap_err().0, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
