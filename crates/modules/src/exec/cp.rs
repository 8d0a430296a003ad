//! Salt's `cp` execution module, the listing part formulas call at render
//! time (`salt['cp.list_master_dirs'](prefix='users/files/user/')`).

use halite_state::Value;

use crate::exec::{Args, ExecError, ExecModule};
use crate::Host;

/// `cp.list_master`, `cp.list_master_dirs`, `cp.list_states`.
pub struct CpExec;

impl ExecModule for CpExec {
    fn name(&self) -> &'static str {
        "cp"
    }

    fn functions(&self) -> &'static [&'static str] {
        &["list_master", "list_master_dirs", "list_states"]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let saltenv = args
            .get_str(0, "saltenv")
            .filter(|s| !s.is_empty())
            .or_else(|| {
                host.opt("saltenv")
                    .and_then(|v| v.as_str().map(String::from))
            })
            .unwrap_or_else(|| "base".to_string());
        // Salt's fileserver strips '/' from the prefix, then keeps every
        // path that starts with it as a string ('users/files/user/' keeps
        // 'users/files/user'); the result is sorted.
        if fun == "list_states" {
            // Salt's Client.list_states: every .sls, `a/init.sls` as `a`,
            // slashes to dots, sorted and unique.
            let files = host
                .files
                .list_files(&saltenv, "")
                .map_err(|e| ExecError::Execution(e.to_string()))?;
            let mut out: Vec<String> = files
                .iter()
                .filter(|p| p.ends_with(".sls"))
                .map(|p| {
                    let dotted = p.replace('/', ".");
                    if p.ends_with("/init.sls") {
                        dotted[..dotted.len() - 9].to_string()
                    } else {
                        dotted[..dotted.len() - 4].to_string()
                    }
                })
                .collect();
            out.sort();
            out.dedup();
            return Ok(Value::Array(out.into_iter().map(Value::from).collect()));
        }
        let prefix = args.get_str(1, "prefix").unwrap_or_default();
        let prefix = prefix.trim_matches('/').to_string();
        let all = match fun {
            "list_master" => host.files.list_files(&saltenv, ""),
            "list_master_dirs" => host.files.list_dirs(&saltenv, ""),
            other => return Err(ExecError::NotAvailable(format!("cp.{other}"))),
        }
        .map_err(|e| ExecError::Execution(e.to_string()))?;
        let mut out: Vec<String> = all.into_iter().filter(|p| p.starts_with(&prefix)).collect();
        out.sort();
        out.dedup();
        Ok(Value::Array(out.into_iter().map(Value::from).collect()))
    }
}
