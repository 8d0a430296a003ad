//! Salt's `lowpkg` execution module: the package database (dpkg, rpm)
//! without repositories.

use halite_state::Value;

use crate::exec::pkg::names_of;
use crate::exec::{Args, ExecError, ExecModule};
use crate::pkg::{lowpkg_for, pkg_versions_to_value};
use crate::Host;

/// `lowpkg.*`: the database chosen from the host's `os_family` grain.
pub struct LowpkgExec;

impl ExecModule for LowpkgExec {
    fn name(&self) -> &'static str {
        "lowpkg"
    }

    fn functions(&self) -> Vec<&'static str> {
        vec![
            "list_pkgs",
            "verify",
            "file_list",
            "file_dict",
            "bin_pkg_info",
        ]
    }

    fn call(&self, fun: &str, args: &Args, host: &Host) -> Result<Value, ExecError> {
        let low = lowpkg_for(&host.grains)?;
        let names = names_of(args);
        match fun {
            "list_pkgs" => Ok(pkg_versions_to_value(&low.list_pkgs(&names)?, false)),
            "verify" => Ok(Value::Object(low.verify(&names)?)),
            "file_list" => Ok(Value::Object(low.file_list(&names)?)),
            "file_dict" => Ok(Value::Object(low.file_dict(&names)?)),
            "bin_pkg_info" => {
                let path = args.require_str(0, "path", fun)?;
                Ok(Value::Object(low.bin_pkg_info(&path)?))
            }
            other => Err(ExecError::NotAvailable(format!("lowpkg.{other}"))),
        }
    }
}

/// This module, as registered.
pub const MODULE: LowpkgExec = LowpkgExec;
