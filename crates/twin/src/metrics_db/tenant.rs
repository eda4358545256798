//! The metrics-db twin's tenancy, as InfluxDB v2.7.12 keeps it: organisations, users, bucket
//! descriptions and authorizations (tokens with permissions). A fresh server holds none of
//! them until onboarding (`onboarding`); the twin started "already onboarded" holds what a
//! setup with its flags would have made.
//!
//! Two kinds of token matter to opsbook and are told apart here, as influxd tells them
//! apart (`authz.go` `matchesV1`): the **operator** token that setup returns (read and write on
//! every resource type but `instance`, with no org: `influxdb.OperPermissions()`), and an
//! **all-access** token (the same resource types, each scoped to one org), which
//! `/api/v2/config` refuses.
//!
//! Simplification: bucket names are unique over the whole twin (InfluxDB makes them unique
//! per org); the stack uses one org, and the data store is keyed by name.

use serde_json::{Value, json};

use opsbook_base::secret::Secret;

/// The resource types of InfluxDB v2.7.12 (`authz.go` `AllResourceTypes`), `instance` last.
pub(super) const RESOURCE_TYPES: [&str; 23] = [
    "authorizations",
    "buckets",
    "dashboards",
    "orgs",
    "sources",
    "tasks",
    "telegrafs",
    "users",
    "variables",
    "scrapers",
    "secrets",
    "labels",
    "views",
    "documents",
    "notificationRules",
    "notificationEndpoints",
    "checks",
    "dbrp",
    "notebooks",
    "annotations",
    "remotes",
    "replications",
    "instance",
];

/// One permission: an action on a resource type, maybe scoped to an org or one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Permission {
    pub action: String,
    pub kind: String,
    pub org_id: Option<String>,
    pub id: Option<String>,
}

impl Permission {
    /// Read and write on every resource type but `instance`, scoped to `org` (none: the
    /// operator's).
    pub(super) fn everything(org: Option<&str>) -> Vec<Permission> {
        let kinds = RESOURCE_TYPES.iter().filter(|k| **k != "instance");
        kinds
            .flat_map(|kind| {
                ["read", "write"].map(|action| Permission {
                    action: action.into(),
                    kind: kind.to_string(),
                    org_id: org.map(str::to_string),
                    id: None,
                })
            })
            .collect()
    }

    /// Whether this permission grants `action` on `kind` in `org` (a permission with no org
    /// grants it in every org), on the resource `id` when the permission names one.
    fn grants(&self, action: &str, kind: &str, org: &str, id: Option<&str>) -> bool {
        self.action == action
            && self.kind == kind
            && self.org_id.as_deref().is_none_or(|o| o == org)
            && self.id.as_deref().is_none_or(|p| Some(p) == id)
    }

    /// `{"action","resource":{"type","orgID"?,"id"?,"org"?}}` as the authorizations API
    /// answers it (`authorization/http_server.go` `newPermissionsResponse`).
    pub(super) fn to_json(&self, org_name: Option<&str>) -> Value {
        let mut resource = json!({"type": self.kind});
        if let Some(id) = &self.id {
            resource["id"] = json!(id);
        }
        if let Some(org) = &self.org_id {
            resource["orgID"] = json!(org);
            if let Some(name) = org_name {
                resource["org"] = json!(name);
            }
        }
        json!({"action": self.action, "resource": resource})
    }
}

#[derive(Debug, Clone)]
pub(super) struct Org {
    pub id: String,
    pub name: String,
    pub created: String,
}

#[derive(Debug, Clone)]
pub(super) struct User {
    pub id: String,
    pub name: String,
}

/// A bucket's description (its points live in the data store, by name).
#[derive(Debug, Clone)]
pub(super) struct BucketInfo {
    pub id: String,
    pub org_id: String,
    pub name: String,
    pub description: Option<String>,
    /// `system` or `user`.
    pub kind: &'static str,
    /// Seconds; 0: kept forever.
    pub retention_s: u64,
    pub shard_group_s: Option<u64>,
    pub created: String,
}

/// A token and what it may do.
#[derive(Debug, Clone)]
pub(super) struct Authorization {
    pub id: String,
    pub token: Secret,
    pub org_id: String,
    pub user_id: String,
    pub description: String,
    pub permissions: Vec<Permission>,
    pub created: String,
}

impl Authorization {
    /// InfluxDB's `OperPermissions()` held in full: what `/api/v2/config` requires.
    pub(super) fn is_operator(&self) -> bool {
        Permission::everything(None).iter().all(|p| self.permissions.contains(p))
    }

    /// Whether the token may do `action` on `kind` in `org` (on resource `id`, if one).
    pub(super) fn allows(&self, action: &str, kind: &str, org: &str, id: Option<&str>) -> bool {
        self.permissions.iter().any(|p| p.grants(action, kind, org, id))
    }
}

/// Everything tenancy holds.
#[derive(Debug, Default)]
pub(super) struct Tenant {
    pub orgs: Vec<Org>,
    pub users: Vec<User>,
    pub buckets: Vec<BucketInfo>,
    pub auths: Vec<Authorization>,
    /// IDs handed out so far (each ID is derived from this count).
    issued: u64,
}

/// A 16-hex-digit ID, as InfluxDB's snowflake IDs print (never starting with 0).
pub(super) fn id16(seed: u64) -> String {
    format!("{:016x}", seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 0x0100_0000_0000_0000)
}

/// A new token in the shape influxd makes: 64 random bytes, URL-safe base64 (88 characters,
/// ending `==`).
pub(super) fn new_token(seed: u64) -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let state = std::collections::hash_map::RandomState::new();
    let mut bytes = Vec::with_capacity(64);
    for i in 0..8u64 {
        let mut h = state.build_hasher();
        h.write_u64(seed ^ i.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ crate::clock::now_ns() as u64);
        bytes.extend(h.finish().to_le_bytes());
    }
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out.push_str("==");
    out
}

/// Now as InfluxDB stamps `createdAt` (RFC 3339 with nanoseconds, UTC).
pub(super) fn now_stamp() -> String {
    crate::logger::now_rfc3339(9)
}

impl Tenant {
    /// The next unused ID.
    pub(super) fn next_id(&mut self) -> String {
        self.issued += 1;
        id16(self.issued + 100)
    }

    /// Whether onboarding is still allowed: no user and no org yet
    /// (`tenant/service_onboarding.go` `IsOnboarding`).
    pub(super) fn onboarding_allowed(&self) -> bool {
        self.users.is_empty() && self.orgs.is_empty()
    }

    pub(super) fn org_by_name(&self, name: &str) -> Option<&Org> {
        self.orgs.iter().find(|o| o.name == name)
    }

    pub(super) fn org_by_id(&self, id: &str) -> Option<&Org> {
        self.orgs.iter().find(|o| o.id == id)
    }

    pub(super) fn user_by_id(&self, id: &str) -> Option<&User> {
        self.users.iter().find(|u| u.id == id)
    }

    /// The authorization holding `token`, compared in constant time per candidate.
    pub(super) fn find_token(&self, token: &str) -> Option<&Authorization> {
        self.auths.iter().find(|a| constant_time_eq(token.as_bytes(), a.token.expose().as_bytes()))
    }

    /// A new org with its system buckets `_monitoring` (7 days) and `_tasks` (3 days), as
    /// `tenant/service_org.go` `CreateOrganization` makes them.
    pub(super) fn add_org(&mut self, name: &str) -> Org {
        let org = Org { id: self.next_id(), name: name.to_string(), created: now_stamp() };
        self.orgs.push(org.clone());
        for (bucket, days) in [("_monitoring", 7), ("_tasks", 3)] {
            let info = BucketInfo {
                id: self.next_id(),
                org_id: org.id.clone(),
                name: bucket.into(),
                description: Some(format!("System bucket for {}", &bucket[1..])),
                kind: "system",
                retention_s: days * 86_400,
                shard_group_s: Some(86_400),
                created: now_stamp(),
            };
            self.buckets.push(info);
        }
        org
    }

    pub(super) fn add_user(&mut self, name: &str) -> User {
        let user = User { id: self.next_id(), name: name.to_string() };
        self.users.push(user.clone());
        user
    }

    /// A new user bucket (the name must be free: see the top).
    pub(super) fn add_bucket(&mut self, org_id: &str, name: &str, retention_s: u64) -> BucketInfo {
        let info = BucketInfo {
            id: self.next_id(),
            org_id: org_id.to_string(),
            name: name.to_string(),
            description: None,
            kind: "user",
            retention_s,
            shard_group_s: None,
            created: now_stamp(),
        };
        self.buckets.push(info.clone());
        info
    }

    /// A new authorization; its token is `token` or a fresh one.
    pub(super) fn add_auth(
        &mut self,
        org_id: &str,
        user_id: &str,
        description: &str,
        permissions: Vec<Permission>,
        token: Option<String>,
    ) -> Authorization {
        let id = self.next_id();
        let token = token.filter(|t| !t.is_empty()).unwrap_or_else(|| new_token(self.issued));
        let auth = Authorization {
            id,
            token: Secret::new(token),
            org_id: org_id.to_string(),
            user_id: user_id.to_string(),
            description: description.to_string(),
            permissions,
            created: now_stamp(),
        };
        self.auths.push(auth.clone());
        auth
    }

    /// An authorization as `/api/v2/authorizations` and `/api/v2/setup` answer it, token
    /// included.
    pub(super) fn auth_json(&self, a: &Authorization) -> Value {
        let org = self.org_by_id(&a.org_id).map(|o| o.name.as_str());
        let user = self.user_by_id(&a.user_id).map(|u| u.name.as_str());
        let permissions: Vec<Value> = a
            .permissions
            .iter()
            .map(|p| p.to_json(p.org_id.as_deref().and_then(|o| self.org_by_id(o)).map(|o| o.name.as_str())))
            .collect();
        json!({
            "id": a.id, "token": a.token.expose(), "status": "active", "description": a.description,
            "orgID": a.org_id, "org": org.unwrap_or(""), "userID": a.user_id, "user": user.unwrap_or(""),
            "permissions": permissions,
            "links": {"self": format!("/api/v2/authorizations/{}", a.id), "user": format!("/api/v2/users/{}", a.user_id)},
            "createdAt": a.created, "updatedAt": a.created,
        })
    }
}

/// Compares every byte either way: the length leaks, the content does not.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= (*x ^ b.get(i).copied().unwrap_or(0)) as usize;
    }
    diff == 0 && !b.is_empty()
}

/// The JSON of an org, as `/api/v2/orgs` and `/api/v2/setup` answer it.
pub(super) fn org_json(o: &Org) -> Value {
    let id = &o.id;
    json!({
        "links": {
            "buckets": format!("/api/v2/buckets?org={}", o.name),
            "dashboards": format!("/api/v2/dashboards?org={}", o.name),
            "labels": format!("/api/v2/orgs/{id}/labels"),
            "logs": format!("/api/v2/orgs/{id}/logs"),
            "members": format!("/api/v2/orgs/{id}/members"),
            "owners": format!("/api/v2/orgs/{id}/owners"),
            "secrets": format!("/api/v2/orgs/{id}/secrets"),
            "self": format!("/api/v2/orgs/{id}"),
            "tasks": format!("/api/v2/tasks?org={}", o.name)
        },
        "id": id, "name": o.name, "description": "", "createdAt": o.created, "updatedAt": o.created,
    })
}

/// The JSON of a bucket (`tenant/http_server_bucket.go` `bucketResponse`).
pub(super) fn bucket_json(b: &BucketInfo) -> Value {
    let (id, org) = (&b.id, &b.org_id);
    let mut rule = json!({"type": "expire", "everySeconds": b.retention_s});
    if let Some(s) = b.shard_group_s {
        rule["shardGroupDurationSeconds"] = json!(s);
    }
    // An infinite retention is no rule at all.
    let rules = if b.retention_s == 0 { vec![] } else { vec![rule] };
    let mut v = json!({
        "id": id, "orgID": org, "type": b.kind, "name": b.name, "retentionRules": rules,
        "createdAt": b.created, "updatedAt": b.created,
        "links": {
            "labels": format!("/api/v2/buckets/{id}/labels"),
            "members": format!("/api/v2/buckets/{id}/members"),
            "org": format!("/api/v2/orgs/{org}"),
            "owners": format!("/api/v2/buckets/{id}/owners"),
            "self": format!("/api/v2/buckets/{id}"),
            "write": format!("/api/v2/write?org={org}&bucket={id}")
        },
        "labels": []
    });
    if let Some(d) = &b.description {
        v["description"] = json!(d);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_and_all_access_differ_by_org_scope() {
        let mut t = Tenant::default();
        let org = t.add_org("opsbook");
        let user = t.add_user("admin");
        let oper = t.add_auth(&org.id, &user.id, "admin's Token", Permission::everything(None), Some("op".into()));
        let all = t.add_auth(&org.id, &user.id, "all", Permission::everything(Some(&org.id)), None);
        assert!(oper.is_operator() && !all.is_operator());
        assert!(all.allows("write", "buckets", &org.id, None));
        assert!(!all.allows("write", "buckets", "0000000000000001", None));
        assert_eq!(t.find_token("op").map(|a| a.id.clone()), Some(oper.id));
        assert_eq!((all.token.expose().len(), all.token.expose().ends_with("==")), (88, true));
        assert_eq!(t.buckets.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["_monitoring", "_tasks"]);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abd", b"abc"));
        assert!(!constant_time_eq(b"", b""));
    }
}
