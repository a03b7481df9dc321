//! The PROXY protocol behind a real load balancer: Debian's haproxy in TCP mode in front of both
//! serving ports of the real binary (cluster mode, against the test's API server: the in-test
//! one, or a real kube-apiserver with `KUBEBUILDER_ASSETS`), connecting from an address of its
//! own (127.0.0.9) as a balancer that does not keep client addresses. Machines connect to it
//! from their own loopback addresses:
//! - 127.0.0.2 through `send-proxy-v2` to the plain port, 127.0.0.3 through `send-proxy-v2` to the
//!   TLS port (the header comes before the ClientHello), 127.0.0.4 through `send-proxy` (v1);
//! - each gets the MCN of its own Node with its own bootstrap record (its address, its Ignition
//!   release), never `bootstrap-source-unknown`; the log lines name the machines, not haproxy;
//! - the access policy sees the machines too: 127.0.0.8 is refused through the balancer;
//! - a first-boot failure reported through the balancer ends on the reporting machine's MCN;
//! - a connection from the balancer's address without a header, and one from elsewhere with a
//!   header, are closed and counted.

use std::net::IpAddr;
use std::time::Duration;
use support::mcs;
use support::tier;

use machine_config_server::mcn;
use mcs::{poll, Server};
use support::api_server::{ApiServer, Options};
use support::cluster::{
    load_realistic_cluster, mcn_annotation, token_dir, worker_node, APISERVER_URL,
};
use support::haproxy::{Haproxy, Header};

const DEADLINE: Duration = Duration::from_secs(30);
const ACCEPT: (&str, &str) = (
    "Accept",
    "application/vnd.coreos.ignition+json;version=3.5.0, */*;q=0.1",
);
const BALANCER: &str = "127.0.0.9";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn metric(server: &Server, series: &str) -> f64 {
    let body = mcs::request(server.metrics, None, "GET", "/metrics", &[]).body;
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tier(haproxy)]
#[test]
fn machines_behind_haproxy_are_told_apart_by_the_proxy_protocol() {
    let api = ApiServer::start(Options::default());
    eprintln!("API server: {}", api.describe());
    load_realistic_cluster(&api);
    let tokens = token_dir();
    let proxy_from = format!("{BALANCER}/32");
    let server = Server::start_cluster_with_flags(
        api.kubeconfig_file(),
        APISERVER_URL,
        tokens.path(),
        &[
            "--proxy-protocol-from",
            &proxy_from,
            "--allowed-source-cidrs",
            "127.0.0.2/31,127.0.0.4",
        ],
        &[
            (mcn::ENV_RESYNC_MS, "300"),
            (mcn::ENV_RETRY_PERIOD_MS, "200"),
        ],
    );
    let haproxy = Haproxy::start(
        &[
            (server.insecure, Header::V2),
            (server.secure, Header::V2),
            (server.insecure, Header::V1),
        ],
        ip(BALANCER),
    );
    let [plain_v2, tls_v2, plain_v1] = haproxy.frontends[..] else {
        unreachable!()
    };
    let boot = |machine: &str, frontend, tls, agent: &str| {
        mcs::request_from(
            ip(machine),
            frontend,
            tls,
            "GET",
            "/config/worker",
            &[ACCEPT, ("User-Agent", agent)],
        )
        .unwrap_or_else(|e| panic!("{machine}: {e}\n{}", haproxy.output()))
        .status
    };
    // Ready once the caches synced (503 before).
    poll("the server ready behind haproxy", DEADLINE, || {
        (boot("127.0.0.2", plain_v2, None, "Ignition/2.26.0") == 200).then_some(())
    });
    assert_eq!(
        boot(
            "127.0.0.3",
            tls_v2,
            Some(mcs::dev_ca_client()),
            "Ignition/v2.14.0-3-gabcdef0"
        ),
        200
    );
    assert_eq!(boot("127.0.0.4", plain_v1, None, "curl/8.5.0"), 200);
    // The access policy sees the machine behind the balancer.
    assert_eq!(boot("127.0.0.8", plain_v2, None, "Ignition/2.26.0"), 403);

    // The shared records (durable before each answer) name the machines, never the balancer.
    let records = poll("the machines' shared records", DEADLINE, || {
        let data = api.get(
            "ConfigMap",
            Some(support::cluster::MCO_NAMESPACE),
            mcn::exchange::DEFAULT_NAME,
        )?["data"]
            .to_string();
        ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
            .iter()
            .all(|machine| data.contains(&format!("\\\"{machine}\\\"")))
            .then_some(data)
    });
    assert!(!records.contains(BALANCER), "{records}");

    // Machine .4 reports a first-boot failure through the balancer (v1).
    let report = r#"{"pool":"worker","nodeID":"localhost","stage":"firstboot-update","imageURL":"quay.io/openshift/rhcos@sha256:0011","errorMessage":"error pulling image: token=s3cr3t&x=1"}"#;
    let raw = mcs::exchange_from(
        ip("127.0.0.4"),
        plain_v1,
        None,
        &mcs::post_json_bytes("/v1/node-failure", report, &[]),
    )
    .unwrap();
    let answer = mcs::parse_response(&raw, false).unwrap();
    assert_eq!(
        answer.status,
        202,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );

    // The machines join.
    for (name, address) in [
        ("worker-a", "127.0.0.2"),
        ("worker-b", "127.0.0.3"),
        ("worker-c", "127.0.0.4"),
    ] {
        api.create(&worker_node(name, address)).unwrap();
    }
    let bootstrap_of = |name: &str| {
        poll(&format!("{name}'s bootstrap record"), DEADLINE, || {
            let mcn = api.get("MachineConfigNode", None, name)?;
            mcn_annotation(&mcn, "bootstrap-served-at")?;
            Some(mcn)
        })
    };
    for (name, address, client) in [
        ("worker-a", "127.0.0.2", "2.26.0"),
        ("worker-b", "127.0.0.3", "2.14.0-3-gabcdef0"),
        ("worker-c", "127.0.0.4", "unknown"),
    ] {
        let mcn = bootstrap_of(name);
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-address").as_deref(),
            Some(address),
            "{name}: {mcn}"
        );
        assert_eq!(mcn_annotation(&mcn, "bootstrap-source-unknown"), None);
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-pool").as_deref(),
            Some("worker")
        );
        assert_eq!(
            mcn_annotation(&mcn, "bootstrap-ignition-client").as_deref(),
            Some(client),
            "{name}"
        );
    }
    let failed = poll("worker-c's first-boot failure", DEADLINE, || {
        let mcn = api.get("MachineConfigNode", None, "worker-c")?;
        mcn_annotation(&mcn, "firstboot-failure-stage")?;
        Some(mcn)
    });
    assert_eq!(
        mcn_annotation(&failed, "firstboot-failure-address").as_deref(),
        Some("127.0.0.4")
    );
    assert_eq!(
        mcn_annotation(&failed, "firstboot-failure-message").as_deref(),
        Some("error pulling image: token=[REDACTED]&x=1")
    );
    assert_eq!(
        mcn_annotation(&failed, "firstboot-failure-image").as_deref(),
        Some("quay.io")
    );
    for other in ["worker-a", "worker-b"] {
        let mcn = api.get("MachineConfigNode", None, other).unwrap();
        assert_eq!(
            mcn_annotation(&mcn, "firstboot-failure-stage"),
            None,
            "{other}"
        );
    }

    // The log names the machines, never the balancer, as the requests' remote address.
    let output = server.output();
    for machine in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        assert!(
            output.lines().any(
                |l| l.contains("config request answered") && l.contains(&format!("{machine}:"))
            ),
            "no request line names {machine}:\n{output}"
        );
    }
    assert!(
        !output
            .lines()
            .any(|l| l.contains("config request answered") && l.contains(&format!("{BALANCER}:"))),
        "a request line names the balancer:\n{output}"
    );
    poll("the failure report's log line", DEADLINE, || {
        server
            .output()
            .lines()
            .any(|l| l.contains("first-boot failure") && l.contains("127.0.0.4"))
            .then_some(())
    });

    // From the balancer's address without a header, from elsewhere with one: closed.
    let direct = mcs::request_from(ip(BALANCER), server.insecure, None, "GET", "/healthz", &[]);
    assert!(direct.is_err(), "{direct:?}");
    let mut forged = b"PROXY TCP4 10.9.9.9 127.0.0.1 1234 22624\r\n".to_vec();
    forged.extend(mcs::request_bytes("GET", "/config/worker", &[ACCEPT]));
    let forged = mcs::exchange_from(ip("127.0.0.1"), server.insecure, None, &forged);
    assert!(
        forged.as_ref().is_ok_and(|bytes| bytes.is_empty()) || forged.is_err(),
        "{forged:?}"
    );
    // Without a header from elsewhere: served as without the option (127.0.0.1 is not allowed
    // configs, so 403; /healthz is open).
    assert_eq!(server.http("GET", "/config/worker", &[ACCEPT]).status, 403);
    assert_eq!(server.http("GET", "/healthz", &[]).status, 200);

    let proxied = metric(
        &server,
        r#"mcs_proxy_protocol_connections_total{outcome="proxied"}"#,
    );
    assert!(proxied >= 5.0, "{proxied}");
    assert_eq!(
        metric(
            &server,
            r#"mcs_proxy_protocol_connections_total{outcome="missing_header"}"#
        ),
        1.0
    );
    assert_eq!(
        metric(
            &server,
            r#"mcs_proxy_protocol_connections_total{outcome="untrusted_header"}"#
        ),
        1.0
    );
    assert_eq!(
        metric(
            &server,
            r#"mcs_firstboot_failures_total{pool="worker",stage="firstboot-update"}"#
        ),
        1.0
    );
    assert!(
        metric(
            &server,
            r#"mcs_config_requests_by_ignition_total{ignition_version="2.14"}"#
        ) >= 1.0
    );
    assert!(output_has_one_rejection_line(&server));
}

/// One warning line per rejected source (both sources here were rejected once).
fn output_has_one_rejection_line(server: &Server) -> bool {
    poll("the rejection log lines", DEADLINE, || {
        let lines = server
            .output()
            .lines()
            .filter(|l| l.contains("closing connection: PROXY protocol header"))
            .count();
        (lines == 2).then_some(true)
    })
}
