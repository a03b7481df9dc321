//! The console dashboard the project ships (`config/deploy/dashboard/machine-config-server.json`)
//! read as its panels and their queries: what `tests/dashboard.rs` checks and what the
//! rehearsal's operator view (`rehearsal::dashboard`) evaluates on a real Prometheus.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

/// The dashboard's JSON file.
pub fn path() -> PathBuf {
    crate::mcs::repo().join("config/deploy/dashboard/machine-config-server.json")
}

/// The dashboard as JSON.
pub fn load() -> Result<Value, String> {
    let path = path();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every panel that is not a row, rows' own panels included (a collapsed row holds them), in
/// the order the console shows them.
pub fn panels(dashboard: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        if panel["type"] == "row" {
            out.extend(panel["panels"].as_array().cloned().unwrap_or_default());
        } else {
            out.push(panel.clone());
        }
    }
    out
}

/// One query of a panel: its PromQL and the legend its series get (`{{label}}` replaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub panel: String,
    /// `graph`, `table` or `singlestat`.
    pub kind: String,
    pub expr: String,
    pub legend: Option<String>,
}

/// Every panel's every query, in the dashboard's order.
pub fn queries(dashboard: &Value) -> Vec<Query> {
    panels(dashboard)
        .iter()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            let kind = panel["type"].as_str().unwrap_or_default().to_owned();
            panel["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |target| Query {
                    panel: title.clone(),
                    kind: kind.clone(),
                    expr: target["expr"].as_str().unwrap_or_default().to_owned(),
                    legend: target["legendFormat"]
                        .as_str()
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned),
                })
        })
        .collect()
}

/// A series' name on a panel: the legend format with each `{{label}}` replaced by the label's
/// value (as Grafana does), or the labels themselves where the query has no legend.
pub fn legend(format: Option<&str>, labels: &BTreeMap<String, String>) -> String {
    match format {
        Some(format) => {
            let mut out = String::new();
            let mut rest = format;
            while let Some(open) = rest.find("{{") {
                out.push_str(&rest[..open]);
                let after = &rest[open + 2..];
                let Some(close) = after.find("}}") else {
                    out.push_str(&rest[open..]);
                    rest = "";
                    break;
                };
                let name = after[..close].trim();
                out.push_str(labels.get(name).map(String::as_str).unwrap_or(""));
                rest = &after[close + 2..];
            }
            out.push_str(rest);
            out
        }
        None if labels.is_empty() => "value".to_string(),
        None => labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legends_replace_labels_as_grafana_does() {
        let labels: BTreeMap<String, String> = [("pool", "worker"), ("code", "200")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            legend(Some("{{pool}}: newest build waiting"), &labels),
            "worker: newest build waiting"
        );
        assert_eq!(legend(Some("p99"), &labels), "p99");
        assert_eq!(legend(None, &labels), "code=200, pool=worker");
        assert_eq!(legend(None, &BTreeMap::new()), "value");
    }
}
