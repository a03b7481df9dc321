//! What `compare` prints: one row per pool and spec, a summary line, as text for people or
//! JSON for automation (`--output json`). Pure.

use std::fmt::Write as _;

use serde::Serialize;

use super::verdict::Verdict;

/// The whole comparison. Serialized as is for `--output json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `bootstrap` or `cluster`.
    pub mode: &'static str,
    /// Where this server's state came from.
    pub source: String,
    /// The original's URL (`--against`).
    pub against: String,
    /// The address the requests were sent from (`--client-address`), when one was given.
    pub client_address: Option<String>,
    /// The `User-Agent` of the requests, as the original's log shows them.
    pub user_agent: &'static str,
    /// Anything else worth knowing (cluster caches that did not sync).
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
    pub summary: Summary,
}

/// One request: a pool at one spec, both answers and the verdict.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub pool: String,
    /// The spec asked for (`none`: no Accept header).
    pub spec: &'static str,
    #[serde(flatten)]
    pub verdict: Verdict,
    pub ours: Side,
    /// The original's answer.
    pub original: Side,
}

/// One side's answer, described.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub status: u16,
    pub bytes: usize,
    /// This server: the spec version served, on 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_spec: Option<&'static str>,
    /// This server: why no config is served (`kind: message`), when none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How many rows of each verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub compared: usize,
    pub identical: usize,
    pub same_json: usize,
    pub deviation: usize,
    pub status: usize,
    pub different: usize,
}

impl Summary {
    pub fn of(rows: &[Row]) -> Summary {
        let mut summary = Summary {
            compared: rows.len(),
            ..Summary::default()
        };
        for row in rows {
            *match row.verdict {
                Verdict::Identical => &mut summary.identical,
                Verdict::SameJson { .. } => &mut summary.same_json,
                Verdict::Deviation { .. } => &mut summary.deviation,
                Verdict::Status { .. } => &mut summary.status,
                Verdict::Different { .. } => &mut summary.different,
            } += 1;
        }
        summary
    }

    /// Nothing stops the switch: no row is `status` or `different`.
    pub fn passes(&self) -> bool {
        self.status == 0 && self.different == 0
    }
}

/// The report for people: a header, one aligned row per request, the summary line.
pub fn format_text(report: &Report) -> String {
    let mut out = String::new();
    let from = report
        .client_address
        .as_deref()
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "comparing {} mode ({}) with {}{from}",
        report.mode, report.source, report.against
    );
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let pool_width = report
        .rows
        .iter()
        .map(|row| row.pool.len())
        .chain([4])
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        out,
        "{:pool_width$}  {:5}  {:10}  DETAIL",
        "POOL", "SPEC", "VERDICT"
    );
    for row in &report.rows {
        // One line per row, whatever an error message holds.
        let detail = detail(row).replace('\n', "; ");
        let _ = writeln!(
            out,
            "{:pool_width$}  {:5}  {:10}  {detail}",
            row.pool,
            row.spec,
            row.verdict.name(),
        );
    }
    let s = &report.summary;
    let _ = writeln!(
        out,
        "summary: {} answers compared: {} identical, {} same-json, {} deviation, {} status, {} different{}",
        s.compared,
        s.identical,
        s.same_json,
        s.deviation,
        s.status,
        s.different,
        if s.passes() {
            ""
        } else {
            ": a machine would be served something else"
        }
    );
    out
}

fn detail(row: &Row) -> String {
    match &row.verdict {
        Verdict::Identical => match row.ours.served_spec {
            Some(spec) => format!("{}, {} bytes, spec {spec}", row.ours.status, row.ours.bytes),
            None => format!("{}, {} bytes", row.ours.status, row.ours.bytes),
        },
        Verdict::SameJson {
            offset,
            ours,
            theirs,
        } => format!("equal as JSON; bytes differ at {offset}: ours {ours:?}, original {theirs:?}"),
        Verdict::Deviation { deviations } => {
            format!(
                "{} (documented in docs/compatibility.md)",
                deviations.join(", ")
            )
        }
        Verdict::Status { ours, theirs } => {
            let mut text = format!("ours {ours}, original {theirs}");
            if let Some(error) = &row.ours.error {
                let _ = write!(text, " (ours: {error})");
            }
            text
        }
        Verdict::Different { path, ours, theirs } => {
            format!("{path}: ours {ours}, original {theirs}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pool: &str, spec: &'static str, verdict: Verdict) -> Row {
        Row {
            pool: pool.into(),
            spec,
            verdict,
            ours: Side {
                status: 200,
                bytes: 10,
                served_spec: Some("3.4.0"),
                error: None,
            },
            original: Side {
                status: 200,
                bytes: 10,
                served_spec: None,
                error: None,
            },
        }
    }

    fn report(rows: Vec<Row>) -> Report {
        Report {
            mode: "bootstrap",
            source: "base directory /d".into(),
            against: "https://h:22623".into(),
            client_address: None,
            user_agent: "machine-config-server-compare/0",
            notes: Vec::new(),
            summary: Summary::of(&rows),
            rows,
        }
    }

    #[test]
    fn text_has_one_row_per_request_and_a_summary() {
        let report = report(vec![
            row("master", "3.4.0", Verdict::Identical),
            row(
                "master",
                "2.2.0",
                Verdict::Deviation {
                    deviations: vec!["sourceless-files-2.2"],
                },
            ),
            row(
                "arbiter",
                "3.5.0",
                Verdict::Different {
                    path: "storage.files[0].mode".into(),
                    ours: "420".into(),
                    theirs: "384".into(),
                },
            ),
        ]);
        let text = format_text(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "comparing bootstrap mode (base directory /d) with https://h:22623"
        );
        assert_eq!(lines[1], "POOL     SPEC   VERDICT     DETAIL");
        assert_eq!(
            lines[2],
            "master   3.4.0  identical   200, 10 bytes, spec 3.4.0"
        );
        assert!(lines[3].starts_with("master   2.2.0  deviation   sourceless-files-2.2"));
        assert_eq!(
            lines[4],
            "arbiter  3.5.0  different   storage.files[0].mode: ours 420, original 384"
        );
        assert_eq!(
            lines[5],
            "summary: 3 answers compared: 1 identical, 0 same-json, 1 deviation, 0 status, 1 different: a machine would be served something else"
        );
        assert!(!report.summary.passes());
    }

    #[test]
    fn json_rows_carry_the_verdict_and_both_sides() {
        let report = report(vec![row(
            "master",
            "none",
            Verdict::Status {
                ours: 200,
                theirs: 500,
            },
        )]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["rows"][0]["verdict"], "status");
        assert_eq!(
            json["rows"][0]["detail"],
            serde_json::json!({"ours": 200, "theirs": 500})
        );
        assert_eq!(json["rows"][0]["ours"]["status"], 200);
        assert_eq!(
            json["rows"][0]["original"],
            serde_json::json!({"status": 200, "bytes": 10})
        );
        assert_eq!(json["summary"]["status"], 1);
        assert_eq!(json["summary"]["compared"], 1);
    }
}
