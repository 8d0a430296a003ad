//! Compiling a minion's pillar from `pillar_roots`: the pillar top file,
//! then each matched SLS rendered (Jinja + YAML) and deep-merged in order.

use halite_state::target::MinionFacts;
use halite_state::{SlsSource, Value};

use crate::exec::pillar::deep_merge;
use crate::sls::FileSls;
use crate::Host;

/// Renders the pillar of `host` from the file roots of `pillar_host`
/// (a host whose file client serves `pillar_roots`). Returns the pillar
/// and the errors (Salt puts them under `_errors`).
pub fn compile_pillar(pillar_host: &Host) -> (Value, Vec<String>) {
    let source = FileSls::new(pillar_host);
    let envs = pillar_host.files.envs();
    let mut errors = Vec::new();
    let top = match halite_state::top::get_top(&source, &envs) {
        Ok(t) => t,
        Err(e) => return (Value::Object(Default::default()), e),
    };
    let id = pillar_host
        .opts
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let empty = Value::Object(Default::default());
    let facts = MinionFacts {
        id: &id,
        grains: &pillar_host.grains,
        pillar: &empty,
    };
    let matches = match halite_state::top::top_matches(&top, &facts, None) {
        Ok(m) => m,
        Err(e) => return (Value::Object(Default::default()), e),
    };
    let mut pillar = Value::Object(Default::default());
    let mut seen = std::collections::HashSet::new();
    for (env, slses) in matches {
        for sls in slses {
            render_into(&source, &sls, &env, &mut pillar, &mut errors, &mut seen);
        }
    }
    (pillar, errors)
}

fn render_into(
    source: &FileSls<'_>,
    sls: &str,
    env: &str,
    pillar: &mut Value,
    errors: &mut Vec<String>,
    seen: &mut std::collections::HashSet<String>,
) {
    if !seen.insert(format!("{env}:{sls}")) {
        return;
    }
    match source.render(sls, env) {
        Ok(None) => errors.push(format!(
            "Specified SLS '{sls}' in environment '{env}' is not available on the salt master"
        )),
        Err(e) => errors.push(format!("Rendering SLS '{sls}' failed, render error:\n{e}")),
        Ok(Some(r)) => match r.data {
            Value::Object(mut m) => {
                if let Some(Value::Array(incs)) = m.shift_remove("include") {
                    for inc in incs {
                        match inc {
                            Value::String(s) => render_into(source, &s, env, pillar, errors, seen),
                            Value::Object(o) => {
                                for k in o.keys() {
                                    render_into(source, k, env, pillar, errors, seen);
                                }
                            }
                            _ => {}
                        }
                    }
                }
                deep_merge(pillar, &Value::Object(m));
            }
            Value::Null => {}
            _ => errors.push(format!("SLS '{sls}' does not render to a dictionary")),
        },
    }
}
