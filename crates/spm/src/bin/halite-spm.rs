//! `halite-spm`: Salt's `spm` command line on top of the halite-spm library.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use halite_spm::states::{LocalStateRunner, StateRunOutcome};
use halite_spm::{config::DEFAULT_CONFIG_DIR, PackageDb, SpmConfig, SpmError};

/// Builds, installs and removes Salt formula packages (`.spm`).
#[derive(Debug, Parser)]
#[command(name = "halite-spm", version, about)]
struct Cli {
    /// The config dir whose `spm` file sets every path.
    #[arg(short = 'c', long = "config-dir", global = true, default_value = DEFAULT_CONFIG_DIR)]
    config_dir: PathBuf,
    /// Answer yes to every confirmation question.
    #[arg(short = 'y', long = "assume-yes", global = true)]
    assume_yes: bool,
    /// Reinstall, overwrite existing files, remove packages others depend on.
    #[arg(short = 'f', long = "force", global = true)]
    force: bool,
    /// Say what is done to every file.
    #[arg(short = 'v', long = "verbose", global = true)]
    verbose: bool,
    /// Log level (error, warning, info, debug, trace).
    #[arg(
        short = 'l',
        long = "log-level",
        global = true,
        default_value = "warning"
    )]
    log_level: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build the formula in DIR into <name>-<version>-<release>.spm in spm_build_dir.
    Build { dir: PathBuf },
    /// Work on package files: `local install FILE...`, `local info FILE`, `local files FILE`.
    Local {
        #[command(subcommand)]
        action: LocalCommand,
    },
    /// Install packages by name from the repositories (or .spm files), dependencies first.
    Install {
        #[arg(required = true)]
        packages: Vec<String>,
    },
    /// Remove installed packages (files edited since install are kept).
    Remove {
        #[arg(required = true)]
        packages: Vec<String>,
    },
    /// Show an installed package.
    Info { package: String },
    /// List an installed package's files.
    Files { package: String },
    /// `list packages` (the default), `list files NAME`, `list repos`.
    List { what: Vec<String> },
    /// Write DIR/SPM-METADATA describing the .spm files in DIR.
    #[command(name = "create_repo")]
    CreateRepo { dir: PathBuf },
    /// Download the metadata of every configured repository (or only REPO).
    #[command(name = "update_repo", aliases = ["update_repos", "refresh"])]
    UpdateRepo { repo: Option<String> },
}

#[derive(Debug, Subcommand)]
enum LocalCommand {
    /// Install .spm files.
    Install {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Show a package file's FORMULA summary.
    Info { file: PathBuf },
    /// List a package file's members.
    Files { file: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.log_level.as_str() {
        "warning" | "warn" => "warn",
        "critical" | "quiet" => "error",
        "garbage" | "all" => "trace",
        other => other,
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let config = SpmConfig::load(&cli.config_dir)?;
    // Builds touch neither the database nor the install roots.
    let _lock = match cli.command {
        Command::Build { .. } => None,
        _ => Some(halite_spm::transaction::lock(&config)?),
    };
    match &cli.command {
        Command::Build { dir } => {
            let built = halite_spm::build(dir, &config.spm_build_dir, &config.spm_build_exclude)?;
            println!("Built package {}", built.path.display());
        }
        Command::Local {
            action: LocalCommand::Install { files },
        } => {
            let requests: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            install(&cli, &config, &requests)?;
        }
        Command::Local {
            action: LocalCommand::Info { file },
        } => {
            let package = halite_spm::read_package(file)?;
            println!("{}", describe_formula(&package.formula));
        }
        Command::Local {
            action: LocalCommand::Files { file },
        } => {
            let package = halite_spm::read_package(file)?;
            for member in &package.members {
                if member.path.is_empty() {
                    println!("{}", package.formula.name);
                } else {
                    println!("{}/{}", package.formula.name, member.path);
                }
            }
        }
        Command::Install { packages } => install(&cli, &config, packages)?,
        Command::Remove { packages } => remove(&cli, &config, packages)?,
        Command::Info { package } => {
            let db = open_db(&config)?;
            let info = db
                .package(package)?
                .ok_or_else(|| SpmError::NotInstalled(package.clone()))?;
            println!("{}", halite_spm::describe(&info));
        }
        Command::Files { package } => list_files(&cli, &config, package)?,
        Command::List { what } => match what
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            [] | ["packages"] => {
                let db = open_db(&config)?;
                for package in db.packages()? {
                    if cli.verbose {
                        println!("{},{},{}", package.name, package.version, package.release);
                    } else {
                        println!("{}", package.name);
                    }
                }
            }
            ["files", package] => list_files(&cli, &config, package)?,
            ["repos"] => {
                for repo in halite_spm::repo::configured_repos(&config)? {
                    println!("{}", repo.name);
                }
            }
            _ => bail!(
                "Invalid list command '{}' (use packages, files NAME or repos)",
                what.join(" ")
            ),
        },
        Command::CreateRepo { dir } => {
            let dir = if dir == Path::new(".") {
                std::env::current_dir()?
            } else {
                dir.clone()
            };
            let listed = halite_spm::repo::create_repo(&dir)?;
            println!(
                "Wrote {} ({} package(s))",
                dir.join("SPM-METADATA").display(),
                listed.len()
            );
        }
        Command::UpdateRepo { repo } => {
            let updated = halite_spm::repo::update_repos(&config, repo.as_deref())?;
            if let (Some(name), true) = (repo, updated.is_empty()) {
                bail!(
                    "no enabled repository named {name} in {}",
                    config.spm_repos_config.display()
                );
            }
            for name in updated {
                println!("Updated {name}");
            }
        }
    }
    Ok(())
}

fn install(cli: &Cli, config: &SpmConfig, requests: &[String]) -> anyhow::Result<()> {
    let mut db = open_db(config)?;
    let plan = halite_spm::plan_install(config, &db, requests, cli.force)?;
    if !plan.optional.is_empty() {
        println!(
            "The following dependencies are optional:\n\t{}\n",
            plan.optional.join("\n\t")
        );
    }
    if !plan.recommended.is_empty() {
        println!(
            "The following dependencies are recommended:\n\t{}\n",
            plan.recommended.join("\n\t")
        );
    }
    let names: Vec<&str> = plan.order.iter().map(|(n, _)| n.as_str()).collect();
    confirm(
        cli,
        &format!("Installing packages:\n\t{}\n", names.join("\n\t")),
    )?;
    let runner = HookRunner {
        // The hooks' state runs keep their cache (and state-run lock)
        // under SPM's cache, as Salt's SPM runs them with its own opts.
        inner: halite_spm::HaliteCallRunner::locate()
            .map(|r| r.with_cachedir(config.spm_cache_dir.join("caller"))),
    };
    for name in &names {
        println!("... installing {name}");
    }
    let reports = halite_spm::execute_plan(config, &mut db, &plan, cli.force, &runner)?;
    for report in reports {
        for note in &report.notes {
            if cli.verbose || note.starts_with("kept ") {
                println!("{}: {note}", report.package);
            } else {
                tracing::info!("{}: {note}", report.package);
            }
        }
        if cli.verbose {
            for path in &report.installed {
                println!("Installed {}", path.display());
            }
        }
    }
    Ok(())
}

fn remove(cli: &Cli, config: &SpmConfig, packages: &[String]) -> anyhow::Result<()> {
    if !config.spm_db.exists() {
        bail!(
            "No database at {}, cannot remove {}",
            config.spm_db.display(),
            packages.join(", ")
        );
    }
    confirm(
        cli,
        &format!("Removing packages:\n\t{}", packages.join("\n\t")),
    )?;
    let mut db = open_db(config)?;
    for package in packages {
        println!("... removing {package}");
        let report = halite_spm::remove_package(&mut db, package, cli.force)?;
        for path in &report.kept_modified {
            println!("Not removing modified file {}", path.display());
        }
        if cli.verbose {
            for path in &report.removed {
                println!("Removed {}", path.display());
            }
            for path in &report.kept_dirs {
                println!("Cannot remove directory {}, not empty", path.display());
            }
        }
    }
    Ok(())
}

fn list_files(cli: &Cli, config: &SpmConfig, package: &str) -> anyhow::Result<()> {
    let db = open_db(config)?;
    let files = db
        .files(package)?
        .ok_or_else(|| SpmError::NotInstalled(package.to_string()))?;
    for file in files {
        if cli.verbose {
            println!(
                "{},{},{},{},{}:{},{}",
                file.path.display(),
                file.sha256,
                file.mode,
                file.size,
                file.owner,
                file.group,
                if file.file_type.is_empty() {
                    "-"
                } else {
                    &file.file_type
                }
            );
        } else {
            println!("{}", file.path.display());
        }
    }
    Ok(())
}

/// Salt's prompt: the action, then `Proceed? [N/y]`; `-y` skips it.
fn confirm(cli: &Cli, action: &str) -> anyhow::Result<()> {
    if cli.assume_yes {
        return Ok(());
    }
    println!("{action}");
    print!("Proceed? [N/y] ");
    std::io::stdout()
        .flush()
        .context("cannot write the prompt")?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    if answer.trim_start().to_lowercase().starts_with('y') {
        Ok(())
    } else {
        Err(SpmError::Canceled.into())
    }
}

fn describe_formula(formula: &halite_spm::Formula) -> String {
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "None".to_string());
    format!(
        "Name: {}\nVersion: {}\nRelease: {}\nInstall Date: Not installed\nSupported OSes: {}\n\
         Supported OS families: {}\nDependencies: {}\nSummary: {}\nDescription:\n{}",
        formula.name,
        formula.version,
        formula.release,
        or_none(&formula.os),
        or_none(&formula.os_family),
        if formula.dependencies.is_empty() {
            "None".to_string()
        } else {
            formula.dependencies.join(",")
        },
        formula.summary,
        formula.description
    )
}

/// Runs hooks through halite-call when it is found; says so when it is not.
struct HookRunner {
    inner: Option<halite_spm::HaliteCallRunner>,
}

impl LocalStateRunner for HookRunner {
    fn apply(&self, sls_text: &str, saltenv_root: &Path) -> Result<StateRunOutcome, String> {
        match &self.inner {
            Some(runner) => runner.apply(sls_text, saltenv_root),
            None => Err(
                "halite-call was not found next to halite-spm or on PATH; it runs pre/post states"
                    .into(),
            ),
        }
    }
}

/// Opens the package database, first finishing or undoing an install that
/// was killed midway (see `halite_spm::transaction`).
fn open_db(config: &SpmConfig) -> anyhow::Result<PackageDb> {
    let db = PackageDb::open(&config.spm_db)?;
    if let Some(done) = halite_spm::transaction::recover(config, &db)? {
        eprintln!("halite-spm: {done}");
    }
    Ok(db)
}
