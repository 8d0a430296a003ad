//! Salt's `lowpkg` execution module: the package database (dpkg, rpm)
//! without repositories.

use halite_state::Value;

use crate::exec::pkg::names_of;
use crate::exec::{Args, ExecError, ExecFunction, ExecTable};
use crate::pkg::{lowpkg_for, pkg_versions_to_value};
use crate::Host;

/// The module's table; each function asks the package database chosen
/// from the host's `os_family` grain.
pub const MODULE: ExecTable = ExecTable {
    name: "lowpkg",
    functions: &[
        ExecFunction::new("list_pkgs", list_pkgs),
        ExecFunction::new("verify", verify),
        ExecFunction::new("file_list", file_list),
        ExecFunction::new("file_dict", file_dict),
        ExecFunction::new("bin_pkg_info", bin_pkg_info),
    ],
};

/// `lowpkg.list_pkgs [names...]`: installed packages and their versions.
fn list_pkgs(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let low = lowpkg_for(&host.grains)?;
    Ok(pkg_versions_to_value(
        &low.list_pkgs(&names_of(args))?,
        false,
    ))
}

/// `lowpkg.verify [names...]`: files that differ from the package database.
fn verify(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let low = lowpkg_for(&host.grains)?;
    Ok(Value::Object(low.verify(&names_of(args))?))
}

/// `lowpkg.file_list [names...]`: the files of packages, in one list.
fn file_list(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let low = lowpkg_for(&host.grains)?;
    Ok(Value::Object(low.file_list(&names_of(args))?))
}

/// `lowpkg.file_dict [names...]`: the files of packages, by package.
fn file_dict(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let low = lowpkg_for(&host.grains)?;
    Ok(Value::Object(low.file_dict(&names_of(args))?))
}

/// `lowpkg.bin_pkg_info <path>`: what a package file is.
fn bin_pkg_info(args: &Args, host: &Host) -> Result<Value, ExecError> {
    let low = lowpkg_for(&host.grains)?;
    let path = args.require_str(0, "path", "bin_pkg_info")?;
    Ok(Value::Object(low.bin_pkg_info(&path)?))
}
