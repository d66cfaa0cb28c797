//! Stage reports: the JSON each stage must return, checked against its schema and never believed.
//!
//! The schemas live in `schemas/<stage>.schema.json` (JSON Schema 2020-12, closed objects) and are
//! compiled into the binary; the same text is handed to the CLIs (`--output-schema`,
//! `--json-schema`, or the prompt). Validation lists every violation with its instance path so a
//! report-only repair can be told exactly what was wrong. [`evidence`] checks the commands a
//! report cites against the attempt's own command events.

pub mod evidence;
pub mod ledger;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kinds of stage report, one schema each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportKind {
    Requirements,
    Plan,
    PlanReview,
    Build,
    Test,
    Completion,
    /// The resolver's diagnosis of a stuck milestone.
    Resolution,
}

impl ReportKind {
    pub const ALL: [ReportKind; 7] = [
        ReportKind::Requirements,
        ReportKind::Plan,
        ReportKind::PlanReview,
        ReportKind::Build,
        ReportKind::Test,
        ReportKind::Completion,
        ReportKind::Resolution,
    ];

    /// The stable name, also the schema's file stem.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Requirements => "requirements",
            ReportKind::Plan => "plan",
            ReportKind::PlanReview => "plan_review",
            ReportKind::Build => "build",
            ReportKind::Test => "test",
            ReportKind::Completion => "completion",
            ReportKind::Resolution => "resolution",
        }
    }

    /// The schema text exactly as shipped in `schemas/`.
    pub fn schema_text(self) -> &'static str {
        match self {
            ReportKind::Requirements => include_str!("../../schemas/requirements.schema.json"),
            ReportKind::Plan => include_str!("../../schemas/plan.schema.json"),
            ReportKind::PlanReview => include_str!("../../schemas/plan_review.schema.json"),
            ReportKind::Build => include_str!("../../schemas/build.schema.json"),
            ReportKind::Test => include_str!("../../schemas/test.schema.json"),
            ReportKind::Completion => include_str!("../../schemas/completion.schema.json"),
            ReportKind::Resolution => include_str!("../../schemas/resolution.schema.json"),
        }
    }

    /// The schema as JSON. The embedded files are checked by a test, so this cannot fail at run
    /// time unless the binary itself is corrupt.
    pub fn schema(self) -> Value {
        serde_json::from_str(self.schema_text()).unwrap_or(Value::Null)
    }

    /// The schema as handed to a CLI: without the `$schema` keyword, which Claude Code's
    /// validator (draft-07) rejects and strict structured-output APIs do not need. The content
    /// rules are identical; autocode validates with the full 2020-12 schema. A CLI that sends it
    /// to a strict structured-output API hands it on as [`strict_schema`].
    pub fn cli_schema(self) -> Value {
        let mut schema = self.schema();
        if let Some(map) = schema.as_object_mut() {
            map.remove("$schema");
        }
        schema
    }

    /// The top-level field names of the schema (used by the shell-command final-message rule).
    pub fn top_level_fields(self) -> Vec<String> {
        self.schema()
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// `schema` for a strict structured-output API (Codex's `--output-schema` becomes OpenAI's
/// `strict` JSON schema), which wants every property of every object required: each optional
/// property (it also allows `null`, which means absent, as a plan's `prepare` does) is listed in
/// `required`. A report following it is valid under the schema itself.
pub fn strict_schema(schema: &Value) -> Value {
    let mut strict = schema.clone();
    require_nullable(&mut strict);
    strict
}

/// Lists in `required` every property of every object of `schema` that allows `null`.
fn require_nullable(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let nullable: Vec<Value> = map
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter(|(_, property)| match &property["type"] {
                    Value::String(t) => t == "null",
                    Value::Array(types) => types.iter().any(|t| t == "null"),
                    _ => false,
                })
                .map(|(name, _)| Value::String(name.clone()))
                .collect();
            if !nullable.is_empty()
                && let Value::Array(required) = map
                    .entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()))
            {
                for name in nullable {
                    if !required.contains(&name) {
                        required.push(name);
                    }
                }
            }
            map.values_mut().for_each(require_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(require_nullable),
        _ => {}
    }
}

/// One way a report breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaViolation {
    /// JSON Pointer to the offending value (`""` is the whole report).
    pub instance_path: String,
    pub message: String,
}

/// Why a final message is not an acceptable report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReportRejection {
    #[error("the final message is not a JSON report: {error}")]
    NotJson { error: String },
    #[error("the report is not a JSON object")]
    NotAnObject,
    #[error("the report breaks its schema in {} place(s): {}", violations.len(), render_violations(violations))]
    Schema { violations: Vec<SchemaViolation> },
}

fn render_violations(violations: &[SchemaViolation]) -> String {
    violations
        .iter()
        .map(|v| {
            let at = if v.instance_path.is_empty() {
                "/"
            } else {
                &v.instance_path
            };
            format!("{at}: {}", v.message)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reads a final message as a JSON object. The whole message must be the object, optionally
/// wrapped in one Markdown code fence (a common model habit that changes nothing).
pub fn parse_report_text(text: &str) -> Result<Value, ReportRejection> {
    let trimmed = text.trim();
    let body = strip_single_fence(trimmed).unwrap_or(trimmed);
    let value: Value = serde_json::from_str(body).map_err(|e| ReportRejection::NotJson {
        error: e.to_string(),
    })?;
    if !value.is_object() {
        return Err(ReportRejection::NotAnObject);
    }
    Ok(value)
}

fn strip_single_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let rest = rest.strip_suffix("```")?;
    let newline = rest.find('\n')?;
    let (info, body) = rest.split_at(newline);
    let info = info.trim();
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) || body.contains("```") {
        return None;
    }
    Some(body.trim())
}

/// Validates `report` against the schema of `kind`, listing every violation.
pub fn validate(kind: ReportKind, report: &Value) -> Result<(), ReportRejection> {
    if !report.is_object() {
        return Err(ReportRejection::NotAnObject);
    }
    let schema = kind.schema();
    let validator = match jsonschema::draft202012::new(&schema) {
        Ok(validator) => validator,
        Err(e) => {
            return Err(ReportRejection::Schema {
                violations: vec![SchemaViolation {
                    instance_path: String::new(),
                    message: format!(
                        "the embedded {} schema does not compile: {e}",
                        kind.as_str()
                    ),
                }],
            });
        }
    };
    let mut violations: Vec<SchemaViolation> = validator
        .iter_errors(report)
        .map(|error| SchemaViolation {
            instance_path: error.instance_path().to_string(),
            message: error.to_string(),
        })
        .collect();
    if violations.is_empty() {
        return Ok(());
    }
    violations.sort_by(|a, b| a.instance_path.cmp(&b.instance_path));
    Err(ReportRejection::Schema { violations })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_embedded_schema_compiles_and_is_closed() {
        for kind in ReportKind::ALL {
            let schema: Value = serde_json::from_str(kind.schema_text())
                .unwrap_or_else(|e| panic!("{} schema is not JSON: {e}", kind.as_str()));
            assert_eq!(
                schema["$schema"],
                "https://json-schema.org/draft/2020-12/schema"
            );
            assert_eq!(schema["additionalProperties"], false, "{}", kind.as_str());
            jsonschema::draft202012::new(&schema).unwrap();
            // Strict structured-output APIs want every property required.
            let required: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            // A top-level field is required, or optional and nullable (as `set_aside_commands`
            // of the brief is): a strict API is then told it is required and may answer null.
            for field in kind.top_level_fields() {
                let nullable = match &schema["properties"][&field]["type"] {
                    Value::Array(types) => types.contains(&json!("null")),
                    other => other == "null",
                };
                assert!(
                    required.contains(&field.as_str()) || nullable,
                    "{field} neither required nor nullable"
                );
            }
            // And every property of every object of what a strict API is handed.
            let mut objects = vec![strict_schema(&kind.cli_schema())];
            while let Some(value) = objects.pop() {
                match value {
                    Value::Object(map) => {
                        if let Some(props) = map.get("properties").and_then(Value::as_object) {
                            for name in props.keys() {
                                assert!(
                                    map["required"]
                                        .as_array()
                                        .is_some_and(|r| r.contains(&json!(name))),
                                    "{}: {name} not required for a strict API",
                                    kind.as_str()
                                );
                            }
                        }
                        objects.extend(map.into_iter().map(|(_, v)| v));
                    }
                    Value::Array(items) => objects.extend(items),
                    _ => {}
                }
            }
        }
    }

    /// A brief's `set_aside_commands` is optional: absent, null, or entries with a reason.
    #[test]
    fn a_briefs_set_asides_are_optional() {
        let mut brief = json!({
            "summary": "s", "goals": ["g"], "constraints": [],
            "acceptance_criteria": [{"id": "a", "text": "t", "covers": ["x"]}],
            "open_questions": []
        });
        assert_eq!(validate(ReportKind::Requirements, &brief), Ok(()));
        for aside in [
            json!(null),
            json!([]),
            json!([{"command": "make e2e", "reason": "needs a browser this machine lacks"}]),
        ] {
            brief["set_aside_commands"] = aside;
            assert_eq!(validate(ReportKind::Requirements, &brief), Ok(()));
        }
        brief["set_aside_commands"] = json!([{"command": "make e2e"}]);
        assert!(validate(ReportKind::Requirements, &brief).is_err());
        let strict = strict_schema(&ReportKind::Requirements.cli_schema());
        assert!(
            strict["required"]
                .as_array()
                .unwrap()
                .contains(&json!("set_aside_commands"))
        );
    }

    /// A plan's `prepare` is optional (a plan without it, as before the field, is valid; null
    /// is none), also for the CLIs; a strict API is told it is required and may answer null.
    #[test]
    fn a_plans_prepare_steps_are_optional() {
        let mut plan = json!({
            "summary": "s",
            "milestones": [{
                "id": "m1", "title": "t", "description": "",
                "acceptance_criteria": [{
                    "id": "c1", "text": "x", "check": "npm test",
                    "human_review": false, "kind": "fail_to_pass"
                }]
            }]
        });
        assert_eq!(validate(ReportKind::Plan, &plan), Ok(()));
        for prepare in [json!(null), json!([]), json!(["npm ci", "npm run build"])] {
            plan["milestones"][0]["prepare"] = prepare;
            assert_eq!(validate(ReportKind::Plan, &plan), Ok(()));
        }
        for bad in [json!("npm ci"), json!([" "]), json!([1])] {
            plan["milestones"][0]["prepare"] = bad;
            assert!(validate(ReportKind::Plan, &plan).is_err());
        }
        let requires_prepare = |schema: &Value| {
            schema["properties"]["milestones"]["items"]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("prepare"))
        };
        let cli = ReportKind::Plan.cli_schema();
        assert!(!requires_prepare(&ReportKind::Plan.schema()));
        assert!(!requires_prepare(&cli));
        assert!(requires_prepare(&strict_schema(&cli)));
    }

    fn valid_build() -> Value {
        json!({
            "status": "done",
            "summary": "Added the flag",
            "files_changed": ["src/main.py"],
            "checks": [{"command": "python -m pytest", "exit_code": 0, "evidence_ref": "event:item_3"}],
            "blockers": []
        })
    }

    #[test]
    fn a_valid_report_passes() {
        assert_eq!(validate(ReportKind::Build, &valid_build()), Ok(()));
    }

    #[test]
    fn every_violation_is_listed_with_its_path() {
        let mut report = valid_build();
        report["status"] = json!("finished");
        report["checks"][0]
            .as_object_mut()
            .unwrap()
            .remove("exit_code");
        report["extra"] = json!(1);
        let Err(ReportRejection::Schema { violations }) = validate(ReportKind::Build, &report)
        else {
            panic!("expected schema violations");
        };
        let paths: Vec<&str> = violations
            .iter()
            .map(|v| v.instance_path.as_str())
            .collect();
        assert!(paths.contains(&"/status"), "{paths:?}");
        assert!(paths.contains(&"/checks/0"), "{paths:?}");
        assert!(paths.contains(&""), "{paths:?}");
        let rendered = ReportRejection::Schema { violations }.to_string();
        assert!(rendered.contains("/status"), "{rendered}");
    }

    #[test]
    fn report_text_parsing() {
        assert!(parse_report_text(r#"{"a":1}"#).is_ok());
        assert!(parse_report_text("```json\n{\"a\":1}\n```").is_ok());
        assert!(parse_report_text("```\n{\"a\":1}\n```").is_ok());
        assert!(matches!(
            parse_report_text("Here it is: {\"a\":1}"),
            Err(ReportRejection::NotJson { .. })
        ));
        assert_eq!(parse_report_text("[1]"), Err(ReportRejection::NotAnObject));
        assert!(parse_report_text("```python\n{\"a\":1}\n```").is_err());
        assert!(parse_report_text("").is_err());
    }

    #[test]
    fn open_questions_are_capped_at_three() {
        let q = json!({"id": "q1", "question": "Which DB?", "proposed_default": "sqlite"});
        let report = json!({
            "summary": "s", "goals": ["g"], "constraints": [],
            "acceptance_criteria": [{"id": "c1", "text": "t"}],
            "open_questions": [q, q, q, q]
        });
        let Err(ReportRejection::Schema { violations }) =
            validate(ReportKind::Requirements, &report)
        else {
            panic!("four questions must be refused");
        };
        assert!(
            violations
                .iter()
                .any(|v| v.instance_path == "/open_questions")
        );
    }
}
