//! The text form of an [`Explanation`](super::Explanation), for a person at a terminal.

use super::report::{reason_meaning, Explanation, FileOrigin, ServedFile};

const LABEL_WIDTH: usize = 18;

/// The report as text for a person.
pub fn format_text(e: &Explanation) -> String {
    let mut out = format!("What a node asking for /config/{} would get:\n", e.pool);
    let mut line = |label: &str, value: &str| {
        let mut first = true;
        for part in value.split('\n') {
            let label = if first { label } else { "" };
            out.push_str(&format!("  {label:<LABEL_WIDTH$}{part}\n"));
            first = false;
        }
    };
    line("mode:", &format!("{} ({})", e.mode, e.source));
    let known = if e.known_pools.is_empty() {
        "none".to_string()
    } else {
        e.known_pools.join(", ")
    };
    let pool_state = match (&e.pool_problem, e.pool_found) {
        (None, _) => "found".to_string(),
        (Some(problem), false) if problem.starts_with("unknown") => problem.clone(),
        (Some(problem), true) => format!("found but unusable: {problem}"),
        (Some(problem), false) => format!("not found: {problem}"),
    };
    line(
        "pool:",
        &format!("{} ({pool_state}; known pools: {known})", e.pool),
    );
    match &e.selection {
        Some(s) => {
            let name = if s.rendered_config.is_empty() {
                "(none)"
            } else {
                &s.rendered_config
            };
            line(
                "rendered config:",
                &format!("{name} ({})\n{}", s.machine_config, s.rule),
            );
        }
        None => line("rendered config:", "(no usable pool)"),
    }
    let spec = match (&e.spec_version, e.spec_version_from, &e.accept) {
        (Some(v), "accept", Some(accept)) => format!("{v}, negotiated from Accept: {accept}"),
        (Some(v), _, _) => format!("{v} (--spec)"),
        (None, _, Some(accept)) => format!("none: Accept {accept:?} names no servable version"),
        (None, _, None) => "none".to_string(),
    };
    line("spec version:", &spec);
    if let Some(rule) = &e.spec_rule {
        line("version rule:", rule);
    }
    line("layered image:", &layered_text(e));
    if e.mode == "cluster" {
        let readiness = if e.waiting_for.is_empty() {
            "every cache this pool reads has synced".to_string()
        } else {
            format!(
                "waiting for the {} caches to sync",
                e.waiting_for.join(", ")
            )
        };
        line("readiness:", &readiness);
    }
    if let Some(features) = &e.features {
        let text: Vec<String> = features
            .iter()
            .map(|f| match (&f.why_off, f.when_off) {
                (None, _) => format!("{}: on", f.feature),
                (Some(why), Some(instead)) => format!("{}: off ({why}); {instead}", f.feature),
                (Some(why), None) => format!("{}: off ({why})", f.feature),
            })
            .collect();
        line("features:", &text.join("\n"));
    }
    line("answer:", &format!("{} {}", e.status, e.status_text));
    if let Some(error) = &e.error {
        line(
            "error:",
            &format!("{} (kind: {})", error.message, error.kind),
        );
    }
    line("on the node:", e.node_behaviour);
    if let Some(served) = &e.served {
        line(
            "body:",
            &format!(
                "{} bytes, Ignition {}",
                served.body_bytes, served.ignition_version
            ),
        );
        line(
            "files:",
            &format!(
                "{} (in served order)\n{}",
                served.files.len(),
                files_table(&served.files)
            ),
        );
        line("systemd units:", &served.systemd_units.to_string());
        let k = &served.kernel_arguments;
        line(
            "kernel args:",
            &format!(
                "Ignition shouldExist: {}; shouldNotExist: {}\nMachineConfig spec.kernelArguments: {}",
                list_or_none(&k.ignition_should_exist),
                list_or_none(&k.ignition_should_not_exist),
                list_or_none(&k.machine_config)
            ),
        );
        line(
            "OS image:",
            served
                .os_image_url
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("(none: the node keeps the image it booted)"),
        );
        line(
            "node image:",
            served
                .node_annotations_image
                .as_deref()
                .unwrap_or("(none in the node annotations)"),
        );
        let ca = served
            .files
            .iter()
            .any(|f| f.path == crate::render::MCS_CA_BUNDLE_PATH);
        let reports = match (&served.machine_config_server_url, ca) {
            (Some(url), true) => format!("{url}/v1/node-failure, trusting the failure-report CA"),
            (Some(url), false) => format!("{url}/v1/node-failure (no failure-report CA served)"),
            (None, true) => {
                "nowhere: the failure-report CA is served, no machineConfigServerURL".to_string()
            }
            (None, false) => "not told (--advertise-failure-reporting is off)".to_string(),
        };
        line("failure reports:", &reports);
    }
    if let Some(certificate) = &e.serving_certificate {
        line("serving cert:", &super::certificate::text(certificate));
    }
    for note in &e.notes {
        line("note:", note);
    }
    out
}

fn layered_text(e: &Explanation) -> String {
    let Some(decision) = &e.layered else {
        return match e.mode {
            "bootstrap" => "not layered (bootstrap mode)".to_string(),
            _ => "not decided (the request failed before the render decided it)".to_string(),
        };
    };
    let mut details = Vec::new();
    let mut detail = |label: &str, value: &Option<String>| {
        if let Some(value) = value {
            details.push(format!("{label} {value}"));
        }
    };
    detail("MachineOSConfig", &decision.machine_os_config);
    detail("MachineOSBuild", &decision.machine_os_build);
    if decision.build_image != decision.image {
        detail("build image", &decision.build_image);
    }
    detail("validated by node", &decision.validated_by);
    let head = match &decision.image {
        Some(image) => format!("layered image {image}"),
        None => "base image".to_string(),
    };
    let mut text = format!(
        "{head}: {} ({})",
        decision.reason,
        reason_meaning(decision.reason)
    );
    if !details.is_empty() {
        text.push('\n');
        text.push_str(&details.join(", "));
    }
    text
}

pub(super) fn files_table(files: &[ServedFile]) -> String {
    let mut rows = vec![format!("{:<6} {:>9}  PATH", "MODE", "BYTES")];
    for file in files {
        let mode = file
            .mode
            .map(|m| format!("{m:04o}"))
            .unwrap_or_else(|| "-".to_string());
        let size = match (file.size, file.contents) {
            (Some(size), _) => size.to_string(),
            (None, kind) => kind.to_string(),
        };
        let mut marks = Vec::new();
        match file.origin {
            FileOrigin::MachineConfig => {}
            FileOrigin::Replaced => marks.push("replaced by server"),
            FileOrigin::Appended => marks.push("appended by server"),
        }
        if let Some(role) = file
            .role
            .filter(|_| file.origin != FileOrigin::MachineConfig)
        {
            marks.push(role);
        }
        let compression = file
            .compression
            .as_deref()
            .map(|c| format!(" ({c} compressed)"))
            .unwrap_or_default();
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!("  [{}]", marks.join(": "))
        };
        rows.push(format!(
            "{mode:<6} {size:>9}  {}{compression}{marks}",
            file.path
        ));
    }
    rows.join("\n")
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(" ")
    }
}
