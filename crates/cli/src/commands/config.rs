//! `cascade config`: the proxy's effective settings, one `key = value  # from SOURCE` line
//! each (`default`, `file` or `flag`), from the same `--config FILE` and flags as `cascade
//! proxy`. The keys are those of docs/configuration.md.

use std::io::Write as _;

use cascade_proxy::config::settings_with_sources;

use crate::commands::proxy::ProxyArgs;
use crate::error::CliError;

/// Flags of `cascade config`: those of `cascade proxy`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    #[command(flatten)]
    pub(crate) settings: ProxyArgs,
}

/// Prints every setting with its source.
pub(crate) fn run(args: &ConfigArgs) -> Result<(), CliError> {
    let settings = args.settings.settings()?;
    let text = render(&settings.config, settings.file.as_deref(), &settings.flags);
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| CliError::Write {
            file: "<stdout>".into(),
            problem: e.to_string(),
        })
}

/// The lines: `key = value  # from SOURCE`; a key unset by default is written as a comment.
fn render(config: &cascade_proxy::ProxyConfig, file: Option<&str>, flags: &[&str]) -> String {
    let mut out = String::new();
    for (setting, source) in settings_with_sources(config, file, flags) {
        let line = match &setting.value {
            Some(value) => format!("{} = {value}  # from {source}\n", setting.path),
            None => format!("# {} is unset  # from {source}\n", setting.path),
        };
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cascade_proxy::ProxyConfig;

    #[test]
    fn each_line_names_its_source() {
        let text = "upstream = \"http://u\"\n[cascade.calibration]\nprior_tokens = 0\n";
        let mut config = ProxyConfig::from_toml_str(text).unwrap();
        config.window.force = Some(32_000);
        let out = render(&config, Some(text), &["window.force"]);
        assert!(
            out.contains("upstream = \"http://u\"  # from file\n"),
            "{out}"
        );
        assert!(
            out.contains("cascade.calibration.prior_tokens = 0.0  # from file\n"),
            "{out}"
        );
        assert!(out.contains("window.force = 32000  # from flag\n"), "{out}");
        assert!(
            out.contains("cascade.layer1.headroom_ratio = 0.75  # from default\n"),
            "{out}"
        );
        assert!(
            out.contains("# summarizer.model is unset  # from default\n"),
            "{out}"
        );
    }
}
