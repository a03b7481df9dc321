//! The in-cluster image registry's host names, and whether an image lives there.
//!
//! A booting node has no cluster DNS and no route to Service IPs, so an image pushed to the
//! in-cluster registry cannot be pulled in the initramfs; such pools boot the base image. Hosts
//! come from the Services (`<name>.<namespace>.svc:<first port>`, or without the port when the
//! Service declares none) and the Routes (`spec.host`) of `openshift-image-registry`, as the
//! original server computes them.
//!
//! The match is a plain string prefix, as in the original. A looser match can only send more
//! pools to the base image (two reboots instead of one), never serve an unpullable image, so no
//! host-boundary check is added. Pure; the cluster source calls [`registry_hosts`] on every
//! change of its Service and Route caches.

use k8s_openapi::api::core::v1::Service;

use crate::api::imagebuild::Route;

/// Namespace of the in-cluster image registry.
pub const REGISTRY_NAMESPACE: &str = "openshift-image-registry";

/// Host prefixes of the in-cluster registry, sorted and without duplicates.
pub fn registry_hosts(services: &[Service], routes: &[Route]) -> Vec<String> {
    let mut hosts = Vec::with_capacity(services.len() + routes.len());
    for service in services {
        let Some(name) = service.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
            continue;
        };
        let namespace = service
            .metadata
            .namespace
            .as_deref()
            .filter(|ns| !ns.is_empty())
            .unwrap_or(REGISTRY_NAMESPACE);
        let cluster_host = format!("{name}.{namespace}.svc");
        let first_port = service
            .spec
            .as_ref()
            .and_then(|spec| spec.ports.as_ref())
            .and_then(|ports| ports.first())
            .map(|port| port.port);
        hosts.push(match first_port {
            Some(port) => format!("{cluster_host}:{port}"),
            None => cluster_host,
        });
    }
    for route in routes {
        if !route.spec.host.is_empty() {
            hosts.push(route.spec.host.clone());
        }
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// The first registry host that `image` starts with, if any. Empty hosts never match.
pub fn in_cluster_registry_host<'a>(image: &str, hosts: &'a [String]) -> Option<&'a str> {
    hosts
        .iter()
        .map(String::as_str)
        .find(|host| !host.is_empty() && image.starts_with(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(yaml: &str) -> Service {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn route(yaml: &str) -> Route {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn hosts_from_services_with_and_without_ports_and_routes() {
        let with_ports = service(
            r#"
apiVersion: v1
kind: Service
metadata:
  name: image-registry
  namespace: openshift-image-registry
spec:
  clusterIP: 172.30.10.20
  ports:
  - name: 5000-tcp
    port: 5000
    protocol: TCP
    targetPort: 5000
  - name: metrics
    port: 60000
    protocol: TCP
"#,
        );
        let headless = service(
            r#"
apiVersion: v1
kind: Service
metadata:
  name: registry-headless
  namespace: openshift-image-registry
spec:
  clusterIP: None
"#,
        );
        let default_route = route(
            r#"
apiVersion: route.openshift.io/v1
kind: Route
metadata:
  name: default-route
  namespace: openshift-image-registry
spec:
  host: default-route-openshift-image-registry.apps.example.com
  to:
    kind: Service
    name: image-registry
"#,
        );
        let hostless = route(
            r#"
apiVersion: route.openshift.io/v1
kind: Route
metadata:
  name: pending
  namespace: openshift-image-registry
spec:
  to:
    kind: Service
    name: image-registry
"#,
        );
        let hosts = registry_hosts(&[with_ports, headless], &[default_route, hostless]);
        assert_eq!(
            hosts,
            vec![
                "default-route-openshift-image-registry.apps.example.com".to_string(),
                "image-registry.openshift-image-registry.svc:5000".to_string(),
                "registry-headless.openshift-image-registry.svc".to_string(),
            ]
        );
    }

    #[test]
    fn prefix_match() {
        let hosts = vec![
            "image-registry.openshift-image-registry.svc:5000".to_string(),
            "registry-headless.openshift-image-registry.svc".to_string(),
            String::new(),
        ];
        assert_eq!(
            in_cluster_registry_host(
                "image-registry.openshift-image-registry.svc:5000/openshift-machine-config-operator/os-image@sha256:aa",
                &hosts
            ),
            Some("image-registry.openshift-image-registry.svc:5000")
        );
        assert_eq!(
            in_cluster_registry_host(
                "registry-headless.openshift-image-registry.svc:443/ns/img@sha256:aa",
                &hosts
            ),
            Some("registry-headless.openshift-image-registry.svc")
        );
        assert_eq!(
            in_cluster_registry_host("quay.io/example/layered-rhcos@sha256:aa", &hosts),
            None
        );
        assert_eq!(in_cluster_registry_host("quay.io/x@sha256:aa", &[]), None);
    }
}
