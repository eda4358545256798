//! Deploy's onboarding of a fresh InfluxDB 2 (`influx::onboard`), against the metrics-db twin
//! run as a fresh `influxd` would be (no org, bucket or token until `POST /api/v2/setup`): the
//! org and bucket are made, the operator token is written to `metrics_db.token_file` with mode
//! 0600 and works, it appears in no output, and a second onboarding changes nothing.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::support::{Test, wait_until};

const ONBOARD: &str = r#"//! Sets up the metrics database, then lists its buckets with the new token.
let first = influx::onboard(#{ retention: "30d" });
check("first onboarding changed", first.changed, first.detail);
let names = influx::buckets().map(|b| b.name);
check("bucket made", names.contains(config.metrics_db.bucket), `${names}`);
let second = influx::onboard(#{});
check("second onboarding changed nothing", !second.changed, second.detail);
"#;

#[test]
fn a_fresh_metrics_database_is_set_up_and_its_token_kept_unseen() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let db = Test::new().args(["twin", "metrics-db", "--listen", &format!("127.0.0.1:{port}")]).spawn();
    let url = format!("http://127.0.0.1:{port}");
    // reqwest is built without a crypto provider: this test may run without the others that
    // install one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    wait_until("the fresh metrics database answers", Duration::from_secs(10), || {
        reqwest::blocking::get(format!("{url}/health")).map(|_| ())
    });
    let test = Test::new();
    let token_file = test.path().join("secrets/influx.token");
    let test = test
        .config(&format!(
            "[metrics_db]\nurl = \"{url}\"\ntoken_file = \"{}\"\norg = \"ops\"\nbucket = \"metrics\"\n",
            token_file.display()
        ))
        .runbook("onboard", ONBOARD);
    let out = test.args(["run", "onboard"]).run();
    let token = std::fs::read_to_string(&token_file).expect("the token file is written");
    assert_eq!(token.len(), 48, "a 48-digit token");
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let shown = format!("{}{}", out.stdout, out.stderr);
    assert!(!shown.contains(&token), "the token was shown:\n{shown}");
    out.code(0).stdout_is(&String::from(
        "onboard (runbooks/onboard.rhai)
  ok    first onboarding changed — set up the metrics database (org ops, bucket metrics, retention [DUR]) and keep its operator token in [TMP]/secrets/influx.token
  ok    bucket made — [\"_monitoring\", \"_tasks\", \"metrics\"]
  ok    second onboarding changed nothing — the metrics database is set up already

3 passed, 0 failed  ([DUR])
"
    ));
    db.signal(libc::SIGTERM);
    db.wait(Duration::from_secs(10));
}
