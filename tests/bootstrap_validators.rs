//! What the running server serves passes validators we did not write: every spec version of the
//! bundled example, of the project's full-size fixture and (upstream tier) of the
//! upstream-rendered fixture, fetched over TLS from the real binary, is accepted by Debian's
//! `ignition-validate` (specs it knows) and (upstream tier) by the upstream JSON schemas (3.0 to
//! 3.5; the 3.5 output also by the 3.6 schema).

use support::fixtures;
use support::mcs;
use support::tier;
use support::upstream;
use support::validators;

use validators::{assert_matches_schema, ignition_validate, schema};

/// Every spec the server serves of `base_dir`'s master pool, fetched over TLS from the real
/// binary: (spec minor, served document).
fn served_3x(base_dir: &std::path::Path) -> Vec<(u8, serde_json::Value)> {
    let server = mcs::Server::bootstrap(base_dir, &[]);
    (0..=5u8)
        .map(|minor| {
            let accept = format!("application/vnd.coreos.ignition+json;version=3.{minor}.0");
            let response = server.https("GET", "/config/master", &[("Accept", &accept)]);
            assert_eq!(response.status, 200, "3.{minor}:\n{}", server.output());
            (minor, response.json())
        })
        .collect()
}

/// `ignition-validate` accepts every served spec it knows (3.0 to 3.4).
fn validated_by_ignition(base_dir: &std::path::Path) {
    let work = tempfile::tempdir().unwrap();
    let validated = served_3x(base_dir)
        .iter()
        .filter(|(minor, served)| {
            let label = format!("{} served as 3.{minor}", base_dir.display());
            ignition_validate(work.path(), &label, served)
        })
        .count();
    assert_eq!(validated, 5);
}

/// Every served spec matches its upstream JSON schema, and the 3.5 output the 3.6 one.
fn matches_the_upstream_schemas(base_dir: &std::path::Path) {
    let v3_6 = schema(6);
    for (minor, served) in served_3x(base_dir) {
        let label = format!("{} served as 3.{minor}", base_dir.display());
        assert_matches_schema(&schema(minor), &label, &served);
        if minor == 5 {
            assert_matches_schema(&v3_6, &format!("{label} (3.6 schema)"), &served);
        }
    }
}

#[tier(ignition)]
#[test]
fn served_example_configs_validate() {
    validated_by_ignition(&mcs::repo().join("config/bootstrap"));
}

#[tier(ignition)]
#[test]
fn served_full_size_configs_validate() {
    validated_by_ignition(&fixtures::bootstrap_full());
}

#[tier(ignition, upstream)]
#[test]
fn served_upstream_rendered_configs_validate() {
    validated_by_ignition(&upstream::realistic_fixture());
}

#[tier(upstream)]
#[test]
fn served_configs_match_the_upstream_json_schemas() {
    for base_dir in [
        mcs::repo().join("config/bootstrap"),
        fixtures::bootstrap_full(),
        upstream::realistic_fixture(),
    ] {
        matches_the_upstream_schemas(&base_dir);
    }
}
