//! `#[tier(NAME)]`: marks a test that needs something beyond this repository. When this machine
//! cannot run the tier, the test is compiled with `#[ignore = "<tier>: <reason>"]`, so that
//! cargo itself lists it as ignored with the reason, instead of a test that returns early and
//! prints `ok`. `cargo test -- --include-ignored` runs it anyway (and it fails, naming what is
//! missing).
//!
//! Tiers (probed by this crate's build script when it is compiled):
//! - `upstream`: the upstream assets named by `MCS_UPSTREAM_ASSETS`;
//! - `promtool`: Prometheus' `promtool` on `PATH`;
//! - `ignition`: Debian's `ignition` (the real client and `ignition-validate`);
//! - `libfaketime`: Debian's `libfaketime` (a replica whose wall clock runs ahead);
//! - `ignition_current`: `ignition-validate` of Ignition 2.26 or newer (spec 3.6), named by
//!   `MCS_IGNITION_VALIDATE` (built where the tests run; no package ships one);
//! - `real_apiserver`: a real kube-apiserver named by `KUBEBUILDER_ASSETS`;
//! - `in_test_apiserver`: the in-test API server is the one tests get (`KUBEBUILDER_ASSETS`
//!   unset), for tests that change the cluster while the code under test sees an outage;
//! - `openssl_fips`: OpenSSL's FIPS provider in the directory `MCS_OPENSSL_FIPS_DIR` names
//!   (made by `.ci/openssl-fips-provider`), for the server in FIPS mode (OpenSSL build);
//! - `haproxy`: Debian's `haproxy` (`/usr/sbin/haproxy`), a real load balancer sending the
//!   PROXY protocol;
//! - `netns`: a network namespace of its own (`unshare --net`, root), for callers on fixed
//!   ports (HyperShift's ignition server runs the server on 22625 and 22626).

use proc_macro::{Delimiter, Group, Punct, Spacing, TokenStream, TokenTree};

/// See the crate documentation. Several tiers may be named (`#[tier(ignition, upstream)]`): the
/// test runs when this machine can run all of them.
#[proc_macro_attribute]
pub fn tier(attribute: TokenStream, item: TokenStream) -> TokenStream {
    let text = attribute.to_string();
    let mut missing = Vec::new();
    for name in text.split(',').map(str::trim) {
        let decision = match name {
            "upstream" => env!("MCS_TIER_UPSTREAM"),
            "promtool" => env!("MCS_TIER_PROMTOOL"),
            "ignition" => env!("MCS_TIER_IGNITION"),
            "libfaketime" => env!("MCS_TIER_LIBFAKETIME"),
            "ignition_current" => env!("MCS_TIER_IGNITION_CURRENT"),
            "real_apiserver" => env!("MCS_TIER_REAL_APISERVER"),
            "in_test_apiserver" => env!("MCS_TIER_IN_TEST_APISERVER"),
            "openssl_fips" => env!("MCS_TIER_OPENSSL_FIPS"),
            "haproxy" => env!("MCS_TIER_HAPROXY"),
            "netns" => env!("MCS_TIER_NETNS"),
            other => {
                return compile_error(&format!(
                    "unknown tier {other:?}: upstream, promtool, ignition, ignition_current, libfaketime, real_apiserver, in_test_apiserver, openssl_fips, haproxy or netns"
                ))
            }
        };
        if decision != "1" {
            missing.push(format!("{name}: {decision}"));
        }
    }
    if missing.is_empty() {
        return item;
    }
    let mut out = attribute_tokens(&format!("ignore = {:?}", missing.join("; ")));
    out.extend(item);
    out
}

/// `#[<inner>]` as tokens.
fn attribute_tokens(inner: &str) -> TokenStream {
    let inner: TokenStream = inner.parse().expect("a valid attribute");
    [
        TokenTree::Punct(Punct::new('#', Spacing::Alone)),
        TokenTree::Group(Group::new(Delimiter::Bracket, inner)),
    ]
    .into_iter()
    .collect()
}

fn compile_error(message: &str) -> TokenStream {
    format!("compile_error!({message:?});")
        .parse()
        .expect("a valid compile_error! call")
}
