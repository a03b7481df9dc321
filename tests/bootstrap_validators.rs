//! What the running server serves passes validators we did not write: every spec version of the
//! bundled example, of the project's full-size fixture and (upstream tier) of the
//! upstream-rendered fixture, fetched over TLS from the real binary, is accepted by Debian's
//! `ignition-validate` (specs it knows) and, when the upstream assets are there, by the upstream
//! JSON schemas (3.0 to 3.5; the 3.5 output also by the 3.6 schema).

#[path = "support/fixtures.rs"]
mod fixtures;
#[path = "support/mcs.rs"]
mod mcs;
#[path = "support/validators.rs"]
mod validators;

use validators::upstream;

use validators::{assert_matches_schema, ignition_validate, schema};

fn check_served(base_dir: &std::path::Path) {
    let server = mcs::Server::bootstrap(base_dir, &[]);
    let work = tempfile::tempdir().unwrap();
    let (mut validated, mut schema_checked) = (0, 0);
    for minor in 0..=5u8 {
        let accept = format!("application/vnd.coreos.ignition+json;version=3.{minor}.0");
        let response = server.https("GET", "/config/master", &[("Accept", &accept)]);
        assert_eq!(response.status, 200, "3.{minor}:\n{}", server.output());
        let served = response.json();
        let label = format!("{} served as 3.{minor}", base_dir.display());
        if let (Some(validator), Some(v3_6)) = (schema(minor), schema(6)) {
            assert_matches_schema(&validator, &label, &served);
            schema_checked += 1;
            if minor == 5 {
                assert_matches_schema(&v3_6, &format!("{label} (3.6 schema)"), &served);
            }
        }
        if ignition_validate(work.path(), &label, &served) {
            validated += 1;
        }
    }
    let schemas = if upstream::dir().is_some_and(|d| d.join("schemas/ignition").is_dir()) {
        6
    } else {
        0
    };
    assert_eq!((validated, schema_checked), (5, schemas));
}

#[test]
fn served_example_configs_validate() {
    check_served(&mcs::repo().join("config/bootstrap"));
}

#[test]
fn served_full_size_configs_validate() {
    check_served(&fixtures::bootstrap_full());
}

#[test]
fn served_upstream_rendered_configs_validate() {
    if let Some(fixture) = upstream::realistic_fixture() {
        check_served(&fixture);
    }
}
