//! The vendors' four packages as the tests' local repositories serve them: `alloy` and `loki`
//! (Grafana's), `telegraf` and `influxdb2` (InfluxData's), laid out as the vendors lay theirs
//! out — program paths, units (where the vendor puts them, with the vendor's command lines),
//! environment files, sample configurations as conffiles, accounts made by the maintainer
//! scripts (Alloy's joins `systemd-journal` and `adm`), services enabled or started as each
//! vendor's postinst does — each program a small wrapper that executes the twin of opsbook
//! (`opsbook twin SERVICE`, which takes the real programs' command lines), at
//! /usr/local/bin/opsbook on the host. Sources: grafana/alloy packaging/deb, grafana/loki
//! tools/packaging, influxdata/telegraf scripts/, influxdata/influxdb .circleci/packages.

/// One package: its control fields, files (path, mode, text), conffiles and maintainer
/// scripts (preinst, postinst, prerm, postrm).
pub(crate) struct Deb {
    pub name: &'static str,
    pub version: &'static str,
    pub description: &'static str,
    pub files: Vec<(&'static str, u32, String)>,
    pub conffiles: Vec<&'static str>,
    pub scripts: Vec<(&'static str, String)>,
}

/// The program of a package: the twin of the component, given the program's command line.
fn wrapper(program: &str, service: &str) -> String {
    format!(
        "#!/bin/sh\n# {program} for the tests: the twin of opsbook stands in for it and takes its command line.\n\
         exec /usr/local/bin/opsbook twin {service} \"$@\"\n"
    )
}

/// Grafana Alloy, as its deb: /usr/bin/alloy, its unit in /usr/lib/systemd/system, settings
/// in /etc/default/alloy; not started by the package.
pub(crate) fn alloy(version: &'static str) -> Deb {
    let unit = "[Unit]\nDescription=Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines\n\
        Documentation=https://grafana.com/docs/alloy\nWants=network-online.target\nAfter=network-online.target\n\n\
        [Service]\nType=notify\nRestart=always\nUser=alloy\nEnvironment=HOSTNAME=%H\nEnvironment=ALLOY_DEPLOY_MODE=deb\n\
        EnvironmentFile=/etc/default/alloy\nWorkingDirectory=/var/lib/alloy\n\
        ExecStart=/usr/bin/alloy run $CUSTOM_ARGS --storage.path=/var/lib/alloy/data $CONFIG_FILE\n\
        ExecReload=/usr/bin/env kill -HUP $MAINPID\nTimeoutStopSec=20s\n\n[Install]\nWantedBy=multi-user.target\n";
    let defaults = "## Path:\n## Description: Grafana Alloy settings\n## Type:        string\n## Default:     \"\"\n\
        ## ServiceRestart: alloy\n#\n# Command line options for Alloy.\n#\n# The configuration file holding the Alloy config.\n\
        CONFIG_FILE=\"/etc/alloy/config.alloy\"\n\n# User-defined arguments to pass to the run command.\nCUSTOM_ARGS=\"\"\n\n\
        # Restart on system upgrade. Defaults to true.\nRESTART_ON_UPGRADE=true\n";
    let postinst = "#!/bin/sh\nset -e\n[ -f /etc/default/alloy ] && . /etc/default/alloy\ncase \"$1\" in\n  configure)\n\
        \x20   [ -z \"$ALLOY_USER\" ] && ALLOY_USER=alloy\n    [ -z \"$ALLOY_GROUP\" ] && ALLOY_GROUP=alloy\n\
        \x20   getent group \"$ALLOY_GROUP\" >/dev/null 2>&1 || groupadd -r \"$ALLOY_GROUP\"\n\
        \x20   getent passwd \"$ALLOY_USER\" >/dev/null 2>&1 || useradd -m -r -g \"$ALLOY_GROUP\" -d /var/lib/alloy -s /sbin/nologin -c \"alloy user\" \"$ALLOY_USER\"\n\
        \x20   # Add Alloy user to groups used for reading logs.\n\
        \x20   if getent group adm >/dev/null 2>&1; then usermod -a -G adm \"$ALLOY_USER\"; fi\n\
        \x20   if getent group systemd-journal >/dev/null 2>&1; then usermod -a -G systemd-journal \"$ALLOY_USER\"; fi\n\
        \x20   [ -d /var/lib/alloy ] || { mkdir /var/lib/alloy; chown \"$ALLOY_USER:$ALLOY_GROUP\" /var/lib/alloy; chmod 770 /var/lib/alloy; }\n\
        \x20   [ -d /var/lib/alloy/data ] || { mkdir /var/lib/alloy/data; chown \"$ALLOY_USER:$ALLOY_GROUP\" /var/lib/alloy/data; chmod 770 /var/lib/alloy/data; }\n\
        \x20   chown root:\"$ALLOY_GROUP\" /etc/alloy\n    chmod 770 /etc/alloy\n    ;;\nesac\n";
    let prerm = "#!/bin/sh\nset -e\nif [ \"$1\" = remove ] && [ -d /run/systemd/system ]; then\n  systemctl stop alloy.service || true\nfi\n";
    Deb {
        name: "alloy",
        version,
        description: "Vendor-agnostic OpenTelemetry Collector distribution with programmable pipelines (test package)",
        files: vec![
            ("/usr/bin/alloy", 0o755, wrapper("alloy", "log-shipper")),
            ("/usr/lib/systemd/system/alloy.service", 0o644, unit.to_string()),
            ("/etc/default/alloy", 0o644, defaults.to_string()),
            (
                "/etc/alloy/config.alloy",
                0o640,
                "// The package's sample configuration.\nlogging {\n  level = \"warn\"\n}\n".into(),
            ),
        ],
        conffiles: vec!["/etc/default/alloy", "/etc/alloy/config.alloy"],
        scripts: vec![("postinst", postinst.to_string()), ("prerm", prerm.to_string())],
    }
}

/// Grafana Loki, as its deb (nfpm): /usr/local/bin/loki, its unit in /etc/systemd/system,
/// /etc/loki/config.yml; the postinst adds the user, enables and starts it.
pub(crate) fn loki(version: &'static str) -> Deb {
    let unit = "[Unit]\nDescription=Loki service\nAfter=network.target\n\n[Service]\nType=simple\nUser=loki\n\
        ExecStart=/usr/local/bin/loki -config.file /etc/loki/config.yml\n\
        # Give a reasonable amount of time for the server to start up/shut down\nTimeoutSec = 120\n\
        Restart = on-failure\nRestartSec = 2\n\n[Install]\nWantedBy=multi-user.target\n";
    let config = "auth_enabled: false\n\nserver:\n  http_listen_port: 3100\n  grpc_listen_port: 9096\n  log_level: info\n\n\
        common:\n  instance_addr: 127.0.0.1\n  path_prefix: /tmp/loki\n  storage:\n    filesystem:\n\
        \x20     chunks_directory: /tmp/loki/chunks\n      rules_directory: /tmp/loki/rules\n  replication_factor: 1\n\
        \x20 ring:\n    kvstore:\n      store: inmemory\n\nschema_config:\n  configs:\n    - from: 2020-10-24\n\
        \x20     store: tsdb\n      object_store: filesystem\n      schema: v13\n      index:\n        prefix: index_\n\
        \x20       period: 24h\n";
    let postinst = "#!/bin/sh\nif ! command -V systemctl >/dev/null 2>&1; then\n  echo \"Could not find systemd. Skipping system installation.\" && exit 0\nfi\n\
        if [ \"$1\" = configure ] && [ -z \"$2\" ]; then\n\
        \x20 id loki >/dev/null 2>&1 || adduser --system --disabled-password --shell /bin/false loki\n\
        \x20 systemctl daemon-reload ||:\n  systemctl unmask loki ||:\n  systemctl preset loki ||:\n\
        \x20 systemctl enable loki ||:\n  systemctl restart loki ||:\nfi\n";
    Deb {
        name: "loki",
        version,
        description: "Loki: like Prometheus, but for logs (test package)",
        files: vec![
            ("/usr/local/bin/loki", 0o755, wrapper("loki", "log-store")),
            ("/etc/systemd/system/loki.service", 0o644, unit.to_string()),
            ("/etc/loki/config.yml", 0o644, config.to_string()),
        ],
        conffiles: vec!["/etc/loki/config.yml"],
        scripts: vec![("postinst", postinst.to_string())],
    }
}

/// Telegraf, as its deb: /usr/bin/telegraf; the postinst copies its unit from
/// /usr/lib/telegraf/scripts to /lib/systemd/system and enables it (started only when it ran).
pub(crate) fn telegraf(version: &'static str) -> Deb {
    let unit = "[Unit]\nDescription=Telegraf\nDocumentation=https://github.com/influxdata/telegraf\n\
        After=network-online.target\nWants=network-online.target\n\n[Service]\nType=notify\nNotifyAccess=all\n\
        EnvironmentFile=-/etc/default/telegraf\nUser=telegraf\n\
        ExecStart=/usr/bin/telegraf -config /etc/telegraf/telegraf.conf -config-directory /etc/telegraf/telegraf.d $TELEGRAF_OPTS\n\
        ExecReload=/bin/kill -HUP $MAINPID\nRestart=on-failure\nRestartForceExitStatus=SIGPIPE\nKillMode=mixed\n\
        LimitMEMLOCK=8M:8M\nPrivateMounts=true\n\n[Install]\nWantedBy=multi-user.target\n";
    let preinst = "#!/bin/bash\nif ! id telegraf &>/dev/null; then\n  useradd --system -U -M telegraf -s /bin/false -d /etc/telegraf\nfi\n";
    let postinst = "#!/bin/bash\nLOG_DIR=/var/log/telegraf\nSCRIPT_DIR=/usr/lib/telegraf/scripts\n\
        [[ -f /etc/default/telegraf ]] || touch /etc/default/telegraf\n\
        [[ -d /etc/telegraf/telegraf.d ]] || mkdir -p /etc/telegraf/telegraf.d\n\
        test -d $LOG_DIR || mkdir -p $LOG_DIR\nchown -R -L telegraf:telegraf $LOG_DIR\nchmod 755 $LOG_DIR\n\
        if [ -d /run/systemd/system ]; then\n  cp -f $SCRIPT_DIR/telegraf.service /lib/systemd/system/telegraf.service\n\
        \x20 systemctl enable telegraf || true\n  systemctl daemon-reload || true\n\
        \x20 systemctl try-restart telegraf.service >/dev/null || true\nfi\n";
    let postrm = "#!/bin/bash\nif [[ \"$1\" = remove || \"$1\" = purge ]] && [[ -d /run/systemd/system ]]; then\n\
        \x20 systemctl disable telegraf >/dev/null 2>&1 || true\n  rm -f /lib/systemd/system/telegraf.service\n\
        \x20 systemctl daemon-reload || true\nfi\n";
    let config = "# The package's sample configuration.\n[agent]\n  interval = \"10s\"\n\n[[inputs.cpu]]\n";
    Deb {
        name: "telegraf",
        version,
        description: "Plugin-driven server agent for reporting metrics into InfluxDB (test package)",
        files: vec![
            ("/usr/bin/telegraf", 0o755, wrapper("telegraf", "metrics-agent")),
            ("/usr/lib/telegraf/scripts/telegraf.service", 0o644, unit.to_string()),
            ("/etc/telegraf/telegraf.conf", 0o644, config.to_string()),
        ],
        conffiles: vec!["/etc/telegraf/telegraf.conf"],
        scripts: vec![("preinst", preinst.into()), ("postinst", postinst.into()), ("postrm", postrm.into())],
    }
}

/// InfluxDB 2, as its deb: /usr/bin/influxd started by a script that waits for its health, its
/// unit in /usr/lib/systemd/system; the postinst writes /etc/default/influxdb2 and
/// /etc/influxdb/config.toml, enables and starts it — fresh, to be set up.
pub(crate) fn influxdb2(version: &'static str) -> Deb {
    let unit = "# If you modify this, please also make sure to edit init.sh\n\n[Unit]\n\
        Description=InfluxDB is an open-source, distributed, time series database\n\
        Documentation=https://docs.influxdata.com/influxdb/\nAfter=network-online.target\n\n[Service]\nUser=influxdb\n\
        Group=influxdb\nLimitNOFILE=65536\nEnvironmentFile=-/etc/default/influxdb2\n\
        ExecStart=/usr/lib/influxdb/scripts/influxd-systemd-start.sh\nKillMode=control-group\nRestart=on-failure\n\
        Type=forking\nPIDFile=/var/lib/influxdb/influxd.pid\nStateDirectory=influxdb\nStateDirectoryMode=0750\n\
        LogsDirectory=influxdb\nLogsDirectoryMode=0750\nUMask=0027\n\n[Install]\nWantedBy=multi-user.target\n\
        Alias=influxd.service\n";
    // As the vendor's: influxd in the background, its pid for systemd, then its health waited for.
    let start = "#!/bin/bash -e\n/usr/bin/influxd ${INFLUXD_OPTS} &\nPID=$!\necho $PID > /var/lib/influxdb/influxd.pid\n\
        BIND=$(sed -n 's/^ *http-bind-address *= *\"\\(.*\\)\"/\\1/p' \"${INFLUXD_CONFIG_PATH:-/etc/influxdb/config.toml}\" 2>/dev/null)\n\
        HOST=${BIND%:*}\nHOST=${HOST:-localhost}\nPORT=${BIND##*:}\nPORT=${PORT:-8086}\nset +e\nattempts=0\n\
        url=\"http://$HOST:$PORT/health\"\nresult=$(curl -k -s -o /dev/null $url -w %{http_code})\n\
        while [ \"${result:0:2}\" != \"20\" ] && [ \"${result:0:2}\" != \"40\" ]; do\n\
        \x20 attempts=$(($attempts+1))\n  echo \"InfluxDB API unavailable after $attempts attempts...\"\n\
        \x20 kill -0 $PID 2>/dev/null || exit 1\n  sleep 1\n  result=$(curl -k -s -o /dev/null $url -w %{http_code})\n\
        done\necho \"InfluxDB started\"\nset -e\n";
    let preinst = "#!/bin/bash\nDATA_DIR=/var/lib/influxdb\nUSER=influxdb\nGROUP=influxdb\n\
        if ! id influxdb &>/dev/null; then\n  useradd --system -U -M influxdb -s /bin/false -d $DATA_DIR\nfi\n\
        mkdir -p $DATA_DIR /var/log/influxdb\n";
    let postinst = "#!/bin/bash\nDATA_DIR=/var/lib/influxdb\nLOG_DIR=/var/log/influxdb\n\
        INFLUXD_CONFIG_PATH=/etc/influxdb/config.toml\n\
        if [[ ! -s /etc/default/influxdb2 ]]; then\n  echo \"INFLUXD_CONFIG_PATH=${INFLUXD_CONFIG_PATH}\" > /etc/default/influxdb2\nfi\n\
        mkdir -p $(dirname ${INFLUXD_CONFIG_PATH})\nconfig_path=${INFLUXD_CONFIG_PATH}\n\
        if [[ -s ${config_path} ]]; then config_path=${INFLUXD_CONFIG_PATH}.defaults; fi\n\
        printf 'bolt-path = \"/var/lib/influxdb/influxd.bolt\"\\nengine-path = \"/var/lib/influxdb/engine\"\\n' > ${config_path}\n\
        chown -R -L influxdb:influxdb $LOG_DIR\nchown -R -L influxdb:influxdb $DATA_DIR\nchmod 755 $LOG_DIR\nchmod 755 $DATA_DIR\n\
        if command -v systemctl &>/dev/null; then\n  systemctl daemon-reload\n  systemctl enable influxdb\n  systemctl restart influxdb\nfi\n";
    let prerm = "#!/bin/bash\nif [[ \"$1\" = remove ]] && [[ -d /run/systemd/system ]]; then\n\
        \x20 systemctl stop influxdb || true\n  systemctl disable influxdb || true\nfi\n";
    Deb {
        name: "influxdb2",
        version,
        description: "Distributed time-series database (test package)",
        files: vec![
            ("/usr/bin/influxd", 0o755, wrapper("influxd", "metrics-db")),
            ("/usr/lib/influxdb/scripts/influxd-systemd-start.sh", 0o755, start.to_string()),
            ("/usr/lib/systemd/system/influxdb.service", 0o644, unit.to_string()),
        ],
        conffiles: vec![],
        scripts: vec![("preinst", preinst.into()), ("postinst", postinst.into()), ("prerm", prerm.into())],
    }
}
