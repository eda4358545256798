//! The `PROGRAM_build_info` gauge every Go server of the stack exposes on its `/metrics`.

/// The `PROGRAM_build_info` gauge every Go server of the stack exposes (Prometheus' version
/// collector), as the log store's and the shipper's `/metrics` carry it.
pub(crate) fn build_info(w: &mut opsbook_wire::exposition::Writer, program: &str, version: &str, go: &str, tags: &str) {
    let name = format!("{program}_build_info");
    w.family(
        &name,
        "gauge",
        &format!(
            "A metric with a constant '1' value labeled by version, revision, branch, goversion from which \
             {program} was built, and the goos and goarch for the build."
        ),
    )
    .sample(
        &name,
        &[
            ("branch", "HEAD"),
            ("goarch", "amd64"),
            ("goos", "linux"),
            ("goversion", go),
            ("revision", "opsbook-twin"),
            ("tags", tags),
            ("version", version),
        ],
        1.0,
    );
}
