//! Salt's `--return`, `--return_config` and `--return_kwargs`, the same on
//! `halite` and `halite-call`, so both binaries flatten this one group.

use clap::Args;

/// The returners a job's return is also sent to, and their options.
#[derive(Args, Debug, Clone, Default)]
pub struct ReturnerArgs {
    /// Send the return to these returners too (comma separated), from the
    /// minion, as Salt's `--return`.
    #[arg(long = "return")]
    pub returner: Option<String>,
    /// The returners' options profile (Salt's `--return_config`).
    #[arg(long = "return_config", visible_alias = "return-config")]
    pub return_config: Option<String>,
    /// Options for the returners over the configured ones, a mapping
    /// (Salt's `--return_kwargs`, e.g. `'{"tag": "deploy"}'`).
    #[arg(long = "return_kwargs", visible_alias = "return-kwargs")]
    pub return_kwargs: Option<String>,
}
