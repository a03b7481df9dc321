//! The `Accept` header: `ignition::accept::negotiate`. The input is the header value's bytes;
//! the server reads it with `String::from_utf8_lossy`, and so does this check.
//!
//! Properties: the answer is a servable spec version or the defined error carrying the header;
//! it is deterministic; no `vnd.coreos.ignition+json` entry means 2.2 (as an absent header);
//! whitespace around `,` and `;` does not matter (the original trims every piece); and an entry
//! of another media type appended at the end changes nothing, as long as no `q` is NaN (Go's
//! sort is then not a total order, and the original's answer depends on the list's length).

use machine_config_server::ignition::accept::negotiate;
use machine_config_server::ignition::SpecVersion;

const IGNITION_TYPE: &str = "vnd.coreos.ignition+json";

pub fn check(data: &[u8]) {
    let header = String::from_utf8_lossy(data);
    let header = header.as_ref();
    let answer = negotiate(Some(header));
    assert_eq!(
        answer,
        negotiate(Some(header)),
        "negotiation is deterministic"
    );
    match &answer {
        Ok(version) => assert!(SpecVersion::ALL.contains(version)),
        Err(error) => {
            assert_eq!(error.header, header, "the error carries the header");
            assert!(
                header.contains(IGNITION_TYPE),
                "an error needs an Ignition entry"
            );
        }
    }
    if !header.contains(IGNITION_TYPE) {
        assert_eq!(answer, Ok(SpecVersion::V2_2), "no Ignition entry means 2.2");
    }
    let spaced = header.replace(',', " ,\t").replace(';', " ; ");
    assert_eq!(
        negotiate(Some(&spaced)).ok(),
        answer.clone().ok(),
        "whitespace around separators: {spaced:?}"
    );
    if !header.to_ascii_lowercase().contains("nan") {
        let longer = format!("{header}, text/plain;q=0.5");
        assert_eq!(
            negotiate(Some(&longer)).ok(),
            answer.ok(),
            "a non-Ignition entry appended: {longer:?}"
        );
    }
    assert_eq!(negotiate(None), Ok(SpecVersion::V2_2));
}
