//! The report of `cleanup`: what was found, what became of it, what stays and why, as text or
//! JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::inventory::{EventSummary, Holder, Item, Kept, Outcome};

/// Everything `cleanup` says.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `dry-run` or `remove`.
    pub mode: &'static str,
    /// The kubeconfig, or the in-cluster configuration.
    pub source: String,
    /// A replica holding the publisher's Lease: this server still runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// What of this server was found, each with what became of it.
    pub items: Vec<Item>,
    /// `--remove`: what is still there once the removals are done (read again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_after: Option<Vec<Item>>,
    /// What of this server stays, on purpose.
    pub kept: Vec<Kept>,
    pub events: EventSummary,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    pub summary: Summary,
}

/// The counts of a [`Report`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub found: usize,
    pub removed: usize,
    pub failed: usize,
    /// What of this server is still in the cluster (Events and what is kept on purpose aside):
    /// the exit code is 0 only when this is 0.
    pub left: usize,
}

impl Report {
    /// The items still in the cluster: after `--remove`, those read again; in a dry run (or
    /// when nothing was removed), those found.
    pub fn left(&self) -> &[Item] {
        self.left_after.as_deref().unwrap_or(&self.items)
    }

    /// Fills [`Report::summary`] from the items.
    pub fn summarize(&mut self) {
        self.summary = Summary {
            found: self.items.len(),
            removed: self
                .items
                .iter()
                .filter(|i| i.outcome == Outcome::Removed)
                .count(),
            failed: self
                .items
                .iter()
                .filter(|i| matches!(i.outcome, Outcome::Failed(_)))
                .count(),
            left: self.left().len(),
        };
    }

    /// One line naming what is left (at most five things), for the exit status's message.
    pub fn left_line(&self) -> String {
        const SHOWN: usize = 5;
        let left = self.left();
        let mut names: Vec<String> = left
            .iter()
            .take(SHOWN)
            .map(|item| {
                let outcome = self
                    .items
                    .iter()
                    .find(|i| {
                        i.kind == item.kind
                            && i.name == item.name
                            && std::mem::discriminant(&i.action)
                                == std::mem::discriminant(&item.action)
                    })
                    .map(|i| &i.outcome);
                let why = match outcome {
                    Some(Outcome::Failed(reason)) => format!(" (failed: {reason})"),
                    _ => String::new(),
                };
                format!("{}{why}", name(item))
            })
            .collect();
        if left.len() > SHOWN {
            names.push(format!("and {} more", left.len() - SHOWN));
        }
        format!(
            "{} {} of this server left in the cluster: {}",
            left.len(),
            if left.len() == 1 { "thing" } else { "things" },
            names.join("; ")
        )
    }
}

fn name(item: &Item) -> String {
    let object = match &item.namespace {
        Some(namespace) => format!("{} {namespace}/{}", item.kind, item.name),
        None => format!("{} {}", item.kind, item.name),
    };
    format!("{object}: {}", item.what)
}

/// The report as people read it.
pub fn format_text(report: &Report) -> String {
    let mut out = String::new();
    let mode = match report.mode {
        "remove" => "--remove: removing what is listed",
        _ => "dry run: nothing is changed; --remove removes what is listed",
    };
    let _ = writeln!(out, "machine-config-server cleanup ({mode})");
    let _ = writeln!(out, "cluster: {}", report.source);
    if let Some(holder) = &report.holder {
        let _ = writeln!(
            out,
            "this server still runs: {} holds its Lease until {} unless it renews it; stop every replica before --remove",
            holder.identity, holder.until
        );
    }
    if report.items.is_empty() {
        let _ = writeln!(out, "this server's, in the cluster: nothing");
    } else {
        let _ = writeln!(out, "this server's, in the cluster:");
        for item in &report.items {
            let outcome = match &item.outcome {
                Outcome::Listed => String::new(),
                Outcome::Removed => " -> removed".to_owned(),
                Outcome::Failed(reason) => format!(" -> FAILED: {reason}"),
                Outcome::NotRemoved(reason) => format!(" -> not removed: {reason}"),
            };
            let _ = writeln!(out, "  {}{outcome}", name(item));
            if !item.fields.is_empty() {
                let _ = writeln!(out, "      {}", item.fields.join(", "));
            }
            let _ = writeln!(out, "      removal: {}", item.removal);
        }
    }
    if let Some(after) = &report.left_after {
        if after.is_empty() {
            let _ = writeln!(out, "left after removal: nothing");
        } else {
            let _ = writeln!(out, "left after removal:");
            for item in after {
                let _ = writeln!(out, "  {}", name(item));
            }
        }
    }
    if !report.kept.is_empty() {
        let _ = writeln!(out, "kept on purpose:");
        // One line per kind of thing kept, naming the objects.
        let mut grouped: BTreeMap<(&str, &str, &str), Vec<&str>> = BTreeMap::new();
        for kept in &report.kept {
            grouped
                .entry((kept.kind, &kept.what, &kept.why))
                .or_default()
                .push(&kept.name);
        }
        for ((kind, what, why), names) in grouped {
            let _ = writeln!(out, "  {kind} {}: {what}: {why}", shortened(&names));
        }
    }
    let events = &report.events;
    match &events.error {
        Some(error) => {
            let _ = writeln!(
                out,
                "events: not listed ({error}); any this server reported expire on their own"
            );
        }
        None if events.count == 0 => {
            let _ = writeln!(
                out,
                "events: none in {} reported by {}",
                events.namespace, events.reporting_controller
            );
        }
        None => {
            let reasons: Vec<String> = events
                .reasons
                .iter()
                .map(|(reason, count)| format!("{reason} {count}"))
                .collect();
            let _ = writeln!(
                out,
                "events: {} in {} reported by {} ({}), left: each expires one event TTL after it was last written (kube-apiserver --event-ttl, 1 h by default){}",
                events.count,
                events.namespace,
                events.reporting_controller,
                reasons.join(", "),
                events
                    .newest
                    .as_deref()
                    .map(|t| format!("; the newest was written at {t}"))
                    .unwrap_or_default()
            );
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let summary = &report.summary;
    let verdict = match (report.mode, summary.left) {
        (_, 0) => "nothing of this server is left".to_owned(),
        ("remove", left) => format!("{left} left"),
        (_, left) => format!("{left} left (cleanup --remove removes them)"),
    };
    let _ = writeln!(
        out,
        "summary: {} found, {} removed, {} failed; {verdict}",
        summary.found, summary.removed, summary.failed
    );
    out
}

/// At most ten names, then how many more.
fn shortened(names: &[&str]) -> String {
    const SHOWN: usize = 10;
    let mut text = names
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        let _ = write!(text, " and {} more", names.len() - SHOWN);
    }
    text
}
