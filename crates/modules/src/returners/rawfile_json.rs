//! Salt's `rawfile_json` returner (`salt/returners/rawfile_json.py`): the
//! return dict as one JSON line (Python's `json.dump`) appended to
//! `rawfile_json.filename` (default `/var/log/salt/events`) under an
//! exclusive lock, as Salt's `flopen` takes one; and Salt's `local`
//! returner, which prints the dict (Python's `print(ret)`) on the
//! process's standard output.

use std::io::Write;

use halite_salt_rules::pyfmt::{json_dumps, python_repr};
use halite_state::Value;

use super::options::Lookup;
use super::ReturnerError;
use crate::Host;

/// `rawfile_json.returner(ret)`.
pub fn returner(_host: &Host, opts: &Lookup<'_>, ret: &Value) -> Result<(), ReturnerError> {
    let path = opts.string("rawfile_json", "filename", "/var/log/salt/events");
    let failed = |e: std::io::Error| {
        ReturnerError::Send(format!(
            "Could not write to rawdata_json file {path}: {e} (set rawfile_json.filename to a writable file)"
        ))
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(failed)?;
    file.lock().map_err(failed)?;
    let line = format!("{}\n", json_dumps(ret, false, None, true));
    file.write_all(line.as_bytes()).map_err(failed)?;
    Ok(())
}

/// `local.returner(ret)`: the dict on standard output.
pub fn local(_host: &Host, _opts: &Lookup<'_>, ret: &Value) -> Result<(), ReturnerError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", python_repr(ret))
        .map_err(|e| ReturnerError::Send(format!("cannot print the return: {e}")))
}
