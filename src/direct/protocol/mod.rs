//! The three wire protocols the direct runtime speaks — OpenAI Chat Completions, OpenAI
//! Responses and Anthropic Messages — behind one shape: an [`Exchange`] holds a stage's
//! conversation in the protocol's own message form (so reasoning and thinking blocks are replayed
//! exactly, in order), builds the next request body, and parses a response into a [`Turn`].
//!
//! Invariants: a response is either a complete [`Turn`] or a typed [`ProtocolError`] (fail
//! closed: an unknown content block, a tool call whose arguments are not a JSON object, a
//! response without a finish, are errors, never guesses). Usage comes only from the API's own
//! fields; a field the API did not send stays `None`.

pub mod anthropic;
pub mod chat;
pub mod responses;
pub mod stream;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::events::Usage;

/// Which wire protocol an endpoint speaks (serialized strings are API: endpoint files, identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// `POST {base}/chat/completions`, Bearer key.
    ChatCompletions,
    /// `POST {base}/responses`, Bearer key.
    Responses,
    /// `POST {base}/messages`, `x-api-key`, `anthropic-version: 2023-06-01`.
    AnthropicMessages,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [
        Protocol::ChatCompletions,
        Protocol::Responses,
        Protocol::AnthropicMessages,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::ChatCompletions => "chat_completions",
            Protocol::Responses => "responses",
            Protocol::AnthropicMessages => "anthropic_messages",
        }
    }

    pub fn parse(text: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// The path appended to the endpoint's base URL (which carries the version, e.g. `/v1`).
    pub fn path(self) -> &'static str {
        match self {
            Protocol::ChatCompletions => "/chat/completions",
            Protocol::Responses => "/responses",
            Protocol::AnthropicMessages => "/messages",
        }
    }
}

/// The request field that caps the response length (Chat Completions endpoints differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TokenField {
    #[default]
    MaxCompletionTokens,
    MaxTokens,
}

impl TokenField {
    /// The request field's name.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenField::MaxCompletionTokens => "max_completion_tokens",
            TokenField::MaxTokens => "max_tokens",
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The API's call id (answered with the result).
    pub id: String,
    pub name: String,
    /// Always a JSON object (anything else is a [`ProtocolError::MalformedToolCall`]).
    pub arguments: Value,
}

/// Why the model stopped answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It ended its turn (text, possibly with tool calls on Anthropic/Responses).
    EndTurn,
    /// It wants tool results.
    ToolCalls,
    /// The response cap cut it off.
    Length,
    /// The provider's content filter stopped it.
    ContentFilter,
}

/// One parsed model response.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub text: Option<String>,
    /// Reasoning text the API showed (for the event log; the exact blocks are in `replay`).
    pub reasoning: Option<String>,
    pub calls: Vec<ToolCall>,
    pub stop: StopReason,
    pub usage: Usage,
    /// The assistant's turn in the protocol's own form, appended to the history as is.
    pub replay: Vec<Value>,
}

/// A response that cannot be used: the stage fails closed with a typed pause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("the response is not JSON: {0}")]
    NotJson(String),
    #[error("the response has no {0}")]
    Missing(&'static str),
    #[error("the response is incomplete ({0})")]
    Incomplete(String),
    #[error("the response holds content this runtime does not support: {0}")]
    Unsupported(String),
    #[error("tool call `{name}` has malformed arguments: {detail}")]
    MalformedToolCall { name: String, detail: String },
}

/// What one tool call came to, as the model is told.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub output: String,
    pub is_error: bool,
}

/// The parameters of every request of a stage.
#[derive(Debug, Clone)]
pub struct RequestParams<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub tools: &'a [ToolSpec],
    pub max_output_tokens: u32,
    pub token_field: TokenField,
    /// Ask for a streamed (SSE) response.
    pub stream: bool,
    /// Whether the model must call a tool.
    pub tool_choice: ToolChoice,
    /// A JSON schema the whole answer must follow (`response_format` / `text.format`): the
    /// report asked as constrained text, with no tools offered. Only sent where the server
    /// said it constrains output to a schema (`crate::direct::runtime::Steering`).
    pub answer_schema: Option<&'a Value>,
}

/// Whether a request lets the model answer in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    /// The field is not sent (the API's default: the model may answer in text).
    Unset,
    /// The model must call one of the offered tools (`"required"`; Anthropic `{"type": "any"}`).
    Required,
}

/// A stage's conversation in one protocol's own message form.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub protocol: Protocol,
    messages: Vec<Value>,
}

impl Exchange {
    /// A fresh context holding the stage's prompt.
    pub fn new(protocol: Protocol, prompt: &str) -> Exchange {
        let mut exchange = Exchange {
            protocol,
            messages: Vec::new(),
        };
        exchange.push_user_text(prompt);
        exchange
    }

    /// The messages so far (tests, logs).
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// A user message (the prompt, or a reminder).
    pub fn push_user_text(&mut self, text: &str) {
        self.messages.push(match self.protocol {
            Protocol::ChatCompletions => chat::user_message(text),
            Protocol::Responses => responses::user_message(text),
            Protocol::AnthropicMessages => anthropic::user_message(text),
        });
    }

    /// An assistant turn of plain text that autocode built (an answer cut short, whose stream
    /// never ended): the model's own words, in the protocol's form.
    pub fn push_assistant_text(&mut self, text: &str) {
        self.messages.push(match self.protocol {
            Protocol::ChatCompletions => json!({"role": "assistant", "content": text}),
            Protocol::Responses => json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}),
            Protocol::AnthropicMessages => {
                json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
            }
        });
    }

    /// The model's turn, as it gave it.
    pub fn push_turn(&mut self, turn: &Turn) {
        self.messages.extend(turn.replay.iter().cloned());
    }

    /// The results of one response's tool calls, in call order.
    pub fn push_results(&mut self, results: &[ToolResult]) {
        match self.protocol {
            Protocol::ChatCompletions => {
                self.messages.extend(results.iter().map(chat::tool_result))
            }
            Protocol::Responses => self
                .messages
                .extend(results.iter().map(responses::tool_result)),
            Protocol::AnthropicMessages => {
                if !results.is_empty() {
                    self.messages.push(anthropic::tool_results(results));
                }
            }
        }
    }

    /// The body of the next request.
    pub fn request_body(&self, params: &RequestParams<'_>) -> Value {
        let mut body = match self.protocol {
            Protocol::ChatCompletions => chat::request(params, &self.messages),
            Protocol::Responses => responses::request(params, &self.messages),
            Protocol::AnthropicMessages => anthropic::request(params, &self.messages),
        };
        if params.tool_choice == ToolChoice::Required && !params.tools.is_empty() {
            body["tool_choice"] = match self.protocol {
                Protocol::AnthropicMessages => serde_json::json!({"type": "any"}),
                Protocol::ChatCompletions | Protocol::Responses => Value::from("required"),
            };
        }
        if let Some(schema) = params.answer_schema {
            match self.protocol {
                Protocol::ChatCompletions => {
                    body["response_format"] = serde_json::json!({"type": "json_schema",
                        "json_schema": {"name": "report", "strict": true, "schema": schema}});
                }
                Protocol::Responses => {
                    body["text"] = serde_json::json!({"format": {"type": "json_schema",
                        "name": "report", "strict": true, "schema": schema}});
                }
                // Anthropic Messages has no schema-constrained answer; the runtime never asks.
                Protocol::AnthropicMessages => {}
            }
        }
        if params.tools.is_empty()
            && let Some(fields) = body.as_object_mut()
        {
            // No tools offered: no empty `tools` list (some servers refuse one).
            fields.remove("tools");
        }
        if params.stream {
            body["stream"] = Value::Bool(true);
            if self.protocol == Protocol::ChatCompletions {
                body["stream_options"] = serde_json::json!({"include_usage": true});
            }
        }
        body
    }

    /// Parses a streamed (SSE) response body of this protocol.
    pub fn parse_stream(&self, body: &[u8]) -> Result<Turn, ProtocolError> {
        let text = String::from_utf8_lossy(body);
        let assembled = stream::assemble(self.protocol, &text)?;
        self.parse_response(assembled.to_string().as_bytes())
    }

    /// Parses a response body of this protocol.
    pub fn parse_response(&self, body: &[u8]) -> Result<Turn, ProtocolError> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| ProtocolError::NotJson(e.to_string()))?;
        if !value.is_object() {
            return Err(ProtocolError::NotJson("not a JSON object".into()));
        }
        match self.protocol {
            Protocol::ChatCompletions => chat::parse(&value),
            Protocol::Responses => responses::parse(&value),
            Protocol::AnthropicMessages => anthropic::parse(&value),
        }
    }
}

/// The usage fields of a response body that could not be used as a turn (failed turns still
/// count): whatever usage fields it carries, in the events' convention.
pub fn usage_of(protocol: Protocol, body: &[u8]) -> Usage {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return Usage::default();
    };
    match protocol {
        Protocol::ChatCompletions => openai_usage(
            count(&value, "/usage/prompt_tokens"),
            count(&value, "/usage/prompt_tokens_details/cached_tokens"),
            count(&value, "/usage/completion_tokens"),
            count(&value, "/usage/completion_tokens_details/reasoning_tokens"),
        ),
        Protocol::Responses => openai_usage(
            count(&value, "/usage/input_tokens"),
            count(&value, "/usage/input_tokens_details/cached_tokens"),
            count(&value, "/usage/output_tokens"),
            count(&value, "/usage/output_tokens_details/reasoning_tokens"),
        ),
        Protocol::AnthropicMessages => Usage {
            input_tokens: count(&value, "/usage/input_tokens"),
            cache_read_tokens: count(&value, "/usage/cache_read_input_tokens"),
            cache_write_tokens: count(&value, "/usage/cache_creation_input_tokens"),
            output_tokens: count(&value, "/usage/output_tokens"),
            reasoning_tokens: None,
            cost_usd: None,
            cost_source: None,
        },
    }
}

/// Tool-call arguments as a JSON object: a JSON text (OpenAI) or an object (Anthropic).
pub(crate) fn arguments_object(name: &str, raw: Option<&Value>) -> Result<Value, ProtocolError> {
    let malformed = |detail: String| ProtocolError::MalformedToolCall {
        name: name.to_owned(),
        detail,
    };
    let value = match raw {
        None => return Err(malformed("no arguments".into())),
        Some(Value::String(text)) if text.trim().is_empty() => Value::Object(Default::default()),
        Some(Value::String(text)) => {
            serde_json::from_str::<Value>(text).map_err(|e| malformed(format!("not JSON: {e}")))?
        }
        Some(other) => other.clone(),
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(malformed("not a JSON object".into()))
    }
}

/// A `u64` field, if the API sent one.
pub(crate) fn count(value: &Value, pointer: &str) -> Option<u64> {
    value.pointer(pointer).and_then(Value::as_u64)
}

/// OpenAI's convention (prompt tokens include the cached ones) into the events' one.
pub(crate) fn openai_usage(
    total_in: Option<u64>,
    cached: Option<u64>,
    output: Option<u64>,
    reasoning: Option<u64>,
) -> Usage {
    Usage {
        input_tokens: total_in.map(|t| t.saturating_sub(cached.unwrap_or(0))),
        cache_read_tokens: cached,
        cache_write_tokens: None,
        output_tokens: output,
        reasoning_tokens: reasoning,
        cost_usd: None,
        cost_source: None,
    }
}

#[cfg(test)]
mod tests;
