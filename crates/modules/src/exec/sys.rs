//! Salt's `sys` execution module: what functions exist.

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// `sys.*` functions.
pub struct SysExec;

impl ExecModule for SysExec {
    fn name(&self) -> &'static str {
        "sys"
    }

    fn functions(&self) -> Vec<&'static str> {
        vec![
            "list_functions",
            "list_modules",
            "list_state_modules",
            "list_state_functions",
            "doc",
        ]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let filter = args.get_str(0, "module");
        let keep = |f: &str| match &filter {
            None => true,
            Some(m) if m.contains('*') => halite_salt_rules::fnmatch(f, m),
            Some(m) => f.starts_with(&format!("{m}.")) || f == m,
        };
        match fun {
            "list_functions" => Ok(Value::Array(
                host.exec
                    .list_functions()
                    .into_iter()
                    .filter(|f| keep(f))
                    .map(Value::from)
                    .collect(),
            )),
            "list_modules" => {
                let mut mods: Vec<String> = host
                    .exec
                    .list_functions()
                    .iter()
                    .filter_map(|f| f.split('.').next().map(String::from))
                    .collect();
                mods.dedup();
                Ok(Value::Array(mods.into_iter().map(Value::from).collect()))
            }
            "list_state_modules" => {
                Ok(Value::Array(host.states.names().map(Value::from).collect()))
            }
            "list_state_functions" => {
                let mut out = Vec::new();
                for m in host.states.names() {
                    if let Some(module) = host.states.get(m) {
                        for f in module.functions() {
                            let full = format!("{m}.{f}");
                            if keep(&full) {
                                out.push(Value::from(full));
                            }
                        }
                    }
                }
                Ok(Value::Array(out))
            }
            "doc" => Ok(Value::Object(Default::default())),
            other => Err(ExecError::NotAvailable(format!("sys.{other}"))),
        }
    }
}

/// This module, as registered.
pub const MODULE: SysExec = SysExec;
