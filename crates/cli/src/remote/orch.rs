//! `halite-run state.orchestrate <sls>` (and `state.orch`, `state.sls`):
//! the arguments as salt-run takes them, the run through halite-runners,
//! and Salt's output (the highstate outputter over `<id>_master`; `--out
//! json` the runner's whole return).

use std::io::Write;
use std::sync::Arc;

use halite_client::MasterConfig;
use halite_runners::orchestrate::{orchestrate, Orchestrate};
use serde_json::{Map, Value};

use super::runner_call::RunnerCall;
use crate::output::{self, OutputOptions, Outputter};

/// The orchestration `call` asks for: `<sls>` (or `mods=`), `saltenv=`,
/// `pillar=`, `test=`, `exclude=`.
pub fn request(call: &RunnerCall) -> anyhow::Result<Orchestrate> {
    let parsed = crate::args::parse_args(&call.args);
    let mods = parsed
        .positional
        .first()
        .or_else(|| parsed.kwargs.get("mods"))
        .map(|v| match v {
            Value::Array(a) => a.iter().map(halite_salt_rules::pyfmt::python_str).collect(),
            other => halite_salt_rules::pyfmt::python_str(other)
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        })
        .unwrap_or_default();
    Ok(Orchestrate {
        mods,
        saltenv: parsed
            .kwargs
            .get("saltenv")
            .map(halite_salt_rules::pyfmt::python_str),
        pillar: parsed.kwargs.get("pillar").cloned(),
        test: parsed
            .kwargs
            .get("test")
            .is_some_and(halite_salt_rules::truthy),
        exclude: parsed.kwargs.get("exclude").cloned(),
        user: None,
    })
}

/// Runs the orchestration and prints it; the exit code (the run's retcode).
pub fn run(cfg: &MasterConfig, call: &RunnerCall, out: &mut dyn Write) -> anyhow::Result<i32> {
    let req = request(call)?;
    let events: Arc<dyn halite_modules::host::EventSink> =
        Arc::new(halite_runners::event::MasterBus::new(cfg));
    let orch = orchestrate(cfg, &req, events)?;
    let outputter = call.out.as_deref().and_then(Outputter::parse);
    match outputter {
        Some(Outputter::Json) => writeln!(out, "{}", output::json(&orch.to_value(), 4))?,
        Some(other) if other != Outputter::Highstate => {
            let mut data = Map::new();
            data.insert(orch.id.clone(), orch.data.clone());
            writeln!(
                out,
                "{}",
                output::render(other, &data, &OutputOptions::default(), orch.retcode)
            )?;
        }
        _ => {
            let mut data = Map::new();
            data.insert(orch.id.clone(), orch.data.clone());
            writeln!(
                out,
                "{}",
                output::render(
                    Outputter::Highstate,
                    &data,
                    &OutputOptions::default(),
                    orch.retcode
                )
            )?;
        }
    }
    Ok(orch.retcode)
}
