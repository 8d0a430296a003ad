//! The orchestrate outputter: an orchestration's return (a `salt.state`
//! step whose changes hold its minions' runs, a `salt.function` step)
//! printed as Salt 3008.5 prints it. The expected text was recorded from
//! Salt's own highstate outputter (`salt.output.out_format(data,
//! "highstate", opts)` with `color: False`, in ~/.venvs/salt) over the
//! same data (`fixtures/orchestrate.json`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test's helpers may panic: a panic is a failed test (clippy.toml allows it only in #[test] functions)"
)]

use halite_cli::output::{render, OutputOptions, Outputter};

#[test]
fn orchestration_steps_print_their_minions_as_salt_does() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("orchestrate.json")).unwrap())
            .unwrap();
    let expected = std::fs::read_to_string(dir.join("orchestrate.highstate.txt")).unwrap();
    let text = render(
        Outputter::Highstate,
        data.as_object().unwrap(),
        &OutputOptions::default(),
        0,
    );
    assert_eq!(text, expected.trim_end_matches('\n'));
}
