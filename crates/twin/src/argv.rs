//! The real components' command lines, made readable to clap before parsing: the twins are
//! started with the command lines of the programs they stand in for (a unit's ExecStart with
//! the twin's program in front), and two of those do not fit opsbook's own conventions.
//!
//! - Loki and Telegraf take Go's single-dash flags (`-config.file=PATH`, `-verify-config`,
//!   `-config PATH -test`): after `twin log-store` and `twin metrics-agent`, a `-long-name`
//!   becomes `--long-name`.
//! - Telegraf's config file is `--config PATH`, which is opsbook's global option (its own
//!   TOML file): after `twin metrics-agent`, `--config PATH` (or `=PATH`) becomes the
//!   agent's CONFIG argument, and opsbook's global option is left alone everywhere else.

use std::ffi::OsString;

/// The command line with the twins' real-program flags translated (see the top).
pub fn translate(args: Vec<OsString>) -> Vec<OsString> {
    let Some(at) =
        args.windows(2).position(|w| w[0] == "twin" && matches!(w[1].to_str(), Some("log-store" | "metrics-agent")))
    else {
        return args;
    };
    let service = args[at + 1].to_str().unwrap_or_default().to_string();
    let mut out: Vec<OsString> = args[..at + 2].to_vec();
    let mut rest = args[at + 2..].iter();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg.clone());
            continue;
        };
        if text == "--" {
            out.push(arg.clone());
            out.extend(rest.cloned());
            break;
        }
        // Both programs take Go's single-dash long flags (Telegraf's two dashes as well).
        // (`-vv` stays opsbook's verbosity.)
        let verbosity = text[1..].chars().all(|c| c == 'v');
        let text = if text.len() > 2 && text.starts_with('-') && !text.starts_with("--") && !verbosity {
            format!("-{text}")
        } else {
            text.to_string()
        };
        match service.as_str() {
            "metrics-agent" if text == "--config" => {
                if let Some(path) = rest.next() {
                    out.push(path.clone());
                }
            }
            "metrics-agent" if text.starts_with("--config=") => {
                out.push(text.split_once('=').map_or("", |(_, p)| p).into());
            }
            _ => out.push(text.into()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(args: &[&str]) -> Vec<String> {
        translate(args.iter().map(OsString::from).collect()).iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn loki_flags_get_two_dashes() {
        assert_eq!(
            t(&[
                "opsbook",
                "twin",
                "log-store",
                "-config.file=/etc/loki/config.yaml",
                "-verify-config",
                "--ready-delay",
                "1s"
            ]),
            vec![
                "opsbook",
                "twin",
                "log-store",
                "--config.file=/etc/loki/config.yaml",
                "--verify-config",
                "--ready-delay",
                "1s"
            ]
        );
        assert_eq!(t(&["opsbook", "twin", "log-store", "-vv"]), vec!["opsbook", "twin", "log-store", "-vv"]);
    }

    #[test]
    fn telegrafs_config_is_the_agents_file() {
        assert_eq!(
            t(&["opsbook", "-v", "twin", "metrics-agent", "--config", "/etc/telegraf/telegraf.conf", "--test"]),
            vec!["opsbook", "-v", "twin", "metrics-agent", "/etc/telegraf/telegraf.conf", "--test"]
        );
        assert_eq!(
            t(&["opsbook", "twin", "metrics-agent", "--config=/t.conf"]),
            vec!["opsbook", "twin", "metrics-agent", "/t.conf"]
        );
        assert_eq!(
            t(&["opsbook", "twin", "metrics-agent", "-config", "/t.conf", "-test"]),
            vec!["opsbook", "twin", "metrics-agent", "/t.conf", "--test"]
        );
        // The packaged unit's command line: `telegraf -config FILE -config-directory DIR`.
        assert_eq!(
            t(&["opsbook", "twin", "metrics-agent", "-config", "/t.conf", "-config-directory", "/t.d"]),
            vec!["opsbook", "twin", "metrics-agent", "/t.conf", "--config-directory", "/t.d"]
        );
    }

    #[test]
    fn other_command_lines_are_untouched() {
        let run = ["opsbook", "--config", "/etc/opsbook.toml", "run", "quick-check"];
        assert_eq!(t(&run), run.to_vec());
        let shipper = ["opsbook", "twin", "log-shipper", "run", "--server.http.listen-addr=127.0.0.1:1", "c.alloy"];
        assert_eq!(t(&shipper), shipper.to_vec());
    }
}
